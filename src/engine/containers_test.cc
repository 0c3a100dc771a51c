// Tests of the engine's small containers: the send ring and the small vector.
#include "engine/ring.h"
#include "engine/small_vec.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace vrnic::engine {
namespace {

TEST(SmallVec, push_back__stays_inline_up_to_n_and_keeps_values_across_the_switch) {
  SmallVec<uint32_t, 4> v;
  EXPECT_TRUE(v.empty());
  for (uint32_t i = 0; i < 4; ++i) v.push_back(i * 10);
  const uint32_t* inline_data = v.data();
  EXPECT_EQ(v.size(), 4u);
  v.push_back(40);  // moves to the heap
  EXPECT_NE(v.data(), inline_data);
  for (uint32_t i = 0; i < 5; ++i) EXPECT_EQ(v[i], i * 10);
  v.resize(3);  // back inside
  EXPECT_EQ(v.data(), inline_data);
  EXPECT_EQ(v[2], 20u);
  v.resize(4);
  EXPECT_EQ(v[3], 0u);  // new elements are value-initialised
}

TEST(SmallVec, assign__and_copies_are_independent) {
  const uint32_t src[6] = {1, 2, 3, 4, 5, 6};
  SmallVec<uint32_t, 4> a;
  a.assign(src, src + 6);
  SmallVec<uint32_t, 4> b = a;
  b[0] = 99;
  EXPECT_EQ(a[0], 1u);
  EXPECT_EQ(b.size(), 6u);
  EXPECT_EQ(b[5], 6u);
  a.assign(src, src + 2);
  EXPECT_EQ(a.size(), 2u);
  EXPECT_EQ(a[1], 2u);
  uint32_t sum = 0;
  for (uint32_t x : a) sum += x;
  EXPECT_EQ(sum, 3u);
}

TEST(Ring, push_back__fifo_order_across_wrap_and_growth) {
  Ring<SmallVec<uint32_t, 2>> r;
  uint32_t next_in = 0, next_out = 0;
  auto push = [&] {
    SmallVec<uint32_t, 2> v;
    for (uint32_t k = 0; k <= next_in % 4; ++k) v.push_back(next_in);  // 1..4 elements
    r.push_back(std::move(v));
    ++next_in;
  };
  auto pop = [&] {
    ASSERT_FALSE(r.empty());
    EXPECT_EQ(r.front().size(), next_out % 4 + 1);
    EXPECT_EQ(r.front()[0], next_out);
    r.pop_front();
    ++next_out;
  };
  // Keep 5..7 in the ring while pushing 100: the head wraps many times over 8 slots, and
  // then grows to 16 and 32 with the head in the middle.
  for (int i = 0; i < 5; ++i) push();
  for (int i = 0; i < 100; ++i) {
    push();
    pop();
  }
  for (int i = 0; i < 20; ++i) push();
  EXPECT_EQ(r.size(), 25u);
  for (size_t i = 0; i < r.size(); ++i) EXPECT_EQ(r[i][0], next_out + i);
  while (!r.empty()) pop();
  EXPECT_EQ(next_out, next_in);
  r.clear();
  EXPECT_TRUE(r.empty());
}

}  // namespace
}  // namespace vrnic::engine
