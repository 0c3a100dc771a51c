// Tests of DCQCN's reaction point against values worked out by hand from the rules in
// docs/protocol.md ("Congestion control"), step by step, with NVIDIA's defaults.
#include "engine/dcqcn.h"

#include <cmath>

#include <gtest/gtest.h>

namespace vrnic::engine {
namespace {

constexpr uint64_t kUs = 1000;
constexpr double kLine = 25e9;

// Relative comparison: the reference values are printed to 17 digits.
void expect_near_rel(double got, double want) { EXPECT_NEAR(got, want, std::abs(want) * 1e-12); }

TEST(Dcqcn, before_any_cnp__line_rate_no_limiter_no_events) {
  Dcqcn d{DcqcnParams{}};
  EXPECT_FALSE(d.limited());
  EXPECT_EQ(d.rate_bps(), kLine);
  EXPECT_EQ(d.next_event_ns(), UINT64_MAX);
  d.on_sent(1 << 20, 5 * kUs);
  EXPECT_EQ(d.next_send_ns(), 0u);  // no pacing without a limiter
}

TEST(Dcqcn, first_cnp__starts_the_limiter_at_the_current_rate_without_a_cut) {
  Dcqcn d{DcqcnParams{}};
  d.on_cnp(0);
  EXPECT_TRUE(d.limited());
  EXPECT_EQ(d.rate_bps(), kLine);
  EXPECT_EQ(d.target_bps(), kLine);
  EXPECT_EQ(d.alpha(), 1023.0 / 1024);
  EXPECT_EQ(d.next_event_ns(), 300 * kUs);  // the increase timer T
}

TEST(Dcqcn, first_cnp__rate_to_set_on_first_cnp) {
  DcqcnParams p;
  p.first_cnp_rate_bps = 10e9;
  Dcqcn d{p};
  d.on_cnp(0);
  EXPECT_EQ(d.rate_bps(), 10e9);
  EXPECT_EQ(d.target_bps(), 10e9);
}

// The whole sequence: cut, a cut deferred by the rate-reduce period, fast recovery on the
// first timer event, additive increase (timer, then byte counter), hyper increase.
TEST(Dcqcn, sequence__matches_the_hand_computed_reference_at_every_step) {
  Dcqcn d{DcqcnParams{}};
  d.on_cnp(0);
  // t = 10 us: ten quiet alpha periods, alpha = 1023/1024 * (1019/1024)^10; the cut.
  d.on_cnp(10 * kUs);
  expect_near_rel(d.alpha(), 0.95130099444636618);
  expect_near_rel(d.rate_bps(), 13108737569.420424);
  EXPECT_EQ(d.target_bps(), kLine);
  EXPECT_EQ(d.next_event_ns(), 310 * kUs);  // T restarted at the cut
  // t = 12 us: within 4 us of the cut, so the cut waits for 14 us. Alpha: the period
  // [10, 11) saw a CNP ((1-g) a + g), [11, 12) none.
  d.on_cnp(12 * kUs);
  expect_near_rel(d.alpha(), 0.94689259709770512);
  expect_near_rel(d.rate_bps(), 13108737569.420424);
  EXPECT_EQ(d.next_event_ns(), 14 * kUs);
  // t = 14 us: the deferred cut, with alpha after [12, 13) (a CNP) and [13, 14) (none).
  d.advance(14 * kUs);
  expect_near_rel(d.alpha(), 0.94252714540001881);
  expect_near_rel(d.rate_bps(), 6931067068.8685169);
  expect_near_rel(d.target_bps(), 13108737569.420424);
  EXPECT_EQ(d.next_event_ns(), 314 * kUs);
  // t = 314 us: timer event 1 (F = 1): fast recovery, Rc = (Rt + Rc) / 2.
  d.advance(314 * kUs);
  EXPECT_EQ(d.timer_events(), 1u);
  expect_near_rel(d.rate_bps(), 10019902319.14447);
  expect_near_rel(d.target_bps(), 13108737569.420424);
  // t = 614 us: timer event 2: additive increase, Rt += 5 Mb/s. Alpha decayed 600 periods.
  d.advance(614 * kUs);
  EXPECT_EQ(d.timer_events(), 2u);
  expect_near_rel(d.target_bps(), 13113737569.420424);
  expect_near_rel(d.rate_bps(), 11566819944.282448);
  expect_near_rel(d.alpha(), 0.049983917033559283);
  // t = 700 us: 32767 bytes sent: byte event 1 (timer 2 > F, bytes 1 = F): additive.
  d.on_sent(32767, 700 * kUs);
  EXPECT_EQ(d.byte_events(), 1u);
  expect_near_rel(d.target_bps(), 13118737569.420424);
  expect_near_rel(d.rate_bps(), 12342778756.851437);
  // t = 701 us: byte event 2: both counts above F: hyper increase, Rt += 50 Mb/s.
  d.on_sent(32767, 701 * kUs);
  EXPECT_EQ(d.byte_events(), 2u);
  expect_near_rel(d.target_bps(), 13168737569.420424);
  expect_near_rel(d.rate_bps(), 12755758163.135929);
}

TEST(Dcqcn, cut__no_deeper_than_min_dec_fraction_nor_below_min_rate) {
  DcqcnParams p;
  p.min_dec_fraction = 0.25;
  p.alpha_period_ns = 0;  // alpha stays at its initial value
  Dcqcn d{p};
  d.on_cnp(0);
  d.on_cnp(10 * kUs);
  EXPECT_EQ(d.rate_bps(), kLine * 0.75);  // alpha/2 ~ 0.4995, capped at 25 %
  DcqcnParams q;
  q.line_rate_bps = 1.5e6;
  Dcqcn e{q};
  e.on_cnp(0);
  e.on_cnp(10 * kUs);
  EXPECT_EQ(e.rate_bps(), 1e6);  // 1.5 Mb/s * ~0.5 would be 0.75: held at rpg_min_rate
}

TEST(Dcqcn, recovery__timer_alone_brings_the_rate_back_and_releases_the_limiter) {
  Dcqcn d{DcqcnParams{}};
  d.on_cnp(0);
  d.on_cnp(10 * kUs);
  ASSERT_LT(d.rate_bps(), 0.6 * kLine);
  // The cut left the target at line rate (Rt = Rc before the cut), so each timer event
  // halves the gap of 11.89 Gb/s: it is under R_AI (5 Mb/s) after 12 events (2^12 > 2378),
  // at 310 + 11 * 300 us, and the limiter is released.
  uint64_t t = 10 * kUs;
  int events = 0;
  while (d.limited() && events < 100000) {
    t = d.next_event_ns();
    d.advance(t);
    ++events;
  }
  EXPECT_FALSE(d.limited());
  EXPECT_EQ(d.rate_bps(), kLine);
  EXPECT_EQ(d.next_event_ns(), UINT64_MAX);
  EXPECT_EQ(events, 12);
  EXPECT_EQ(t, 3610 * kUs);
  // A CNP after the release takes hold at once and cuts, with alpha decayed over the 3601
  // alpha periods since the last CNP (the cut at 10 us set cnp_in_period: [10, 11) raised it).
  const double a11 = (1 - 5.0 / 1024) * 0.95130099444636618 + 5.0 / 1024;
  const double decayed = a11 * std::pow(1 - 5.0 / 1024, 3611 - 11);
  d.on_cnp(t + kUs);
  EXPECT_TRUE(d.limited());
  EXPECT_NEAR(d.alpha(), decayed, decayed * 1e-9);
  EXPECT_NEAR(d.rate_bps(), kLine * (1 - decayed / 2), 1.0);
  EXPECT_EQ(d.target_bps(), kLine);
}

TEST(Dcqcn, pacer__spaces_packets_at_the_current_rate_with_a_bounded_catch_up) {
  DcqcnParams p;
  p.first_cnp_rate_bps = 8e9;  // 1 byte per ns
  p.byte_reset = 0;            // no byte-counter events
  Dcqcn d{p};
  d.on_cnp(1000 * kUs);
  d.on_sent(4000, 1000 * kUs);
  // 4000 bytes at 8 Gb/s take 4 us, counted from when the limiter started.
  EXPECT_EQ(d.next_send_ns(), 1000 * kUs + 4000);
  d.on_sent(4000, 1000 * kUs + 4000);
  EXPECT_EQ(d.next_send_ns(), 1000 * kUs + 8000);
  // Asleep for 200 us: only 50 us of sending may be caught up.
  d.on_sent(4000, 1200 * kUs);
  EXPECT_EQ(d.next_send_ns(), 1150 * kUs + 4000);
}

// Alpha at a boundary does not depend on how often it was brought up to date: a QP looked
// at every 100 ns (a busy timer) and one looked at only by its CNPs agree to the last bit,
// and alpha_at() tells the value advance() would make without making it.
TEST(Dcqcn, alpha__the_same_however_often_it_is_brought_up_to_date) {
  Dcqcn often{DcqcnParams{}}, seldom{DcqcnParams{}};
  const uint64_t cnps[] = {0, 3 * kUs, 3 * kUs + 500, 40 * kUs, 41 * kUs, 250 * kUs};
  uint64_t t = 0;
  for (uint64_t at : cnps) {
    for (; t < at; t += 100) often.advance(t);
    const uint64_t before = at == 0 ? 0 : at - 1;
    EXPECT_EQ(often.alpha_at(before), seldom.alpha_at(before)) << at;
    often.on_cnp(at);
    seldom.on_cnp(at);
    EXPECT_EQ(often.alpha(), seldom.alpha()) << at;
    EXPECT_EQ(often.rate_bps(), seldom.rate_bps()) << at;
  }
  const uint64_t end = 300 * kUs - 1;  // before the increase timer
  const double told = seldom.alpha_at(end);
  seldom.advance(end);
  for (; t <= end; t += 100) often.advance(t);
  EXPECT_EQ(seldom.alpha(), told);
  EXPECT_EQ(often.alpha(), told);
  EXPECT_LT(told, 0.5);  // decayed over the quiet ~50 us since the last CNP (g = 1/256)
}

}  // namespace
}  // namespace vrnic::engine
