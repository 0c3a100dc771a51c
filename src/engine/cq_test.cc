// The CQ ring on its own: resizing and cleaning a QP's CQEs keep the others in order, wherever
// the ring wrapped.
#include "engine/cq.h"

#include <gtest/gtest.h>

namespace vrnic::engine {
namespace {

WorkCompletion wc(uint64_t id) {
  WorkCompletion w;
  w.wr_id = id;
  return w;
}

TEST(Cq, remove_qp__drops_that_qps_cqes_and_keeps_the_rest_in_order) {
  Cq cq(5, nullptr);
  WorkCompletion out[8];
  for (uint64_t i = 0; i < 3; ++i) ASSERT_TRUE(cq.push(wc(i)));
  ASSERT_EQ(cq.poll(out, 3), 3);  // head at 3: the next pushes wrap
  const uint32_t qpns[5] = {7, 8, 7, 9, 7};
  for (uint64_t i = 0; i < 5; ++i) {
    WorkCompletion w = wc(10 + i);
    w.qp_num = qpns[i];
    ASSERT_TRUE(cq.push(w));
  }
  EXPECT_EQ(cq.remove_qp(7), 3u);
  EXPECT_EQ(cq.count(), 2u);
  EXPECT_EQ(cq.remove_qp(7), 0u);
  WorkCompletion w = wc(20);
  ASSERT_TRUE(cq.push(w));  // room freed by the removal
  ASSERT_EQ(cq.poll(out, 8), 3);
  EXPECT_EQ(out[0].wr_id, 11u);
  EXPECT_EQ(out[1].wr_id, 13u);
  EXPECT_EQ(out[2].wr_id, 20u);
}

TEST(Cq, resize__keeps_wrapped_cqes_in_order) {
  Cq cq(4, nullptr);
  WorkCompletion out[8];
  for (uint64_t i = 0; i < 3; ++i) ASSERT_TRUE(cq.push(wc(i)));
  ASSERT_EQ(cq.poll(out, 2), 2);  // head moves to 2
  for (uint64_t i = 3; i < 6; ++i) ASSERT_TRUE(cq.push(wc(i)));  // 2,3 | 4,5 wrapped
  ASSERT_EQ(cq.count(), 4u);
  EXPECT_FALSE(cq.push(wc(99)));  // full

  EXPECT_FALSE(cq.resize(3));  // fewer than held: refused, nothing changed
  EXPECT_EQ(cq.depth(), 4u);
  EXPECT_FALSE(cq.resize(0));
  ASSERT_TRUE(cq.resize(6));
  EXPECT_EQ(cq.depth(), 6u);
  EXPECT_EQ(cq.count(), 4u);
  ASSERT_TRUE(cq.push(wc(6)));
  ASSERT_TRUE(cq.push(wc(7)));
  EXPECT_FALSE(cq.push(wc(8)));  // the new depth is the limit
  ASSERT_EQ(cq.poll(out, 8), 6);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[i].wr_id, uint64_t(i + 2));

