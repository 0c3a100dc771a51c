// The simulator's discrete-event core: the event queue (ordered by time, then by the order
// of scheduling, so ties are deterministic), the virtual clock the engines read, and the
// seeded random number generator (splitmix64).
#pragma once
#include <cstdint>
#include <queue>
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

class EventQueue {
 public:
  void push(uint64_t time, EventKind kind, uint32_t a, uint32_t b = 0, uint64_t c = 0) {
    heap_.push(Event{time, next_seq_++, kind, a, b, c});
  }
  bool empty() const { return heap_.empty(); }
  const Event& top() const { return heap_.top(); }
  Event pop() {
    Event e = heap_.top();
    heap_.pop();
    return e;
  }
  uint64_t scheduled() const { return next_seq_; }

 private:
  struct Later {
    bool operator()(const Event& x, const Event& y) const {
      return x.time != y.time ? x.time > y.time : x.seq > y.seq;
    }
  };
  std::priority_queue<Event, std::vector<Event>, Later> heap_;
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
