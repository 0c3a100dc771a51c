// Tests of the Scheduler in virtual time, rule by rule: each rule's trigger, its bound and its
// release (scheduler.h lists the rules).
#include "live/scheduler.h"

#include <gtest/gtest.h>

namespace vrnic::live {
namespace {

constexpr uint64_t kUs = 1000;
constexpr uint64_t kT = 1'000'000'000;  // a virtual time far from 0

Timing timing() {
  Timing t;
  t.defer_ns = 50 * kUs;
  t.recheck_max_ns = 4000 * kUs;
  t.spin_ns = 50 * kUs;
  t.ack_hold_ns = 250 * kUs;
  return t;
}

// A thread that is deferring: the program entered just now.
void make_thread_defer(Scheduler& s, uint64_t now) {
  s.on_program_entry(now);
  ASSERT_TRUE(s.thread_defer(now).defer);
}

// ---- defer ----------------------------------------------------------------------------------

TEST(Scheduler, defer__thread_keeps_off_until_defer_ns_after_the_programs_last_entry) {
  Scheduler s(timing());
  s.on_program_entry(kT);
  Scheduler::Defer d = s.thread_defer(kT + 10 * kUs);
  EXPECT_TRUE(d.defer);
  EXPECT_EQ(d.wait_ns, 40 * kUs);  // to the end of the deferral
  EXPECT_TRUE(s.deferring());
  d = s.thread_defer(kT + 50 * kUs);  // the bound: the program has been quiet for defer_ns
  EXPECT_FALSE(d.defer);
  EXPECT_FALSE(s.deferring());
}

TEST(Scheduler, defer__end_deferral_releases_the_thread_at_once) {
  Scheduler s(timing());
  make_thread_defer(s, kT);
  EXPECT_TRUE(s.on_end_deferral());  // deferring: it must be kicked
  EXPECT_FALSE(s.thread_defer(kT + 1).defer);
  EXPECT_FALSE(s.on_end_deferral());  // no longer deferring: no kick
}

TEST(Scheduler, defer__counts_from_the_end_of_a_long_call) {
  // A poll that sends a batch and receives one can outlast defer_ns: the program is in the
  // device all that time, so the deferral runs from the call's end.
  Scheduler s(timing());
  s.on_program_entry(kT);
  s.on_call_end(kT + 80 * kUs, kNever, {});
  Scheduler::Defer d = s.thread_defer(kT + 100 * kUs);
  EXPECT_TRUE(d.defer);
  EXPECT_EQ(d.wait_ns, 30 * kUs);
  EXPECT_FALSE(s.thread_defer(kT + 130 * kUs).defer);  // the bound: defer_ns after the end
}

TEST(Scheduler, defer__a_calls_end_does_not_undo_an_ended_deferral) {
  Scheduler s(timing());
  make_thread_defer(s, kT);
  s.on_poll_end(kT + kUs, 1, 1);  // completions, the program not known to come back
  s.on_call_end(kT + 2 * kUs, kNever, {});
  EXPECT_FALSE(s.thread_defer(kT + 3 * kUs).defer);  // the thread watches the socket
}

TEST(Scheduler, defer__zero_defer_ns_never_defers) {
  Timing t = timing();
  t.defer_ns = 0;
  Scheduler s(t);
  s.on_program_entry(kT);
  EXPECT_FALSE(s.thread_defer(kT + 1).defer);
  EXPECT_FALSE(s.deferring());
}

// ---- back-off -------------------------------------------------------------------------------

TEST(Scheduler, backoff__looks_double_while_the_program_stays_up_to_recheck_max) {
  Scheduler s(timing());
  uint64_t now = kT;
  std::vector<uint64_t> waits;
  for (int i = 0; i < 10; ++i) {
    s.on_program_entry(now);  // the program is still calling at each look
    Scheduler::Defer d = s.thread_defer(now + kUs);
    ASSERT_TRUE(d.defer);
    waits.push_back(d.wait_ns);
    s.thread_woke(false);  // its time ran out: the program was there
    now += d.wait_ns + kUs;
  }
  EXPECT_EQ(waits[0], 49 * kUs);  // the first look: at the end of the deferral
  EXPECT_EQ(waits[1], 50 * kUs);
  EXPECT_EQ(waits[2], 100 * kUs);
  EXPECT_EQ(waits[3], 200 * kUs);
  EXPECT_EQ(waits[7], 3200 * kUs);
  EXPECT_EQ(waits[8], 4000 * kUs);  // the bound
  EXPECT_EQ(waits[9], 4000 * kUs);
}

TEST(Scheduler, backoff__a_kick_starts_again_at_the_deferral) {
  Scheduler s(timing());
  for (int i = 0; i < 5; ++i) {
    s.on_program_entry(kT);
    ASSERT_TRUE(s.thread_defer(kT + kUs).defer);
    s.thread_woke(false);
  }
  s.on_program_entry(kT);
  EXPECT_GT(s.thread_defer(kT + kUs).wait_ns, 49 * kUs);
  s.thread_woke(true);  // kicked
  s.on_program_entry(kT);
  EXPECT_EQ(s.thread_defer(kT + kUs).wait_ns, 49 * kUs);
}

// ---- quiet wire -----------------------------------------------------------------------------

TEST(Scheduler, quiet_wire__only_copies_moving_defers_at_least_quiet_defer_ns) {
  Timing t = timing();
  t.defer_ns = 10 * kUs;
  Scheduler s(t);
  s.on_program_entry(kT);
  EXPECT_FALSE(s.thread_defer(kT + 20 * kUs).defer);  // wire not quiet: 10 us
  s.on_poll_end(kT, 1, 100);  // completions after packets moved
  s.on_poll_end(kT, 1, 100);  // completions, no packet since: direct copies
  s.on_program_entry(kT);
  Scheduler::Defer d = s.thread_defer(kT + 20 * kUs);
  EXPECT_TRUE(d.defer);
  EXPECT_EQ(d.wait_ns, Scheduler::kQuietDeferNs - 20 * kUs);
  // Packets the thread takes end it.
  s.thread_deadline(kT + 20 * kUs, /*took_datagrams=*/true, {});
  EXPECT_FALSE(s.thread_defer(kT + 20 * kUs).defer);
}

// ---- spin -----------------------------------------------------------------------------------

TEST(Scheduler, spin__after_packets_the_thread_looks_again_for_spin_ns) {
  Scheduler s(timing());
  EXPECT_FALSE(s.thread_spins(kT));  // an idle device never spins
  s.thread_deadline(kT, /*took_datagrams=*/true, {});
  EXPECT_TRUE(s.thread_spins(kT + 49 * kUs));
  EXPECT_FALSE(s.thread_spins(kT + 50 * kUs));  // the bound
  s.thread_deadline(kT + 60 * kUs, false, {});  // nothing new
  EXPECT_FALSE(s.thread_spins(kT + 61 * kUs));
}

TEST(Scheduler, spin__not_for_a_poller_expected_back_nor_with_zero_spin_ns) {
  Scheduler s(timing());
  s.on_poll_end(kT, 1, 1);  // completions...
  s.on_call_start(kT + kUs, false);  // ...and the program came straight back
  ASSERT_TRUE(s.pattern().comes_back());
  s.thread_deadline(kT + 2 * kUs, true, {});
  EXPECT_FALSE(s.thread_spins(kT + 3 * kUs));
  Timing t = timing();
  t.spin_ns = 0;
  Scheduler z(t);
  z.thread_deadline(kT, true, {});
  EXPECT_FALSE(z.thread_spins(kT + 1));
}

TEST(Scheduler, spin__offers_the_cpu_every_spin_yield_ns_to_a_program_that_called_lately) {
  Scheduler s(timing());
  s.on_program_entry(kT);
  s.thread_deadline(kT + 60 * kUs, true, {});  // the program quiet for 60 µs: the thread spins
  ASSERT_TRUE(s.thread_spins(kT + 61 * kUs));
  EXPECT_TRUE(s.spin_yields(kT + 61 * kUs));
  EXPECT_FALSE(s.spin_yields(kT + 61 * kUs + Scheduler::kSpinYieldNs - 1));
  EXPECT_TRUE(s.spin_yields(kT + 61 * kUs + Scheduler::kSpinYieldNs));  // the period
  // A program out of the device for kSpinYieldWithinNs (a passive responder) is not asked.
  const uint64_t later = kT + Scheduler::kSpinYieldWithinNs;
  s.thread_deadline(later, true, {});
  ASSERT_TRUE(s.thread_spins(later + kUs));
  EXPECT_FALSE(s.spin_yields(later + kUs));
  s.on_program_entry(later + 2 * kUs);
  EXPECT_TRUE(s.spin_yields(later + 3 * kUs));
}

TEST(Scheduler, spin__a_queue_thread_spins_spin_ns_after_its_packets) {
  Scheduler s(timing());
  EXPECT_TRUE(s.queue_spins(kT + 49 * kUs, kT));
  EXPECT_FALSE(s.queue_spins(kT + 50 * kUs, kT));
}

// ---- ACK hold -------------------------------------------------------------------------------

// The program receives at `t` and answers at `t + gap`.
void exchange(Scheduler& s, uint64_t t, uint64_t gap) {
  s.on_receive_made_packets(t);
  s.on_call_start(t + gap, /*post_send=*/true);
  s.on_call_end(t + gap, kNever, {});
}

TEST(Scheduler, ack_hold__a_program_that_answers_has_its_acks_held_for_ack_hold_ns) {
  Scheduler s(timing());
  EXPECT_EQ(s.ack_hold_for_receive(), 0u);  // nothing known: nothing held
  exchange(s, kT, 10 * kUs);                // the trigger
  EXPECT_EQ(s.ack_hold_for_receive(), 250 * kUs);
}

// Crossed holds (both sides sending at once) are bounded by ack_hold_crossed_ns, never above
// the hold itself.
TEST(Scheduler, ack_hold__crossed_bound_is_ack_hold_crossed_ns_within_ack_hold_ns) {
  Timing t = timing();
  t.ack_hold_crossed_ns = 20 * kUs;
  EXPECT_EQ(Scheduler(t).ack_hold_crossed(), 20 * kUs);
  t.ack_hold_ns = 5 * kUs;
  EXPECT_EQ(Scheduler(t).ack_hold_crossed(), 5 * kUs);
}

TEST(Scheduler, ack_hold__a_late_answer_holds_nothing) {
  Scheduler s(timing());
  exchange(s, kT, 250 * kUs);
  EXPECT_EQ(s.ack_hold_for_receive(), 0u);
}

TEST(Scheduler, ack_hold__held_acks_leave_at_their_deadline_and_the_prediction_ends) {
  Scheduler s(timing());
  exchange(s, kT, 10 * kUs);
  const uint64_t deadline = kT + 100 * kUs + 250 * kUs;
  s.on_receive_made_packets(kT + 100 * kUs);
  EXPECT_FALSE(s.acks_due(deadline - 1, deadline));
  EXPECT_FALSE(s.acks_due(deadline, kNever));  // nothing held
  EXPECT_EQ(s.ack_hold_for_receive(), 250 * kUs);
  EXPECT_TRUE(s.acks_due(deadline, deadline));  // the bound
  EXPECT_EQ(s.ack_hold_for_receive(), 0u);      // not answered in time: no more holds
  exchange(s, kT + 1000 * kUs, kUs);            // answered again: holding resumes
  EXPECT_EQ(s.ack_hold_for_receive(), 250 * kUs);
}

TEST(Scheduler, ack_hold__a_call_that_ends_past_the_deadline_releases_them) {
  Scheduler s(timing());
  s.on_call_start(kT, false);
  EXPECT_FALSE(s.on_call_end(kT, kT + 1, {}).release_acks);
  s.on_call_start(kT + 2, false);
  EXPECT_TRUE(s.on_call_end(kT + 2, kT + 1, {}).release_acks);
}

// ---- coming back ----------------------------------------------------------------------------

TEST(Scheduler, coming_back__completions_kick_a_deferring_thread_back_to_the_socket) {
  Scheduler s(timing());
  make_thread_defer(s, kT);
  EXPECT_TRUE(s.on_poll_end(kT + kUs, 1, 10));  // the program may leave: watch the socket
  EXPECT_FALSE(s.thread_defer(kT + 2 * kUs).defer);
}

TEST(Scheduler, coming_back__not_when_the_program_came_straight_back_last_time) {
  Scheduler s(timing());
  s.on_poll_end(kT, 1, 10);
  s.on_call_start(kT + kUs, true);  // back within the deferral
  s.on_call_end(kT + kUs, kNever, {});
  make_thread_defer(s, kT + 2 * kUs);
  EXPECT_FALSE(s.on_poll_end(kT + 3 * kUs, 1, 20));  // expected back: the thread stays off
  EXPECT_TRUE(s.thread_defer(kT + 4 * kUs).defer);
}

TEST(Scheduler, coming_back__completions_with_no_packet_moved_leave_the_thread_alone) {
  Scheduler s(timing());
  s.on_poll_end(kT, 1, 10);
  make_thread_defer(s, kT + kUs);
  EXPECT_FALSE(s.on_poll_end(kT + 2 * kUs, 1, 10));  // every completion from a direct copy
}

// ---- cork -----------------------------------------------------------------------------------

TEST(Scheduler, cork__a_post_while_the_program_busy_polls_waits_for_the_next_poll) {
  Scheduler s(timing());
  s.on_poll_start(kT);
  s.on_poll_end(kT, 0, 0);  // an empty poll: busy polling
  s.on_call_end(kT, kNever, {});
  EXPECT_TRUE(s.on_call_start(kT + 10 * kUs, false).cork);
  s.on_call_end(kT + 10 * kUs, kNever, {});
  // The bound: an empty poll more than defer_ns ago is no busy poll.
  EXPECT_FALSE(s.on_call_start(kT + 50 * kUs, false).cork);
}

TEST(Scheduler, cork__a_run_of_post_sends_is_corked_but_not_its_first) {
  Scheduler s(timing());
  s.on_poll_start(kT);
  s.on_poll_end(kT, 1, 1);  // completions: not busy polling
  s.on_call_end(kT, kNever, {});
  EXPECT_FALSE(s.on_call_start(kT + kUs, true).cork);  // the first post after a poll
  s.on_call_end(kT + kUs, kNever, {});
  EXPECT_TRUE(s.on_call_start(kT + 2 * kUs, true).cork);  // a post_send right after one
  s.on_call_end(kT + 2 * kUs, kNever, {});
  EXPECT_FALSE(s.on_call_start(kT + 3 * kUs, false).cork);  // not a post_send
  s.on_call_end(kT + 3 * kUs, kNever, {});
  s.on_poll_start(kT + 4 * kUs);  // the release: a poll ends the run
  s.on_poll_end(kT + 4 * kUs, 1, 2);
  s.on_call_end(kT + 4 * kUs, kNever, {});
  EXPECT_FALSE(s.on_call_start(kT + 5 * kUs, true).cork);
}

// ---- burst ----------------------------------------------------------------------------------

TEST(Scheduler, burst__calls_within_the_gap_hold_their_copies_until_the_next_poll) {
  Scheduler s(timing());
  s.on_call_end(kT, kNever, {});
  EXPECT_FALSE(s.on_call_start(kT + 3 * kUs, true).hold_direct);  // a lone post: at once
  s.on_call_end(kT + 4 * kUs, kNever, {});
  EXPECT_TRUE(s.on_call_start(kT + 5 * kUs, true).hold_direct);  // within 2 us of the end
  s.on_call_end(kT + 20 * kUs, kNever, {});  // a long call (a copy) does not end the burst
  EXPECT_TRUE(s.on_call_start(kT + 40 * kUs, true).hold_direct);
  s.on_poll_start(kT + 41 * kUs);  // the release
  s.on_call_end(kT + 41 * kUs, kNever, {});
  EXPECT_FALSE(s.on_call_start(kT + 50 * kUs, true).hold_direct);
}

TEST(Scheduler, burst__zero_defer_ns_never_holds_or_corks) {
  Timing t = timing();
  t.defer_ns = 0;
  Scheduler s(t);
  s.on_poll_end(kT, 0, 0);
  s.on_call_end(kT, kNever, {});
  const Scheduler::CallStart c = s.on_call_start(kT + 1, true);
  EXPECT_FALSE(c.hold_direct);
  EXPECT_FALSE(c.cork);
}

// ---- kick -----------------------------------------------------------------------------------

TEST(Scheduler, kick__held_packets_or_copies_wake_a_sleeping_thread_not_a_deferring_one) {
  Scheduler s(timing());
  DeviceView corked;
  corked.tx_queued = true;
  DeviceView copies;
  copies.direct_queued = true;
  EXPECT_TRUE(s.on_call_end(kT, kNever, corked).kick);
  EXPECT_TRUE(s.on_call_end(kT, kNever, copies).kick);
  EXPECT_FALSE(s.on_call_end(kT, kNever, {}).kick);
  make_thread_defer(s, kT);
  EXPECT_FALSE(s.on_call_end(kT, kNever, corked).kick);  // it looks again at its deferral
}

TEST(Scheduler, kick__a_timer_earlier_than_the_threads_deadline_wakes_it_once) {
  Scheduler s(timing());
  EXPECT_EQ(s.thread_deadline(kT, false, DeviceView{kT + 1000 * kUs}), kT + 1000 * kUs);
  EXPECT_FALSE(s.timer_kick(kT + 2000 * kUs));  // later: the thread wakes first anyway
  EXPECT_TRUE(s.timer_kick(kT + 500 * kUs));
  EXPECT_FALSE(s.timer_kick(kT + 400 * kUs));  // the thread recomputes: one kick is enough
  s.thread_deadline(kT, false, DeviceView{kT + 500 * kUs});
  make_thread_defer(s, kT);
  EXPECT_FALSE(s.timer_kick(kT + 100 * kUs));  // deferring: the program's polls run timers
}

TEST(Scheduler, thread_deadline__pending_work_without_a_timer_is_looked_at_within_a_ms) {
  Scheduler s(timing());
  DeviceView v;
  EXPECT_EQ(s.thread_deadline(kT, false, v), kNever);
  v.pending_tx = true;
  EXPECT_EQ(s.thread_deadline(kT, false, v), kT + Scheduler::kPendingTxLookNs);
  v.next_timer_ns = kT + 5;
  EXPECT_EQ(s.thread_deadline(kT, false, v), kT + 5);
}

// ---- completion events ----------------------------------------------------------------------

TEST(Scheduler, event_spin__a_wait_moves_packets_itself_for_event_spin_ns) {
  Scheduler s(timing());  // event_spin_ns 50 us by default
  EXPECT_TRUE(s.event_wait_spins(kT, kT));
  EXPECT_TRUE(s.event_wait_spins(kT + 49 * kUs, kT));
  EXPECT_FALSE(s.event_wait_spins(kT + 50 * kUs, kT));  // the bound: it sleeps
  Timing t = timing();
  t.event_spin_ns = 0;
  EXPECT_FALSE(Scheduler(t).event_wait_spins(kT, kT));  // 0: sleeps at once
}

TEST(Scheduler, armed__ends_the_deferral_unless_the_program_waits_in_get_cq_event) {
  Scheduler s(timing());
  EXPECT_TRUE(s.on_cq_armed());  // nothing known: the program may sleep in epoll
  s.on_event_wait();             // it waited in ibv_get_cq_event after that arm
  EXPECT_FALSE(s.on_cq_armed());  // expected to again: the wait ends the deferral itself
  s.on_event_wait();
  EXPECT_FALSE(s.on_cq_armed());
  EXPECT_TRUE(s.on_cq_armed());  // an arm with no wait since the last: the release
}

// ---- idle yield -----------------------------------------------------------------------------

constexpr uint64_t kPackets = 100;  // the device's rx + tx packet count in these polls

TEST(Scheduler, idle_yield__a_poll_offers_the_cpu_once_polls_found_nothing_for_idle_yield_ns) {
  Scheduler s(timing());  // idle_yield_ns 2 us by default
  EXPECT_FALSE(s.idle_poll_yields(kT, 0, kPackets));  // first sight: idle from now
  EXPECT_FALSE(s.idle_poll_yields(kT + 1 * kUs, 0, kPackets));
  EXPECT_TRUE(s.idle_poll_yields(kT + 2 * kUs, 0, kPackets));
  EXPECT_TRUE(s.idle_poll_yields(kT + 2 * kUs + 300, 0, kPackets));  // no offer came back yet
  // A completion, or a packet moved, starts the idle time again.
  EXPECT_FALSE(s.idle_poll_yields(kT + 3 * kUs, 1, kPackets));
  EXPECT_FALSE(s.idle_poll_yields(kT + 4 * kUs, 0, kPackets));
  EXPECT_TRUE(s.idle_poll_yields(kT + 5 * kUs, 0, kPackets));
  EXPECT_FALSE(s.idle_poll_yields(kT + 6 * kUs, 0, kPackets + 1));
  EXPECT_FALSE(s.idle_poll_yields(kT + 7 * kUs, 0, kPackets + 1));
  EXPECT_TRUE(s.idle_poll_yields(kT + 8 * kUs, 0, kPackets + 1));
  Timing t = timing();
  t.idle_yield_ns = 0;  // VRNIC_IDLE_YIELD_US=0: never
  Scheduler z(t);
  z.idle_poll_yields(kT, 0, kPackets);
  EXPECT_FALSE(z.idle_poll_yields(kT + 1000 * kUs, 0, kPackets));
}

TEST(Scheduler, idle_yield__offers_nobody_takes_back_off_and_one_taken_brings_them_back) {
  Scheduler s(timing());
  s.idle_poll_yields(kT, 0, kPackets);
  uint64_t now = kT + 2 * kUs;
  ASSERT_TRUE(s.idle_poll_yields(now, 0, kPackets));
  // Each offer comes back at once (no other task ran): the gap to the next doubles from
  // kIdleYieldMinGapNs, up to kIdleYieldMaxGapNs.
  uint64_t gap = Scheduler::kIdleYieldMinGapNs;
  for (int i = 0; i < 12; ++i) {
    s.on_idle_yield(now, now + 200);
    EXPECT_FALSE(s.idle_poll_yields(now + gap - 1, 0, kPackets)) << "offer " << i;
    now += gap;
    EXPECT_TRUE(s.idle_poll_yields(now, 0, kPackets)) << "offer " << i;
    gap = std::min(gap * 2, Scheduler::kIdleYieldMaxGapNs);
  }
  EXPECT_EQ(gap, Scheduler::kIdleYieldMaxGapNs);
  // An offer that took kYieldAloneNs (another task ran on this CPU): every idle poll offers.
  s.on_idle_yield(now, now + Scheduler::kYieldAloneNs);
  EXPECT_TRUE(s.idle_poll_yields(now + Scheduler::kYieldAloneNs + 1, 0, kPackets));
  EXPECT_TRUE(s.idle_poll_yields(now + Scheduler::kYieldAloneNs + 2, 0, kPackets));
}

}  // namespace
}  // namespace vrnic::live
