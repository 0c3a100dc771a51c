// Unpredictable names: QP numbers and memory keys share no structure one to the next
// (ReDMArk, USENIX Security 2021, predicts both on hardware that counts them up).
#include "engine/names.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/test_fabric.h"

namespace vrnic::engine {
namespace {

using testing::Fabric;
using testing::Node;

// What ties consecutive names together, if anything: every test below is a bound a counter,
// a constant stride or a short-period generator breaks and 24-bit random names keep, with
// margins of about 5 standard deviations (the sequences are fixed by the seed, so a pass is
// a pass in every run). Returns the relations found, empty for none.
std::string relations(const std::vector<uint32_t>& v) {
  std::string found;
  const size_t n = v.size();
  const double sd_half = std::sqrt(double(n)) / 2;  // binomial(n, 1/2)
  std::set<uint32_t> values, steps;
  double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
  size_t same_top_byte = 0;
  std::vector<size_t> bit_set(24), flip(24);
  for (size_t i = 0; i < n; ++i) {
    if (v[i] >> 24) found += " wider than 24 bits;";
    values.insert(v[i]);
    for (int b = 0; b < 24; ++b) bit_set[b] += v[i] >> b & 1;
    if (i == 0) continue;
    const uint32_t step = (v[i] - v[i - 1]) & 0xffffff, x = v[i] ^ v[i - 1];
    steps.insert(step);
    for (int b = 0; b < 24; ++b) flip[b] += x >> b & 1;
    same_top_byte += (v[i] >> 16) == (v[i - 1] >> 16);
    const double a = v[i - 1], c = v[i];
    sx += a, sy += c, sxx += a * a, syy += c * c, sxy += a * c;
  }
  if (values.size() != n) found += " a name repeats;";
  // Steps between neighbours: random 24-bit names make (almost) every step different.
  if (steps.size() + 10 < n - 1) found += " steps repeat (" + std::to_string(steps.size()) + ");";
  for (int b = 0; b < 24; ++b) {
    if (std::abs(double(bit_set[b]) - n / 2.0) > 5 * sd_half)
      found += " bit " + std::to_string(b) + " biased;";
    if (std::abs(double(flip[b]) - (n - 1) / 2.0) > 5 * sd_half)
      found += " bit " + std::to_string(b) + " follows its neighbour;";
  }
  // Neighbours in the same 1/256 of the space: chance n/256, binomial.
  const double expect = (n - 1) / 256.0;
  if (same_top_byte > expect + 5 * std::sqrt(expect) + 1) found += " neighbours cluster;";
  const double m = n - 1;
  const double r = (m * sxy - sx * sy) / std::sqrt((m * sxx - sx * sx) * (m * syy - sy * sy));
  if (std::abs(r) > 5 / std::sqrt(m)) found += " serial correlation " + std::to_string(r) + ";";
  return found;
}

TEST(Relations, relations__finds_counters_strides_and_recycled_slots) {
  std::vector<uint32_t> counter, stride, lcg, recycled;
  uint32_t x = 12345;
  for (uint32_t i = 0; i < 2000; ++i) {
    counter.push_back(0x11 + i);
    stride.push_back((i * 0x10001) & 0xffffff);
    x = (x * 1103515245 + 12345) & 0xffffff;  // a low-bits LCG: period 2^24, weak bits
    lcg.push_back(x);
    recycled.push_back((i % 16) << 8);  // slot index << 8, as keys were: names repeat
  }
  EXPECT_NE(relations(counter), "");
  EXPECT_NE(relations(stride), "");
  EXPECT_NE(relations(lcg), "");
  EXPECT_NE(relations(recycled), "");
}

TEST(NameSource, next24__is_repeatable_per_seed_and_differs_between_seeds) {
  NameSource::Seed s1{}, s2{};
  s2[31] = 1;
  NameSource a(s1), b(s1), c(s2);
  std::vector<uint32_t> va, vb, vc;
  for (int i = 0; i < 2000; ++i) va.push_back(a.next24()), vb.push_back(b.next24()),
                                 vc.push_back(c.next24());
  EXPECT_EQ(va, vb);
  EXPECT_NE(va, vc);
  EXPECT_EQ(relations(va), "");
  EXPECT_EQ(relations(vc), "");
}

TEST(NameIndex, insert_erase_find__as_a_map_does_over_a_random_run) {
  NameIndex idx;
  std::map<uint32_t, uint32_t> want;
  std::mt19937 rng(3);
  for (int step = 0; step < 200000; ++step) {
    // Names from a small range too, so runs collide and wrap around the table's end.
    const uint32_t name = step % 3 ? 1 + rng() % 5000 : 1 + (rng() & 0xffffff);
    if (want.count(name)) {
      ASSERT_EQ(idx.find(name), want[name]);
      if (rng() % 2) {
        idx.erase(name);
        want.erase(name);
      }
    } else if (want.size() < 3000) {
      idx.insert(name, uint32_t(step));
      want[name] = uint32_t(step);
    } else {
      ASSERT_EQ(idx.find(name), NameIndex::kNone);
    }
    ASSERT_EQ(idx.size(), want.size());
  }
  for (auto& [name, value] : want) EXPECT_EQ(idx.find(name), value);
  EXPECT_EQ(idx.find(0), NameIndex::kNone);
}

struct Names : ::testing::Test {
  Fabric f;
  Node& n = f.add_node(1);
  static constexpr int kCount = 2000;
};

TEST_F(Names, create_qp__qpns_share_nothing_and_avoid_the_special_ones) {
  std::vector<uint32_t> qpns;
  for (int i = 0; i < kCount; ++i) {
    Qp* qp = n.create_qp(4);
    ASSERT_NE(qp, nullptr);
    const uint32_t qpn = n.dev->qp_num(qp);
    EXPECT_GE(qpn, 2u);          // 0 and 1 are QP0 and QP1 (IBA 10.2.5)
    EXPECT_NE(qpn, 0xffffffu);   // the multicast QPN
    qpns.push_back(qpn);
  }
  EXPECT_EQ(relations(qpns), "");
}

TEST_F(Names, destroy_qp__the_next_qpn_is_no_recent_one) {
  std::vector<uint32_t> qpns;
  for (int i = 0; i < kCount; ++i) {  // one QP at a time: the old allocator's worst case
    Qp* qp = n.create_qp(4);
    qpns.push_back(n.dev->qp_num(qp));
    ASSERT_EQ(n.dev->destroy_qp(qp), 0);
  }
  EXPECT_EQ(relations(qpns), "");
}

TEST_F(Names, reg_mr__keys_share_nothing) {
  std::vector<uint8_t> buf(64);
  std::vector<uint32_t> names;
  for (int i = 0; i < kCount; ++i) {
    MrInfo mr;
    ASSERT_EQ(n.dev->reg_mr(n.pd, buf.data(), buf.size(), 0, kRemoteWrite | kLocalWrite, mr), 0);
    EXPECT_EQ(mr.lkey, mr.rkey);
    EXPECT_GE(mr.rkey, 256u);
    names.push_back(mr.rkey >> 8);
  }
  EXPECT_EQ(relations(names), "");
}

TEST_F(Names, dereg_mr__a_reused_slot_gets_an_unrelated_key) {
  std::vector<uint8_t> buf(64);
  std::vector<uint32_t> names;
  std::set<uint32_t> keys;
  for (int i = 0; i < kCount; ++i) {  // the same slot every time
    MrInfo mr;
    ASSERT_EQ(n.dev->reg_mr(n.pd, buf.data(), buf.size(), 0, kRemoteWrite | kLocalWrite, mr), 0);
    names.push_back(mr.rkey >> 8);
    keys.insert(mr.rkey);
    ASSERT_EQ(n.dev->dereg_mr(mr.mr), 0);
  }
  EXPECT_EQ(keys.size(), size_t(kCount));
  EXPECT_EQ(relations(names), "");
}

TEST_F(Names, alloc_mw__window_keys_share_nothing_with_region_keys) {
  std::vector<uint8_t> buf(64);
  std::vector<uint32_t> names;
  for (int i = 0; i < kCount; ++i) {  // regions and windows drawn in turn, one key space
    if (i % 2 == 0) {
      MrInfo mr;
      ASSERT_EQ(n.dev->reg_mr(n.pd, buf.data(), buf.size(), 0, kLocalWrite, mr), 0);
      names.push_back(mr.rkey >> 8);
    } else {
      Errno err = 0;
      uint32_t rkey = 0;
      ASSERT_NE(n.dev->alloc_mw(n.pd, 2, rkey, err), nullptr);
      names.push_back(rkey >> 8);
    }
  }
  EXPECT_EQ(relations(names), "");
}

}  // namespace
}  // namespace vrnic::engine
