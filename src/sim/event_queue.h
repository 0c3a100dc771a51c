// The simulator's discrete-event core: the event queue (ordered by time, then by the order
// of scheduling, so ties are deterministic; a timing wheel), the virtual clock the engines read, and the
// seeded random number generator (splitmix64).
#pragma once
#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "engine/ports.h"
#include "sim/prefetch.h"

namespace vrnic::sim {

// What an event does; `a` and `b` name its target (a port, a host, a flow) and `c` carries
// a small argument (a timer generation, a pause state).
enum class EventKind : uint8_t {
  kTxDone,     // a port finished serialising its current frame: a = port, b = the frame
               // then next in that frame's queue, or kNone (a hint for prefetching)
  kArrive,     // the oldest frame on a link reaches its far end: a = port that sent it,
               // b = the frame, c = the port a switch there sends it out of (kNone: none,
               // or a host) and, above bit 32, the priority it left with
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

// 32 bytes, aligned in the queue's pool so that an event is one cache line's read.
struct alignas(32) Event {
  uint64_t time = 0;
  uint64_t c = 0;
  uint32_t a = 0, b = 0;
  EventKind kind = EventKind::kTxDone;
  uint32_t link = 0;  // the EventQueue's own: the next event of a slot, or of its free list
};

// A timing wheel of one-nanosecond slots over the next kWindow ns, with a heap beyond it.
// The simulator only schedules at or after the time of the event it runs (std::logic_error
// otherwise), and almost always within a few microseconds (a frame's serialisation and
// propagation, a pacer's gap): such an event is appended to its instant's slot, and the
// next event is the head of the first non-empty slot (a bitmap finds it). Later events wait
// in a heap ordered by (time, scheduling order) and move into their slot, in that order,
// as soon as the window reaches them, before anything else can be scheduled there; so the
// events of one instant always leave in the order they were scheduled. A slot is a list of
// events threaded through one pool by their links, whose freed entries are taken again
// first: the events in flight stay in few cache lines, and a slot costs eight bytes.
class EventQueue {
 public:
  static constexpr uint64_t kWindow = 8192;  // ns; a power of two

  [[gnu::always_inline]] void push(uint64_t time, EventKind kind, uint32_t a, uint32_t b = 0,
                                   uint64_t c = 0) {
    if (time < now_) in_the_past();
    const Event e{time, c, a, b, kind, kNil};
    const uint64_t seq = next_seq_++;
    ++size_;
    if (time - now_ < kWindow) return to_slot(e);
    to_far({e, seq});
  }
  bool empty() const { return size_ == 0; }
  const Event& top() const {
    if (!settled_) settle();
    return pool_[slots_[cursor_].head];
  }
  Event pop() {
    if (!settled_) settle();
    Slot& s = slots_[cursor_];
    const uint32_t n = s.head;
    const Event e = pool_[n];
    s.head = e.link;
    // The node freed before this one is taken by the second push after this pop (an event
    // often schedules two): load it now, while the event runs.
    if (free_ != kNil) prefetch_line(&pool_[free_]);
    pool_[n].link = free_;
    free_ = n;
    --size_;
    if (s.head == kNil) {
      bits_[cursor_ / 64] &= ~(1ull << (cursor_ % 64));
      --in_wheel_slots_;
      settled_ = false;  // the next event is in another slot
    }
    return e;
  }
  // The event that will be taken next if nothing earlier is scheduled meanwhile, or null
  // when the queue is empty: a hint for prefetching, nothing more (it moves nothing).
  const Event* peek() const {
    if (settled_) return &pool_[slots_[cursor_].head];
    if (in_wheel_slots_ > 0) return &pool_[slots_[next_slot(cursor_)].head];
    return far_.empty() ? nullptr : &far_.front().e;
  }
  // The event that will be taken after `next` (what peek() gave) on the same proviso, or
  // null: a hint one event further, so that its line can be loaded before peek() reads it.
  const Event* peek_after(const Event& next) const {
    if (next.link != kNil) return &pool_[next.link];  // the rest of its slot
    if (in_wheel_slots_ == 0) return nullptr;
    return &pool_[slots_[next_slot((next.time + 1) & (kWindow - 1))].head];
  }
  uint64_t scheduled() const { return next_seq_; }
  size_t size() const { return size_; }

