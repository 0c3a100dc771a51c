// Scheduler: every timing rule of the live device, as a policy fed (event, now) that answers
// with what to do. No clock, no thread, no system call: the loops around it (live_nic*.cc,
// progress.cc) read the clock, take the locks and make the calls; tests drive it in virtual
// time (scheduler_test.cc). docs/live.md says why each rule is there, with its measurements.
//
// The rules:
//  - Defer. While the program called into the device less than defer_ns ago (counted from
//    the end of a call: a poll that sends and receives a batch can outlast defer_ns), it
//    moves its own packets (poll_cq receives, runs the timers): the progress thread keeps
//    off the lock and the CPU, asleep on its kick eventfd.
//  - Back-off. A deferring thread that finds the program still there looks again twice as
//    late each time, up to recheck_max_ns; a kick starts again at defer_ns.
//  - Quiet wire. While only direct copies move (no packet since the last poll that returned
//    completions), the deferral is at least kQuietDeferNs.
//  - Spin. After it received packets the thread looks again without sleeping for spin_ns,
//    unless the program is a poller expected back (CallPattern, "coming back"); every
//    kSpinYieldNs it offers its CPU (sched_yield) if the program called in the last
//    kSpinYieldWithinNs: the program may be waiting for that CPU, unable to call.
//  - ACK hold. ACKs a receive makes wait for the program's answer, at most ack_hold_ns, while
//    the program answers what it receives (CallPattern, "replies"); the engine holds them.
//    Crossed: on a QP whose own packets still await the peer's ACK, at most
//    ack_hold_crossed_ns (both sides sending at once, each holding the ACK the other's next
//    send may wait for: a collective's exchange).
//  - Coming back. After a poll that returned completions the thread is kicked back to the
//    socket, unless the program came straight back the last times (CallPattern).
//  - Cork. A post while the program busy-polls (an empty poll less than defer_ns ago), or a
//    post_send right after a post_send within kBurstGapNs, holds its packets in the device's
//    transmit batch (Device::set_tx_hold) until the next poll_cq (the doorbell batch).
//  - Burst. A call less than kBurstGapNs after the end of the program's previous call holds
//    its direct copies, and so does every call after it until the next poll.
//  - Kick. Work left for later (a corked batch, held copies, a timer earlier than the one
//    the thread sleeps towards) wakes a thread that is not deferring.
//  - Event spin. A program thread that waits for a completion event (ibv_get_cq_event on a
//    blocking channel) moves packets itself, as a busy poll does, for event_spin_ns before
//    it sleeps on the channel: an event that comes soon costs no wake-up of the progress
//    thread and of the program.
//  - Idle yield. A poll_cq that finds nothing, when the program's polls have found no
//    completion and moved no packet for idle_yield_ns, offers the program's CPU
//    (sched_yield, after the device lock): with more busy programs than cores, the peer
//    it waits for may need that CPU to run at all. An offer that comes straight back
//    (within kYieldAloneNs: nobody else wanted the CPU) makes the next come twice as late,
//    up to kIdleYieldMaxGapNs; one that took longer (another task ran) brings them back
//    at every idle poll.
//  - Armed. Arming a CQ (ibv_req_notify_cq) ends the deferral (the program may sleep on its
//    channel's fd next, in poll or epoll), unless the program waited in ibv_get_cq_event
//    after its last arm: it is expected to again, and that wait ends the deferral itself
//    when it stops spinning. An arm with no wait since the last one ends the prediction.
//
// Threads: on_program_entry may be called from any thread without the device lock;
// thread_defer / thread_woke / thread_spins only by the progress thread, without it;
// queue_spins by any receive-queue thread; every other method with the device lock held.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>

#include "live/call_pattern.h"
#include "live/config.h"

