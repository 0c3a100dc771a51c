// The simulator's discrete-event core: the event queue (ordered by time, then by the order
// of scheduling, so ties are deterministic; a radix heap), the virtual clock the engines read, and the
// seeded random number generator (splitmix64).
#pragma once
#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "engine/ports.h"

namespace vrnic::sim {

// What an event does; `a` and `b` name its target (a port, a host, a flow) and `c` carries
// a small argument (a timer generation, a pause state).
enum class EventKind : uint8_t {
  kTxDone,     // a port finished serialising its current frame: a = port
  kArrive,     // the oldest frame on a link reaches its far end: a = port that sent it
  kPause,      // a PFC frame reaches a port: a = port, b = priority, c = quanta (0: XON)
  kPauseExpire,  // the PAUSE honoured at port a, priority b may have run out
  kPfcRefresh,   // port a sends its XOFF for priority b again if it stands (c: which one)
  kNicRx,      // the NIC of host port a has moved its oldest received frame to memory
  kHostTimer,  // the engine of host a asked to run its timers; c = generation
  kFlowStart,  // flow a posts its first WRITEs (after the NIC's processing delay)
  kWatchdog,   // the PFC watchdog looks at port a, priority b, paused as of generation c
  kRestore,    // the watchdog's restoration timer of port a, priority b
  kNicRelease,  // host a's NIC lets go of the packets it held until now
  kCqeVisible,  // host a's oldest deferred CQE has reached host memory (NIC model)
  kSample,     // the time series takes a sample
};

struct Event {
  uint64_t time = 0;
  uint64_t seq = 0;  // scheduling order: the tie-break
  EventKind kind = EventKind::kTxDone;
  uint32_t a = 0, b = 0;
  uint64_t c = 0;
};

// A radix heap (Ahuja, Mehlhorn, Orlin, Tarjan 1990) on the event time: the simulator only
// schedules at or after the time of the event it runs, so keys are monotone. Bucket 0 holds
// the events of the current minimum time, in scheduling order; bucket i (1..64) those whose
// time first differs from it in bit i-1. Each bucket keeps its events in scheduling order
// (a refill moves a bucket's events, in order, into empty lower buckets), so ties leave in
// the order they were scheduled, as with a heap ordered by (time, seq), at a fraction of the
// cost: an event moves down at most 64 times, mostly once or twice.
class EventQueue {
 public:
  // `time` must not be before the last event taken (std::logic_error otherwise).
  void push(uint64_t time, EventKind kind, uint32_t a, uint32_t b = 0, uint64_t c = 0) {
    if (time < last_) throw std::logic_error("sim: an event scheduled in the past");
    buckets_[bucket_of(time)].push_back(Event{time, next_seq_++, kind, a, b, c});
    ++size_;
  }
  bool empty() const { return size_ == 0; }
  const Event& top() const {
    refill();
    return buckets_[0][head_];
  }
  Event pop() {
    refill();
    std::vector<Event>& now = buckets_[0];
    const Event e = now[head_++];
    --size_;
    if (head_ == now.size()) now.clear(), head_ = 0;
    return e;
  }
  uint64_t scheduled() const { return next_seq_; }
  size_t size() const { return size_; }

 private:
  size_t bucket_of(uint64_t t) const {
    return t == last_ ? 0 : 64 - static_cast<size_t>(std::countl_zero(t ^ last_));
  }
  // Makes bucket 0 hold the earliest events (the queue must not be empty).
  void refill() const {
    if (head_ < buckets_[0].size()) return;
    size_t i = 1;
    while (buckets_[i].empty()) ++i;
    std::vector<Event>& from = buckets_[i];
    uint64_t m = UINT64_MAX;
    for (const Event& e : from) m = std::min(m, e.time);
    last_ = m;
    for (const Event& e : from) buckets_[bucket_of(e.time)].push_back(e);
    from.clear();
  }

  mutable std::array<std::vector<Event>, 65> buckets_;
  mutable size_t head_ = 0;    // the next event of bucket 0
  mutable uint64_t last_ = 0;  // the time of bucket 0's events
  size_t size_ = 0;
  uint64_t next_seq_ = 0;
};

// The one clock of a simulation, in ns; only the event loop moves it, never backwards.
class SimClock : public engine::Clock {
 public:
  uint64_t now_ns() const override { return now_; }
  void advance_to(uint64_t t) {
    if (t > now_) now_ = t;
  }

 private:
  uint64_t now_ = 0;
};

// splitmix64 (Steele, Lea, Flood 2014): a seeded stream; the same seed, the same stream.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1), 53 bits.
  double uniform() { return static_cast<double>(next() >> 11) / 9007199254740992.0; }

 private:
  uint64_t state_;
};

}  // namespace vrnic::sim
