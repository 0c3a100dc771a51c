// Unit tests of the memory table: keys (random names, generations), bounds, access and PD checks.
#include "engine/memory_table.h"

#include "engine/test_host_memory.h"

#include <gtest/gtest.h>

namespace vrnic::engine {
namespace {

struct Table : ::testing::Test {
  testing::FakeHostMemory host;
  NameSource names{NameSource::Seed{}};
  MemoryTable t{host, names};
  Pd pd, other;
  uint8_t buf[4096];
};

TEST_F(Table, add__keys_differ_and_are_never_below_256) {
  Mr* a = t.add(&pd, buf, 100, 0x1000, kLocalWrite, 10);
  Mr* b = t.add(&pd, buf, 100, 0x1000, kLocalWrite, 10);
  EXPECT_NE(a->key, b->key);
  EXPECT_GE(a->key, 256u);
  EXPECT_EQ(t.find(a->key), a);
  EXPECT_EQ(t.find(0), nullptr);
}

TEST_F(Table, add__respects_max_mr) {
  EXPECT_NE(t.add(&pd, buf, 1, 0, 0, 1), nullptr);
  EXPECT_EQ(t.add(&pd, buf, 1, 0, 0, 1), nullptr);
}

TEST_F(Table, remove__stale_key_never_matches_the_next_mr) {
  Mr* a = t.add(&pd, buf, 100, 0, kRemoteRead, 10);
  uint32_t stale = a->key;
  ASSERT_TRUE(t.remove(a));
  Mr* b = t.add(&pd, buf, 100, 0, kRemoteRead, 10);
  EXPECT_NE(b->key >> 8, stale >> 8);  // the slot again, under a new name
  EXPECT_NE(b->key & 0xff, stale & 0xff);  // and the next generation
  EXPECT_EQ(t.find(stale), nullptr);
  AccessError e;
  EXPECT_EQ(t.check_remote(stale, &pd, 0, 1, kRemoteRead, &e), nullptr);
  EXPECT_EQ(e, AccessError::kBadKey);
}

TEST_F(Table, check_remote__bounds_access_pd) {
  Mr* m = t.add(&pd, buf, 4096, 0x10000, kLocalWrite | kRemoteWrite, 10);
  AccessError e;
  EXPECT_EQ(t.check_remote(m->key, &pd, 0x10000, 4096, kRemoteWrite, &e), buf);
  EXPECT_EQ(t.check_remote(m->key, &pd, 0x10010, 16, kRemoteWrite, &e), buf + 16);
  EXPECT_EQ(t.check_remote(m->key, &pd, 0x10001, 4096, kRemoteWrite, &e), nullptr);
  EXPECT_EQ(e, AccessError::kOutOfBounds);
  EXPECT_EQ(t.check_remote(m->key, &pd, 0xFFFF, 2, kRemoteWrite, &e), nullptr);
  EXPECT_EQ(e, AccessError::kOutOfBounds);
  EXPECT_EQ(t.check_remote(m->key, &pd, ~uint64_t{0} - 1, 4, kRemoteWrite, &e), nullptr);
  EXPECT_EQ(e, AccessError::kOutOfBounds);  // va + len wraps around
  EXPECT_EQ(t.check_remote(m->key, &pd, 0x10000, 8, kRemoteRead, &e), nullptr);
  EXPECT_EQ(e, AccessError::kNoPermission);
  EXPECT_EQ(t.check_remote(m->key, &other, 0x10000, 8, kRemoteWrite, &e), nullptr);
  EXPECT_EQ(e, AccessError::kWrongPd);
  EXPECT_EQ(t.check_remote(m->key ^ 1, &pd, 0x10000, 8, kRemoteWrite, &e), nullptr);
  EXPECT_EQ(e, AccessError::kBadKey);
}

TEST_F(Table, check_local__local_read_needs_no_flag) {
  Mr* m = t.add(&pd, buf, 64, 0, 0, 10);
  EXPECT_EQ(t.check_local(m->key, &pd, 0, 64, 0), buf);
  EXPECT_EQ(t.check_local(m->key, &pd, 0, 64, kLocalWrite), nullptr);
}

}  // namespace
}  // namespace vrnic::engine
