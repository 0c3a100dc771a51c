// Tests of CallPattern: when ACKs are held for the program's answer, and when the program is
// expected back at the CQ.
#include "live/call_pattern.h"

#include <gtest/gtest.h>

namespace vrnic::live {
namespace {

constexpr uint64_t kHold = 20000, kDefer = 5000;

// Receive at t (making an ACK), answer with a post at t + gap.
void exchange(CallPattern& p, uint64_t t, uint64_t gap) {
  p.on_receive_made_packets(t);
  p.on_post_send(t + gap);
}

TEST(CallPattern, new_pattern__holds_nothing) {
  CallPattern p(kHold, kDefer);
  EXPECT_FALSE(p.hold_receives());
  EXPECT_FALSE(p.comes_back());
}

TEST(CallPattern, receive_answered_within_hold__later_receives_are_held) {
  CallPattern p(kHold, kDefer);
  exchange(p, 1000, 3000);
  ASSERT_TRUE(p.hold_receives());
  exchange(p, 10000, kHold - 1);  // answered again: the prediction stands
  EXPECT_TRUE(p.hold_receives());
}

TEST(CallPattern, answer_later_than_hold__no_prediction) {
  CallPattern p(kHold, kDefer);
  exchange(p, 1000, kHold);  // exactly hold_ns later: too late
  EXPECT_FALSE(p.hold_receives());
}

TEST(CallPattern, post_without_a_receive_before__no_prediction) {
  CallPattern p(kHold, kDefer);
  p.on_post_send(1000);  // a sender that only sends (ib_write_bw's client)
  p.on_post_send(2000);
  EXPECT_FALSE(p.hold_receives());
}

TEST(CallPattern, one_receive_answers_one_post_only) {
  CallPattern p(kHold, kDefer);
  p.on_receive_made_packets(1000);
  p.on_post_send(50000);  // late: not an answer
  p.on_post_send(50001);  // the receive was used up by the post before
  EXPECT_FALSE(p.hold_receives());
}

TEST(CallPattern, hold_runs_out_unanswered__holding_stops_until_answered_again) {
  CallPattern p(kHold, kDefer);
  exchange(p, 1000, 100);
  p.on_receive_made_packets(5000);
  p.on_hold_expired();
  EXPECT_FALSE(p.hold_receives());
  exchange(p, 100000, 100);  // answered again: holding resumes
  EXPECT_TRUE(p.hold_receives());
}

TEST(CallPattern, zero_hold__never_holds) {
  CallPattern p(0, kDefer);
  exchange(p, 1000, 0);
  EXPECT_FALSE(p.hold_receives());
}

TEST(CallPattern, program_back_within_defer__expected_back) {
  CallPattern p(kHold, kDefer);
  EXPECT_FALSE(p.on_completions(1000));
  p.on_call(1000 + kDefer - 1);
  EXPECT_TRUE(p.comes_back());
  EXPECT_TRUE(p.on_completions(20000));
}

TEST(CallPattern, program_back_late_twice__not_expected_back) {
  CallPattern p(kHold, kDefer);
  p.on_completions(1000);
  p.on_call(1000);
  ASSERT_TRUE(p.comes_back());
  p.on_completions(2000);
  p.on_call(2000 + kDefer);  // once late (it lost its CPU): still expected back
  EXPECT_TRUE(p.on_completions(200000));
  p.on_call(200000 + kDefer);  // twice in a row: it leaves after completions
  EXPECT_FALSE(p.comes_back());
  EXPECT_FALSE(p.on_completions(400000));
}

TEST(CallPattern, late_returns_not_in_a_row__still_expected_back) {
  CallPattern p(kHold, kDefer);
  uint64_t t = 1000;
  for (int i = 0; i < 5; ++i) {
    p.on_completions(t);
    p.on_call(t + kDefer);  // late
    t += 100000;
    p.on_completions(t);
    p.on_call(t + 1);  // back at once
    t += 100000;
    EXPECT_TRUE(p.comes_back()) << i;
  }
}

TEST(CallPattern, thread_finds_program_gone__not_expected_back) {
  CallPattern p(kHold, kDefer);
  p.on_completions(1000);
  p.on_call(1001);
  ASSERT_TRUE(p.comes_back());
  p.on_completions(2000);
  p.on_quiet(2000 + kDefer - 1);  // not yet past the deferral: no verdict
  EXPECT_TRUE(p.comes_back());
  p.on_quiet(2000 + kDefer);
  EXPECT_FALSE(p.comes_back());
  p.on_call(900000);  // judged already: a later call changes nothing
  EXPECT_FALSE(p.comes_back());
}

}  // namespace
}  // namespace vrnic::live
