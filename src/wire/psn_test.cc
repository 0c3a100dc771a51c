// Tests of 24-bit PSN arithmetic: wrap, the sign of the distance at the 2^23 boundary, ordering.
#include "wire/psn.h"

#include <gtest/gtest.h>

namespace vrnic::wire {
namespace {

TEST(Psn, add__wraps_at_24_bits) {
  EXPECT_EQ(psn_add(0xffffff, 1), 0u);
  EXPECT_EQ(psn_add(0xfffffe, 5), 3u);
  EXPECT_EQ(psn_add(0, -1), 0xffffffu);
  EXPECT_EQ(psn_add(2, -5), 0xfffffdu);
  EXPECT_EQ(psn_add(0x123456, 0), 0x123456u);
  EXPECT_EQ(psn_add(0, int64_t{1} << 24), 0u);  // a full turn
}

TEST(Psn, diff__small_distances_across_wrap) {
  EXPECT_EQ(psn_diff(0, 0xffffff), 1);
  EXPECT_EQ(psn_diff(0xffffff, 0), -1);
  EXPECT_EQ(psn_diff(5, 0xfffffb), 10);
  EXPECT_EQ(psn_diff(0xfffffb, 5), -10);
  EXPECT_EQ(psn_diff(100, 100), 0);
}

TEST(Psn, diff__sign_at_half_space) {
  // Exactly half the space apart is "ahead" (the range is (-2^23, 2^23]).
  EXPECT_EQ(psn_diff(1 << 23, 0), 1 << 23);
  EXPECT_EQ(psn_diff(0, 1 << 23), 1 << 23);
  EXPECT_EQ(psn_diff((1 << 23) - 1, 0), (1 << 23) - 1);
  EXPECT_EQ(psn_diff((1 << 23) + 1, 0), -((1 << 23) - 1));
  EXPECT_EQ(psn_diff(0, (1 << 23) + 1), (1 << 23) - 1);
}

TEST(Psn, diff__ignores_bits_above_24) {
  EXPECT_EQ(psn_diff(0x01000005, 0x02000003), 2);
}

TEST(Psn, diff__inverts_add) {
  for (uint32_t base : {0u, 1u, 0x7fffffu, 0x800000u, 0xfffff0u, 0xffffffu}) {
    for (int64_t n : {-8388607ll, -1000ll, -1ll, 0ll, 1ll, 77ll, 8388608ll}) {
      EXPECT_EQ(psn_diff(psn_add(base, n), base), n) << base << " " << n;
    }
  }
}

TEST(Psn, lt_le__across_wrap) {
  EXPECT_TRUE(psn_lt(0xffffff, 0));
  EXPECT_FALSE(psn_lt(0, 0xffffff));
  EXPECT_FALSE(psn_lt(7, 7));
  EXPECT_TRUE(psn_le(7, 7));
  EXPECT_TRUE(psn_le(0xfffff0, 3));
  EXPECT_FALSE(psn_le(3, 0xfffff0));
  // At exactly half the space, b is ahead of a in both orders: neither is "less".
  EXPECT_FALSE(psn_lt(0, 1 << 23));
  EXPECT_FALSE(psn_lt(1 << 23, 0));
}

}  // namespace
}  // namespace vrnic::wire
