// The ETS scheduler's choice (strict classes first, DWRR shares, paused and idle classes)
// and the DCBX comparison.
#include "sim/qos.h"

#include <gtest/gtest.h>

#include <array>

namespace vrnic::sim {
namespace {

// Picks n times from queues that never empty; sizes[p] 0 means priority p has nothing.
std::array<uint64_t, kPriorities> bytes_sent(const QosParams& q, std::array<uint64_t, 8> sizes,
                                             int n) {
  EtsState s;
  std::array<uint64_t, kPriorities> sent{};
  for (int i = 0; i < n; ++i) {
    const int p = pick_priority(q, s, [&](int k) { return sizes[k]; });
    if (p < 0) break;
    sent[p] += sizes[p];
  }
  return sent;
}

TEST(SimQos, defaults_are_strict_priority_by_dscp_class) {
  const QosParams q;
  EXPECT_EQ(q.prio_of_tos(26 << 2 | 2), 3);  // AF31, ECT(0)
  EXPECT_EQ(q.prio_of_tos(48 << 2), 6);      // CS6: CNPs
  const auto sent = bytes_sent(q, {1000, 0, 0, 1000, 0, 0, 0, 0}, 100);
  EXPECT_EQ(sent[3], 100'000u);
  EXPECT_EQ(sent[0], 0u);
}

TEST(SimQos, dwrr_gives_each_class_its_share_whatever_the_frame_sizes) {
  QosParams q;
  q.ets_share[1] = 30;
  q.ets_share[3] = 70;
  const auto sent = bytes_sent(q, {0, 4200, 0, 1100, 0, 0, 0, 0}, 20000);
  const double share3 = double(sent[3]) / double(sent[1] + sent[3]);
  EXPECT_NEAR(share3, 0.70, 0.005);
}

TEST(SimQos, a_strict_class_goes_before_the_ets_classes) {
  QosParams q;
  q.ets_share[0] = 50;
  q.ets_share[1] = 50;
  EtsState s;
  std::array<uint64_t, 8> sizes{100, 100, 0, 0, 0, 0, 64, 0};  // priority 6: strict
  EXPECT_EQ(pick_priority(q, s, [&](int k) { return sizes[k]; }), 6);
  sizes[6] = 0;
  const int p = pick_priority(q, s, [&](int k) { return sizes[k]; });
  EXPECT_TRUE(p == 0 || p == 1);
  sizes = {};
  EXPECT_EQ(pick_priority(q, s, [&](int k) { return sizes[k]; }), -1);
}

// A class with nothing to send (empty or paused) leaves the whole link to the others and
// keeps no credit for later.
TEST(SimQos, an_idle_class_yields_and_keeps_no_credit) {
  QosParams q;
  q.ets_share[1] = 50;
  q.ets_share[2] = 50;
  EtsState s;
  std::array<uint64_t, 8> sizes{0, 1000, 0, 0, 0, 0, 0, 0};
  for (int i = 0; i < 50; ++i) EXPECT_EQ(pick_priority(q, s, [&](int k) { return sizes[k]; }), 1);
  EXPECT_EQ(s.deficit[2], 0);
  sizes[2] = 1000;
  const auto sent = bytes_sent(q, sizes, 1000);
  EXPECT_NEAR(double(sent[2]) / double(sent[1] + sent[2]), 0.5, 0.01);
}

TEST(SimQos, priorities_of_one_class_go_highest_first) {
  QosParams q;
  q.prio_to_tc = {0, 0, 0, 0, 0, 0, 0, 0};
  EtsState s;
  std::array<uint64_t, 8> sizes{100, 0, 100, 0, 0, 0, 0, 0};
  EXPECT_EQ(pick_priority(q, s, [&](int k) { return sizes[k]; }), 2);
}

TEST(SimQos, dcbx_names_each_difference) {
  QosParams a, b;
  EXPECT_TRUE(dcbx_compare(a, b).empty());
  b.pfc_priorities = 1 << 3;
  b.ets_share[3] = 60;
  const auto d = dcbx_compare(a, b);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0], "PFC priorities {0,1,2,3,4,5,6,7} vs {3}");
  EXPECT_EQ(d[1], "ETS shares [0,0,0,0,0,0,0,0] vs [0,0,0,60,0,0,0,0]");
  b.willing = true;
  EXPECT_EQ(&negotiated(b, a), &a);
  b.willing = false;
  EXPECT_EQ(&negotiated(b, a), &b);
}

}  // namespace
}  // namespace vrnic::sim
