// The engine's clock in a live device: inside a verb, one reading per stretch between the
// device's system calls.
#pragma once
#include <cstdint>

#include "engine/ports.h"

namespace vrnic::live {

uint64_t monotonic_ns();  // CLOCK_MONOTONIC in ns (live_nic.cc)

// Inside a verb (between begin and end, under the device lock) now_ns() gives the time read
// at the verb's start, and reads the clock again only once the device has moved packets since
// its last reading: a verb's time passes in its system calls, while the engine's own work
// between two of them is a fraction of a microsecond (each engine step that arms a timer,
// paces a packet or holds an ACK asks for the time: a polled ping-pong's one-way read the
// clock seven times, ~20 ns each). Outside a verb every call reads the clock, so a thread
// that computes between two verbs never hands the engine a stale time.
class VerbClock final : public engine::Clock {
 public:
  // `moved(ctx)`: a count that grows whenever the device moves packets or copies (the live
  // device's syscall_mark); `read`: the clock.
  using Moved = uint64_t (*)(const void* ctx);
  VerbClock(Moved moved, const void* ctx, uint64_t (*read)() = monotonic_ns)
      : moved_(moved), ctx_(ctx), read_(read) {}

  uint64_t now_ns() const override;
  // Reads the clock, also inside a verb; the verb's later now_ns() gives this reading.
  uint64_t precise_now_ns() const override;
  // A verb starts at `now` (read by the caller), the device's count then `mark`.
  void begin(uint64_t now, uint64_t mark) {
    at_ = now;
    mark_ = mark;
    in_verb_ = true;
  }
  void end() { in_verb_ = false; }

 private:
  Moved moved_;
  const void* ctx_;
  uint64_t (*read_)();
  mutable uint64_t at_ = 0, mark_ = 0;
  bool in_verb_ = false;
};

}  // namespace vrnic::live
