// The CQ ring on its own: resizing keeps the held CQEs in order, wherever the ring wrapped.
#include "engine/cq.h"

#include <gtest/gtest.h>

namespace vrnic::engine {
namespace {

WorkCompletion wc(uint64_t id) {
  WorkCompletion w;
  w.wr_id = id;
  return w;
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

}  // namespace
}  // namespace vrnic::engine