namespace vrnic::live {

inline constexpr uint64_t kNever = UINT64_MAX;

// What the device and its port hold when a decision is made (read under the device lock).
struct DeviceView {
  uint64_t next_timer_ns = kNever;       // the engine's next timer (held ACKs' included)
  bool tx_queued = false;                // a doorbell batch waits in the device
  bool direct_queued = false;            // direct copies wait (a burst)
  bool pending_tx = false;               // the engine holds work back without a timer
};

class Scheduler {
 public:
  static constexpr uint64_t kBurstGapNs = 2000;         // calls closer are one burst
  static constexpr uint64_t kQuietDeferNs = 50'000;     // deferral while only copies move
  static constexpr int kBatchesPerHold = 8;             // receive batches per lock hold
  static constexpr uint64_t kPendingTxLookNs = 1'000'000;  // work held back without a timer
  static constexpr uint64_t kSpinYieldNs = 5'000;         // a spinning thread's CPU offers
  static constexpr uint64_t kSpinYieldWithinNs = 1'000'000;  // ... to a program this recent
  static constexpr uint64_t kYieldAloneNs = 2'000;        // an offer back sooner: nobody took it
  static constexpr uint64_t kIdleYieldMinGapNs = 1'000;   // the first gap after such an offer
  static constexpr uint64_t kIdleYieldMaxGapNs = 1'000'000;  // the gap while nobody takes them

  explicit Scheduler(const Timing& t) : t_(t), pattern_(t.ack_hold_ns, t.defer_ns) {}
  const Timing& timing() const { return t_; }

  // ---- the program's calls --------------------------------------------------------------------
  // A program thread is about to take the device lock (any verb, poll_cq included).
  void on_program_entry(uint64_t now) {
    last_app_ns_.store(now, std::memory_order_relaxed);
    last_entry_ns_.store(now, std::memory_order_relaxed);
  }
  struct CallStart {
    bool cork = false;         // hold the call's packets in the device (the doorbell batch)
    bool hold_direct = false;  // leave the call's direct copies queued (a burst)
  };
  CallStart on_call_start(uint64_t now, bool post_send);
  struct CallEnd {
    bool release_acks = false;  // the held ACKs' time has come: send them (and the port's queue)
    bool kick = false;          // wake the progress thread
  };
  // The call ended at `end` (its start, if it made no system call).
  CallEnd on_call_end(uint64_t end, uint64_t held_acks_deadline, const DeviceView& v);
  // poll_cq begins at `now` (it then flushes: the doorbell batch leaves, and held ACKs that
  // are due, acks_due). A poll ends a burst.
  void on_poll_start(uint64_t now);
  // poll_cq found `completions`; `packets` is the device's rx + tx packet count. True: kick.
  bool on_poll_end(uint64_t now, int completions, uint64_t packets);
  // After on_poll_end, device lock held: true if the program's thread offers its CPU
  // (sched_yield) once it has let go of the lock ("Idle yield"). `packets` as above.
  bool idle_poll_yields(uint64_t now, int completions, uint64_t packets);
  // The offer made at `start` came back at `end` (any thread, without the device lock).
  void on_idle_yield(uint64_t start, uint64_t end);

  // The program is about to sleep on a completion channel (it armed a CQ), or waits for a
  // CM answer: the thread watches the socket now. True: kick (it is deferring).
  bool on_end_deferral();

  // ---- receives and held ACKs -------------------------------------------------------------
  // hold_acks_ns for Device::receive: the ACK hold while the program answers (0: none).
  // Only a program's own poll, and the progress thread, hold; queue threads never do.
  uint64_t ack_hold_for_receive() const {
    return pattern_.hold_receives() ? t_.ack_hold_ns : 0;
  }
  // crossed_hold_ns for Device::receive: the hold on a QP whose own packets await an ACK.
  uint64_t ack_hold_crossed() const { return std::min(t_.ack_hold_crossed_ns, t_.ack_hold_ns); }
  // A receive at `now` made packets (sent, or ACKs held).
  void on_receive_made_packets(uint64_t now) { pattern_.on_receive_made_packets(now); }
  // At a flush point: true if held ACKs are due (they leave; the prediction ends, since the
  // program did not answer in time).
  bool acks_due(uint64_t now, uint64_t held_acks_deadline);

