// Scheduler: the live device's timing rules (scheduler.h).
#include "live/scheduler.h"

#include <algorithm>

namespace vrnic::live {

Scheduler::CallStart Scheduler::on_call_start(uint64_t now, bool post_send) {
  pattern_.on_call(now);
  if (post_send) pattern_.on_post_send(now);  // a held ACK leaves with this post
  CallStart s;
  // Cork for a program busy-polling its CQ: its next poll_cq (within defer_ns) flushes.
  const bool busy_polling = t_.defer_ns != 0 && now - last_poll_ns_ < t_.defer_ns;
  // Burst: a call within kBurstGapNs of the END of the previous call (a post or a poll)
  // starts one, which lasts until the next poll; measured from the end, so the time a copy
  // takes never breaks a burst. A lone post, as in a latency test, is copied at once.
  s.hold_direct = t_.defer_ns != 0 && (in_burst_ || now - prev_call_end_ns_ < kBurstGapNs);
  in_burst_ = s.hold_direct;
  // A run of post_sends (ib_write_bw between polls that return completions) leaves in one
  // sendmmsg at the next poll; the one post a latency test makes after its poll leaves now.
  const bool send_run = s.hold_direct && post_send && prev_was_send_;
  prev_was_send_ = post_send;
  s.cork = busy_polling || send_run;
  return s;
}

Scheduler::CallEnd Scheduler::on_call_end(uint64_t end, uint64_t held_acks_deadline,
                                          const DeviceView& v) {
  prev_call_end_ns_ = end;
  // The program was here until the end of its call (a poll that sends a batch and receives
  // can take longer than defer_ns): the deferral counts from then. Not after a poll that
  // ended the deferral (on_end_deferral: the thread must watch the socket).
  uint64_t entry = last_app_ns_.load(std::memory_order_relaxed);
  while (entry != 0 && entry < end &&
         !last_app_ns_.compare_exchange_weak(entry, end, std::memory_order_relaxed)) {
  }
  CallEnd e;
  e.release_acks = acks_due(end, held_acks_deadline);  // no answer came in time
  // Held-back packets or copies: the program's next call sends them, or a deferring thread
  // at its next look; a sleeping one must be woken.
  if (v.tx_queued || v.direct_queued) e.kick = kick_unless_deferring();
  // An earlier timer (a held ACK's deadline included): a sleeping thread recomputes its
  // deadline. A deferring one need not: the program's polls run the timers meanwhile.
  else e.kick = timer_kick(v.next_timer_ns);
  return e;
}

void Scheduler::on_poll_start(uint64_t now) {
  in_burst_ = false;
  prev_was_send_ = false;
  pattern_.on_call(now);
}

bool Scheduler::on_poll_end(uint64_t now, int completions, uint64_t packets) {
  if (completions == 0) {
    last_poll_ns_ = now;  // a busy poll in progress
    return false;
  }
  // Completions: the program may now leave the CQ (ib_write_lat spins on memory next), so
  // the thread must watch the socket at once, unless the program came straight back last
  // time. Not when no packet moved since the last such poll (every completion came from a
  // direct copy): nothing for the thread to watch.
  last_poll_ns_ = 0;
  const bool moved = packets != packets_at_poll_;
  wire_quiet_.store(!moved, std::memory_order_relaxed);
  if (!moved) return false;
  packets_at_poll_ = packets;
  if (pattern_.on_completions(now)) return false;
  return on_end_deferral();
}

bool Scheduler::idle_poll_yields(uint64_t now, int completions, uint64_t packets) {
  if (t_.idle_yield_ns == 0) return false;
  if (completions != 0 || packets != idle_packets_) {  // work came: idle from now
    idle_packets_ = packets;
    idle_since_ = now;
    return false;
  }
  if (now - idle_since_ < t_.idle_yield_ns) return false;
  if (now - idle_yielded_at_ < idle_yield_gap_.load(std::memory_order_relaxed)) return false;
  idle_yielded_at_ = now;
  return true;
}

void Scheduler::on_idle_yield(uint64_t start, uint64_t end) {
  // Back at once: no other task wanted this CPU, so offer it less often; it was taken:
  // others wait for CPUs (more busy programs than cores), so offer it at every idle poll.
  const uint64_t gap = idle_yield_gap_.load(std::memory_order_relaxed);
  const uint64_t next = end - start >= kYieldAloneNs
                            ? 0
                            : std::clamp(gap * 2, kIdleYieldMinGapNs, kIdleYieldMaxGapNs);
  idle_yield_gap_.store(next, std::memory_order_relaxed);
}

bool Scheduler::on_end_deferral() {
  last_app_ns_.store(0, std::memory_order_relaxed);
  return deferring();
}

bool Scheduler::acks_due(uint64_t now, uint64_t held_acks_deadline) {
  if (held_acks_deadline == kNever || now < held_acks_deadline) return false;
  pattern_.on_hold_expired();
  return true;
}

Scheduler::Defer Scheduler::thread_defer(uint64_t now) {
  if (t_.defer_ns == 0) return {};
  deferring_.store(true, std::memory_order_relaxed);
  const uint64_t last = last_app_ns_.load(std::memory_order_relaxed);
  last_defer_ = wire_quiet_.load(std::memory_order_relaxed) ? std::max(t_.defer_ns, kQuietDeferNs)
                                                            : t_.defer_ns;
  if (now - last < last_defer_) return {true, std::max(last + last_defer_ - now, backoff_)};
  deferring_.store(false, std::memory_order_relaxed);
  backoff_ = 0;
  return {};
}

void Scheduler::thread_woke(bool kicked) {
  // Kicked: the program wants the thread (look at defer_ns again); else it stayed, and
  // each look is a wake-up that takes a CPU from a polling program on a small machine.
  backoff_ = kicked ? 0
                    : std::clamp(2 * backoff_, last_defer_,
                                 std::max(last_defer_, t_.recheck_max_ns));
}

uint64_t Scheduler::thread_deadline(uint64_t now, bool took_datagrams, const DeviceView& v) {
  if (took_datagrams) {
    wire_quiet_.store(false, std::memory_order_relaxed);
    rx_at_ = now;
  }
  uint64_t deadline = v.next_timer_ns;
  // Work the engine holds back (window, pacing) without a timer: look again soon.
  if (deadline == kNever && v.pending_tx) deadline = now + kPendingTxLookNs;
  thread_deadline_ = deadline;
  polls_back_ = pattern_.comes_back();
  return deadline;
}

bool Scheduler::timer_kick(uint64_t next_timer_ns) {
  return next_timer_ns < thread_deadline_ && kick_unless_deferring();
}

bool Scheduler::kick_unless_deferring() {
  if (deferring()) return false;
  thread_deadline_ = 0;  // the thread recomputes it; one kick is enough
  return true;
}

}  // namespace vrnic::live
