// Test helper: a HostMemory (ports.h) whose pages the test maps, unmaps and write-protects,
// over ordinary memory, so tests of on-demand paging need no mmap and can check that a
// refused access left the bytes untouched; OdpRegion, three pages of it in the three states.
#pragma once
#include <cstdint>
#include <cstring>
#include <map>
#include <new>

#include "engine/ports.h"

namespace vrnic::engine::testing {

class FakeHostMemory final : public HostMemory {
 public:
  explicit FakeHostMemory(uint64_t page_size = 4096) : ps_(page_size) {}
  uint64_t page_size() const { return ps_; }

  // Every page of [p, p+len) becomes present read-write, present read-only, or absent.
  // Nothing is present at first: the engine asks only about on-demand regions, and it must
  // never reach a page the test did not hand out.
  void map(const void* p, uint64_t len) { set(p, len, 2); }
  void map_read_only(const void* p, uint64_t len) { set(p, len, 1); }
  void unmap(const void* p, uint64_t len) { set(p, len, 0); }

  bool pages_present(const uint8_t* p, uint64_t len, bool write) override {
    ++checks;
    if (len == 0) return true;
    const uint64_t start = reinterpret_cast<uintptr_t>(p);
    if (start + len < start) return false;
    for (uint64_t page = start / ps_; page <= (start + len - 1) / ps_; ++page) {
      auto it = pages_.find(page);
      if (it == pages_.end() || it->second < (write ? 2 : 1)) return false;
    }
    return true;
  }

  uint64_t checks = 0;  // pages_present calls so far

 private:
  void set(const void* p, uint64_t len, int state) {
    if (len == 0) return;
    const uint64_t start = reinterpret_cast<uintptr_t>(p);
    for (uint64_t page = start / ps_; page <= (start + len - 1) / ps_; ++page) {
      if (state == 0) pages_.erase(page);
      else pages_[page] = state;
    }
  }

  uint64_t ps_;
  std::map<uint64_t, int> pages_;  // page number -> 1 read-only, 2 read-write
};

// Three pages of ordinary memory, as the node's FakeHostMemory presents them: [0] read-write,
// [1] absent, [2] read-only. The bytes stay readable and writable underneath, so a test can
// check that a refused access changed none of them.
struct OdpRegion {
  FakeHostMemory& host;
  size_t ps = host.page_size();
  uint8_t* base = static_cast<uint8_t*>(::operator new(3 * ps, std::align_val_t(ps)));
  explicit OdpRegion(FakeHostMemory& h) : host(h) {
    std::memset(base, 0x5a, 3 * ps);
    host.map(base, ps);
    host.map_read_only(base + 2 * ps, ps);
  }
  ~OdpRegion() {
    host.unmap(base, 3 * ps);
    ::operator delete(base, std::align_val_t(ps));
  }
  uint64_t addr(size_t page, size_t off = 0) const {
    return reinterpret_cast<uint64_t>(base + page * ps + off);
  }
  bool untouched(size_t page) const {  // every byte of the page still 0x5a
    for (size_t i = 0; i < ps; ++i)
      if (base[page * ps + i] != 0x5a) return false;
    return true;
  }
};

}  // namespace vrnic::engine::testing