  // ---- the progress thread ----------------------------------------------------------------
  struct Defer {
    bool defer = false;
    uint64_t wait_ns = 0;  // sleep on the kick eventfd this long (or until kicked)
  };
  Defer thread_defer(uint64_t now);
  void thread_woke(bool kicked);  // after a deferral sleep: kicked, or its time ran out
  // Device lock held, before the thread services the device.
  void on_thread_service(uint64_t now) { pattern_.on_quiet(now); }
  // Device lock held, after it: what the thread sleeps towards (kNever: until a packet or a
  // kick); remembered for kicks.
  uint64_t thread_deadline(uint64_t now, bool took_datagrams, const DeviceView& v);
  // After the lock: look again at once, without sleeping?
  bool thread_spins(uint64_t now) const {
    return t_.spin_ns != 0 && !polls_back_ && now - rx_at_ < t_.spin_ns;
  }
  // While it spins: true every kSpinYieldNs if the program called in the last
  // kSpinYieldWithinNs (it may be waiting for this CPU), when the thread offers its CPU
  // (sched_yield). A program long out of the device (a passive responder) is not asked.
  bool spin_yields(uint64_t now) {
    if (now - yielded_at_ < kSpinYieldNs) return false;
    if (now - last_entry_ns_.load(std::memory_order_relaxed) >= kSpinYieldWithinNs) return false;
    yielded_at_ = now;
    return true;
  }
  // A timer the last call or queue thread armed is earlier than the thread's deadline: true
  // if the thread must be woken to recompute it (not while it defers).
  bool timer_kick(uint64_t next_timer_ns);

  // ---- completion events -----------------------------------------------------------------
  // A CQ was armed (any thread). True: end the deferral now (on_end_deferral), since the
  // program is not known to wait in ibv_get_cq_event, which would end it itself.
  bool on_cq_armed() {
    const bool waits = waited_since_arm_.exchange(false, std::memory_order_relaxed);
    return !waits;
  }
  // A program thread begins to wait for a completion event (any thread).
  void on_event_wait() { waited_since_arm_.store(true, std::memory_order_relaxed); }
  // True while the wait that began at `started` moves packets itself rather than sleeping.
  bool event_wait_spins(uint64_t now, uint64_t started) const {
    return now - started < t_.event_spin_ns;
  }

  // ---- receive-queue threads ---------------------------------------------------------------
  bool queue_spins(uint64_t now, uint64_t rx_at) const {
    return t_.spin_ns != 0 && now - rx_at < t_.spin_ns;
  }

  bool deferring() const { return deferring_.load(std::memory_order_relaxed); }
  const CallPattern& pattern() const { return pattern_; }

 private:
  bool kick_unless_deferring();  // the thread's deadline is void; true if it must be kicked

  Timing t_;
  CallPattern pattern_;
  std::atomic<uint64_t> last_entry_ns_{0};  // the program's last entry, never cleared
  std::atomic<uint64_t> last_app_ns_{0};  // the program's last entry (0: it said it leaves)
  std::atomic<bool> wire_quiet_{false};   // the last poll with completions moved no packet
  std::atomic<bool> deferring_{false};    // the thread is in its deferral sleep
  std::atomic<bool> waited_since_arm_{false};  // an event wait since the last arm
  uint64_t last_poll_ns_ = 0;       // the last empty poll (0 after completions)
  uint64_t prev_call_end_ns_ = 0;   // when the program's last post or poll ended
  bool in_burst_ = false;           // the last call held its copies; until the next poll
  bool prev_was_send_ = false;      // the program's last call was a post_send
  uint64_t packets_at_poll_ = ~0ull;  // rx + tx packets at the last poll with completions
  uint64_t thread_deadline_ = kNever;  // what the progress thread sleeps towards (0: void)
  // The progress thread's own.
  uint64_t backoff_ = 0;      // the next deferral look (0: at the deferral)
  uint64_t last_defer_ = 0;   // the deferral of the last thread_defer
  uint64_t rx_at_ = 0;        // when the thread last received packets
  uint64_t yielded_at_ = 0;   // when the spinning thread last offered its CPU
  bool polls_back_ = false;   // the program polls and is expected back, at the last service
  // Idle yield: the program's polls.
  uint64_t idle_since_ = 0;         // since when they found nothing and moved no packet
  uint64_t idle_packets_ = ~0ull;   // rx + tx packets at the last poll
  uint64_t idle_yielded_at_ = 0;    // the last offer
  std::atomic<uint64_t> idle_yield_gap_{0};  // the least time between offers (backoff)
};

}  // namespace vrnic::live
