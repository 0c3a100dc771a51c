// Unit tests of the ACK queue: grouping, two-level lookup, PSN wrap, ring wrap, eviction.
#include "engine/ack_queue.h"

#include <gtest/gtest.h>

#include "wire/psn.h"

namespace vrnic::engine {
namespace {

AckEntry read_at(uint32_t psn, uint32_t span) {
  AckEntry e;
  e.kind = AckEntry::Kind::kRead;
  e.psn = psn & wire::kPsnMask;
  e.span = span;
  return e;
}

AckEntry atomic_at(uint32_t psn, uint64_t orig) {
  AckEntry e;
  e.kind = AckEntry::Kind::kAtomic;
  e.psn = psn & wire::kPsnMask;
  e.orig = orig;
  return e;
}

TEST(AckQueue, reset__capacity_rounds_to_groups_of_64) {
  EXPECT_EQ(AckQueue(16).capacity(), 16u);
  EXPECT_EQ(AckQueue(16).group_size(), 16u);
  EXPECT_EQ(AckQueue(64).capacity(), 64u);
  EXPECT_EQ(AckQueue(100).capacity(), 128u);
  EXPECT_EQ(AckQueue(256).group_size(), 64u);
  EXPECT_EQ(AckQueue(0).capacity(), 1u);
}

TEST(AckQueue, find__hits_inside_span_misses_outside) {
  AckQueue q(16);
  q.push(read_at(100, 4));   // 100..103
  q.push(atomic_at(104, 7)); // 104
  q.push(read_at(105, 1));   // 105
  EXPECT_EQ(q.find(99), nullptr);
  EXPECT_EQ(q.find(100)->psn, 100u);
  EXPECT_EQ(q.find(103)->psn, 100u);
  EXPECT_EQ(q.find(104)->orig, 7u);
  EXPECT_EQ(q.find(105)->psn, 105u);
  EXPECT_EQ(q.find(106), nullptr);
}

TEST(AckQueue, find__group_boundaries) {
  AckQueue q(256);
  for (uint32_t i = 0; i < 256; ++i) q.push(atomic_at(1000 + 2 * i, i));  // PSNs 1000, 1002, ...
  for (uint32_t i : {0u, 63u, 64u, 127u, 128u, 191u, 192u, 255u}) {
    AckEntry* e = q.find(1000 + 2 * i);
    ASSERT_NE(e, nullptr) << i;
    EXPECT_EQ(e->orig, i);
    EXPECT_EQ(q.find(1000 + 2 * i + 1), nullptr) << i;  // the gaps between entries
  }
}

TEST(AckQueue, find__searches_one_group_only) {
  AckQueue q(1024);
  for (uint32_t i = 0; i < 1024; ++i) q.push(atomic_at(i, i));
  uint32_t probes = 0, worst = 0;
  for (uint32_t i = 0; i < 1024; ++i) {
    ASSERT_EQ(q.find(i, &probes)->orig, i);
    worst = std::max(worst, probes);
  }
  // 16 groups: 4 probes of the group table, 6 inside a group of 64, 1 final compare.
  EXPECT_LE(worst, 4u + 6 + 1);
  q.find_linear(1023, &probes);
  EXPECT_EQ(probes, 1024u);
}

TEST(AckQueue, find__psn_wrap_at_2_pow_24) {
  AckQueue q(128);
  uint32_t start = wire::kPsnMask - 70;  // the entries straddle 0xFFFFFF -> 0
  for (uint32_t i = 0; i < 128; ++i) q.push(read_at(start + 3 * i, 3));
  for (uint32_t i = 0; i < 128; ++i) {
    uint32_t psn = (start + 3 * i + 2) & wire::kPsnMask;
    AckEntry* e = q.find(psn);
    ASSERT_NE(e, nullptr) << i;
    EXPECT_EQ(e->psn, (start + 3 * i) & wire::kPsnMask);
  }
  EXPECT_EQ(q.find((start - 1) & wire::kPsnMask), nullptr);
  EXPECT_EQ(q.find((start + 3 * 128) & wire::kPsnMask), nullptr);
}

TEST(AckQueue, push__evicts_the_oldest_when_full) {
  AckQueue q(4);
  for (uint32_t i = 0; i < 6; ++i) q.push(atomic_at(10 + i, i));
  EXPECT_EQ(q.size(), 4u);
  EXPECT_EQ(q.find(10), nullptr);
  EXPECT_EQ(q.find(11), nullptr);
  for (uint32_t i = 2; i < 6; ++i) EXPECT_EQ(q.find(10 + i)->orig, i);
}

TEST(AckQueue, find__ring_wrap_splits_a_group_between_oldest_and_newest) {
  AckQueue q(128);  // two groups of 64
  // 160 pushes: group slots 0..31 hold the newest entries, 32..63 the oldest ones.
  for (uint32_t i = 0; i < 160; ++i) q.push(atomic_at(500 + i, i));
  for (uint32_t i = 0; i < 32; ++i) EXPECT_EQ(q.find(500 + i), nullptr) << i;
  for (uint32_t i = 32; i < 160; ++i) {
    AckEntry* e = q.find(500 + i);
    ASSERT_NE(e, nullptr) << i;
    EXPECT_EQ(e->orig, i);
  }
}

TEST(AckQueue, find__agrees_with_linear_scan_under_random_use) {
  for (uint32_t cap : {1u, 16u, 64u, 100u, 256u, 1024u}) {
    AckQueue q(cap);
    uint32_t psn = 0xFFF000;
    uint64_t rng = cap;
    for (int i = 0; i < 5000; ++i) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      uint32_t span = 1 + (rng >> 60);
      q.push(read_at(psn, span));
      psn = (psn + span + ((rng >> 50) & 3)) & wire::kPsnMask;
      uint32_t probe = (psn - 1 - ((rng >> 20) % (cap * 4 + 1))) & wire::kPsnMask;
      EXPECT_EQ(q.find(probe), q.find_linear(probe)) << "cap " << cap << " i " << i;
    }
  }
}

TEST(AckQueue, clear__empties) {
  AckQueue q(8);
  q.push(atomic_at(1, 1));
  q.clear();
  EXPECT_EQ(q.size(), 0u);
  EXPECT_EQ(q.find(1), nullptr);
}

}  // namespace
}  // namespace vrnic::engine