  ASSERT_TRUE(cq.resize(1));  // empty: may shrink to anything
  ASSERT_TRUE(cq.push(wc(10)));
  EXPECT_FALSE(cq.push(wc(11)));
}

TEST(Cq, supplied_ring__holds_the_cqes_and_resize_moves_them_to_the_new_one) {
  std::vector<WorkCompletion> first(3), second(5);
  Cq cq(3, nullptr, first.data());
  ASSERT_TRUE(cq.push(wc(1)));
  ASSERT_TRUE(cq.push(wc(2)));
  EXPECT_EQ(first[0].wr_id, 1u);  // written where the caller said
  EXPECT_EQ(first[1].wr_id, 2u);
  WorkCompletion out[8];
  ASSERT_EQ(cq.poll(out, 1), 1);
  ASSERT_TRUE(cq.resize(5, second.data()));
  EXPECT_EQ(cq.depth(), 5u);
  EXPECT_EQ(second[0].wr_id, 2u);
  first.assign(3, wc(99));  // the old ring is no longer read
  ASSERT_TRUE(cq.push(wc(3)));
  EXPECT_EQ(second[1].wr_id, 3u);
  ASSERT_EQ(cq.poll(out, 8), 2);
  EXPECT_EQ(out[0].wr_id, 2u);
  EXPECT_EQ(out[1].wr_id, 3u);
  ASSERT_TRUE(cq.resize(2));  // back to a ring of its own
  ASSERT_TRUE(cq.push(wc(4)));
  EXPECT_EQ(second[2].wr_id, 0u);
  ASSERT_EQ(cq.poll(out, 8), 1);
  EXPECT_EQ(out[0].wr_id, 4u);
}

TEST(Cq, take_notification__moderated_by_count_fires_on_the_nth_cqe) {
  Cq cq(16, nullptr);
  cq.set_moderation(4, 0);
  cq.arm(false);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(cq.push(wc(i)));
    EXPECT_FALSE(cq.take_notification(false, false, 100));
  }
  EXPECT_EQ(cq.notify_deadline(), UINT64_MAX);  // no period: only the count fires it
  EXPECT_FALSE(cq.take_due_notification(1000000000));
  ASSERT_TRUE(cq.push(wc(3)));
  EXPECT_TRUE(cq.take_notification(false, false, 100));
  ASSERT_TRUE(cq.push(wc(4)));
  EXPECT_FALSE(cq.take_notification(false, false, 100));  // disarmed until the next arm
  cq.arm(false);  // the count starts again from this arm
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(cq.take_notification(false, false, 100));
  EXPECT_TRUE(cq.take_notification(false, false, 100));
}

TEST(Cq, take_notification__moderated_by_period_is_due_after_the_first_cqe) {
  Cq cq(16, nullptr);
  cq.set_moderation(0, 5000);
  cq.arm(false);
  EXPECT_FALSE(cq.take_notification(false, false, 1000));
  EXPECT_EQ(cq.notify_deadline(), 6000u);
  EXPECT_FALSE(cq.take_notification(false, false, 2000));
  EXPECT_EQ(cq.notify_deadline(), 6000u);  // measured from the first held CQE
  EXPECT_FALSE(cq.take_due_notification(5999));
  EXPECT_TRUE(cq.take_due_notification(6000));
  EXPECT_EQ(cq.notify_deadline(), UINT64_MAX);
  EXPECT_FALSE(cq.take_due_notification(7000));  // fired once per arm
}

TEST(Cq, take_notification__count_or_period_whichever_first) {
  Cq cq(16, nullptr);
  cq.set_moderation(2, 5000);
  cq.arm(false);
  EXPECT_FALSE(cq.take_notification(false, false, 0));
  EXPECT_TRUE(cq.take_notification(false, false, 10));  // the count, long before the period
  cq.arm(true);  // solicited only: an unsolicited success is not counted
  EXPECT_FALSE(cq.take_notification(false, false, 20));
  EXPECT_EQ(cq.notify_deadline(), UINT64_MAX);
  EXPECT_FALSE(cq.take_notification(true, false, 30));
  EXPECT_EQ(cq.notify_deadline(), 5030u);
  EXPECT_TRUE(cq.take_due_notification(5030));
}

TEST(Cq, set_moderation__applies_to_cqes_already_held) {
  Cq cq(16, nullptr);
  cq.set_moderation(8, 0);
  cq.arm(false);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(cq.take_notification(false, false, 100));
  cq.set_moderation(3, 0);
  EXPECT_TRUE(cq.take_due_notification(100));  // 3 held >= the new count
  cq.arm(false);
  EXPECT_FALSE(cq.take_notification(false, false, 100));
  cq.set_moderation(0, 0);  // moderation off: the held CQE is due at once
  EXPECT_TRUE(cq.take_due_notification(100));
}

}  // namespace
}  // namespace vrnic::engine
