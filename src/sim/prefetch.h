// prefetch_line: start loading the cache line at an address, as an instruction the compiler
// keeps (GCC 12 drops a __builtin_prefetch behind an early return in an inlined member).
#pragma once

namespace vrnic::sim {

inline void prefetch_line(const void* p) {
#if defined(__x86_64__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p);
#endif
}

}  // namespace vrnic::sim
