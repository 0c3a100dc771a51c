// Tests of the seeded fault injector and its configuration string.
#include "transport/udp/fault_injector.h"

#include <gtest/gtest.h>

namespace vrnic::transport {
namespace {

std::vector<engine::WirePacket> batch_of(std::vector<std::vector<uint8_t>>& storage, size_t n) {
  storage.assign(n, std::vector<uint8_t>(16, 0));
  std::vector<engine::WirePacket> out(n);
  for (size_t i = 0; i < n; ++i) {
    storage[i][0] = static_cast<uint8_t>(i);
    out[i].data = storage[i];
  }
  return out;
}

TEST(FaultConfig, parse__all_keys) {
  FaultConfig c;
  std::string err;
  ASSERT_TRUE(parse_fault_config("loss=0.05,dup=0.01,reorder=0.5,corrupt=0.001,seed=9", c, err));
  EXPECT_DOUBLE_EQ(c.loss, 0.05);
  EXPECT_DOUBLE_EQ(c.dup, 0.01);
  EXPECT_DOUBLE_EQ(c.reorder, 0.5);
  EXPECT_DOUBLE_EQ(c.corrupt, 0.001);
  EXPECT_EQ(c.seed, 9u);
  EXPECT_TRUE(c.any());
}

TEST(FaultConfig, parse__rejects_unknown_key_and_bad_values) {
  FaultConfig c;
  std::string err;
  EXPECT_FALSE(parse_fault_config("jitter=0.1", c, err));
  EXPECT_FALSE(parse_fault_config("loss=2", c, err));
  EXPECT_FALSE(parse_fault_config("loss=abc", c, err));
  EXPECT_FALSE(parse_fault_config("loss", c, err));
  EXPECT_TRUE(parse_fault_config("", c, err));
  EXPECT_FALSE(c.any());
}

TEST(FaultInjector, apply__loss_one_drops_everything) {
  std::vector<std::vector<uint8_t>> storage;
  auto b = batch_of(storage, 10);
  FaultInjector f({.loss = 1.0});
  f.apply(b);
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(f.stats().lost, 10u);
}

TEST(FaultInjector, apply__dup_one_doubles_in_order) {
  std::vector<std::vector<uint8_t>> storage;
  auto b = batch_of(storage, 3);
  FaultInjector f({.dup = 1.0});
  f.apply(b);
  ASSERT_EQ(b.size(), 6u);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(b[i].data[0], i / 2);
}

TEST(FaultInjector, apply__corrupt_flips_exactly_one_bit) {
  std::vector<std::vector<uint8_t>> storage;
  auto b = batch_of(storage, 1);
  storage[0][0] = 0;
  FaultInjector f({.corrupt = 1.0});
  f.apply(b);
  int bits = 0;
  for (uint8_t byte : storage[0]) bits += __builtin_popcount(byte);
  EXPECT_EQ(bits, 1);
}

TEST(FaultInjector, apply__same_seed_same_outcome) {
  std::vector<std::vector<uint8_t>> s1, s2;
  auto b1 = batch_of(s1, 200), b2 = batch_of(s2, 200);
  FaultInjector f1({.loss = 0.3, .reorder = 0.2, .seed = 42}),
      f2({.loss = 0.3, .reorder = 0.2, .seed = 42});
  f1.apply(b1);
  f2.apply(b2);
  ASSERT_EQ(b1.size(), b2.size());
  EXPECT_LT(b1.size(), 200u);
  EXPECT_GT(b1.size(), 100u);
  for (size_t i = 0; i < b1.size(); ++i) EXPECT_EQ(b1[i].data[0], b2[i].data[0]);
}

}  // namespace
}  // namespace vrnic::transport