 private:
  static constexpr uint32_t kNil = UINT32_MAX;
  struct Far {
    Event e;
    uint64_t seq;  // scheduling order: the tie-break of one instant's events
  };
  struct Later {
    bool operator()(const Far& x, const Far& y) const {
      return x.e.time != y.e.time ? x.e.time > y.e.time : x.seq > y.seq;
    }
  };
  struct Slot {
    uint32_t head = kNil, tail = kNil;  // valid while the slot's bit is set
  };

  [[gnu::noinline]] void to_far(const Far& e) {
    far_.push_back(e);
    std::push_heap(far_.begin(), far_.end(), Later{});
  }
  [[noreturn, gnu::noinline, gnu::cold]] static void in_the_past() {
    throw std::logic_error("sim: an event scheduled in the past");
  }
  // Inline into push (its call was a fifth of an event's queue instructions).
  [[gnu::always_inline]] void to_slot(const Event& e) const {
    uint32_t n = free_;
    if (n == kNil) {
      n = static_cast<uint32_t>(pool_.size());
      pool_.emplace_back();
    } else {
      free_ = pool_[n].link;
    }
    pool_[n] = e;  // its link kNil
    const size_t i = e.time & (kWindow - 1);
    Slot& s = slots_[i];
    if (bits_[i / 64] & (1ull << (i % 64))) {
      pool_[s.tail].link = n;
    } else {
      bits_[i / 64] |= 1ull << (i % 64);
      ++in_wheel_slots_;
      s.head = n;
    }
    s.tail = n;
  }
  // Moves the window to the earliest event (the queue must not be empty): the cursor onto
  // its slot, now_ to its time, and every far event the window now covers into its slot.
  void settle() const {
    if (in_wheel_slots_ == 0) {  // only far events: jump to the first of them
      now_ = far_.front().e.time;
      cursor_ = now_ & (kWindow - 1);
    } else {
      cursor_ = next_slot(now_ & (kWindow - 1));
      now_ += (cursor_ - (now_ & (kWindow - 1))) & (kWindow - 1);
    }
    while (!far_.empty() && far_.front().e.time - now_ < kWindow) {
      std::pop_heap(far_.begin(), far_.end(), Later{});
      to_slot(far_.back().e);
      far_.pop_back();
    }
    settled_ = true;
  }
  // The first non-empty slot at or after `from`, circularly (one exists).
  size_t next_slot(size_t from) const {
    constexpr size_t kWords = kWindow / 64;
    size_t w = from / 64;
    uint64_t word = bits_[w] & (~0ull << (from % 64));
    for (size_t n = 0; word == 0 && n <= kWords; ++n) {
      w = (w + 1) % kWords;
      word = bits_[w];
    }
    return w * 64 + static_cast<size_t>(std::countr_zero(word));
  }

  mutable std::array<Slot, kWindow> slots_{};
  mutable std::array<uint64_t, kWindow / 64> bits_{};
  mutable std::vector<Event> pool_;  // the wheel's events, threaded by link
  mutable uint32_t free_ = kNil;  // the free nodes, last freed first
  mutable size_t in_wheel_slots_ = 0;
  mutable size_t cursor_ = 0;
  // The cursor is on the earliest event's slot and the far events it covers are in: true
  // until that slot empties (what is scheduled meanwhile is at or after its time).
  mutable bool settled_ = false;
  mutable uint64_t now_ = 0;  // the time of the earliest event (the last one taken, or due)
  mutable std::vector<Far> far_;  // a heap: events kWindow ns or more after now_
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
