// Tests of the loop wire: routing, explicit delivery, each fault kind, determinism.
#include "transport/loop/loop_wire.h"

#include <gtest/gtest.h>

namespace vrnic::transport {
namespace {

std::array<uint8_t, 16> v4(uint8_t last) { return {10, 0, 0, last}; }

struct Capture {
  std::vector<std::vector<uint8_t>> got;
  std::vector<size_t> batch_sizes;
  LoopPort::Receiver fn() {
    return [this](std::span<const engine::WirePacket> b) {
      batch_sizes.push_back(b.size());
      for (auto& p : b) got.emplace_back(p.data.begin(), p.data.end());
    };
  }
};

void send_bytes(LoopPort& from, const std::array<uint8_t, 16>& to, uint8_t tag, size_t n = 1) {
  for (size_t i = 0; i < n; ++i) {
    std::vector<uint8_t> bytes(40, tag);
    bytes[1] = static_cast<uint8_t>(i);
    engine::WirePacket p;
    p.ip.src = from.address();
    p.ip.dst = to;
    p.data = bytes;
    from.send({&p, 1});
  }
}

TEST(LoopWire, step__routes_by_destination_address) {
  LoopWire w;
  LoopPort& a = w.add_port(v4(1));
  LoopPort& b = w.add_port(v4(2));
  Capture ca, cb;
  a.set_receiver(ca.fn());
  b.set_receiver(cb.fn());
  send_bytes(a, v4(2), 7);
  send_bytes(a, v4(1), 8);  // to itself
  send_bytes(a, v4(9), 9);  // nobody
  EXPECT_EQ(w.in_flight(), 2u);
  EXPECT_EQ(w.deliver_all(), 2u);
  ASSERT_EQ(cb.got.size(), 1u);
  EXPECT_EQ(cb.got[0][0], 7);
  ASSERT_EQ(ca.got.size(), 1u);
  EXPECT_EQ(ca.got[0][0], 8);
  EXPECT_EQ(w.stats().unroutable, 1u);
}

TEST(LoopWire, step__batches_consecutive_packets_for_one_port) {
  LoopWire w;
  LoopPort& a = w.add_port(v4(1));
  LoopPort& b = w.add_port(v4(2));
  Capture cb;
  b.set_receiver(cb.fn());
  send_bytes(a, v4(2), 1, 40);
  EXPECT_TRUE(w.step());
  EXPECT_EQ(cb.batch_sizes[0], 32u);
  EXPECT_EQ(w.deliver_all(), 1u);
  EXPECT_EQ(cb.got.size(), 40u);
  EXPECT_FALSE(w.step());
}

TEST(LoopWire, faults__loss_dup_corrupt_are_counted_and_seeded) {
  auto run = [](uint64_t seed) {
    LoopWire w(seed);
    LoopPort& a = w.add_port(v4(1));
    LoopPort& b = w.add_port(v4(2));
    Capture cb;
    b.set_receiver(cb.fn());
    w.set_faults({.loss = 0.1, .dup = 0.1, .reorder = 0.1, .corrupt = 0.1});
    send_bytes(a, v4(2), 5, 1000);
    w.deliver_all();
    return std::make_pair(w.stats(), cb.got);
  };
  auto [s1, g1] = run(42);
  auto [s2, g2] = run(42);
  auto [s3, g3] = run(43);
  EXPECT_EQ(g1, g2);  // same seed, same outcome
  EXPECT_NE(g1, g3);
  EXPECT_GT(s1.lost, 50u);
  EXPECT_LT(s1.lost, 150u);
  EXPECT_GT(s1.duplicated, 50u);
  EXPECT_GT(s1.corrupted, 50u);
  EXPECT_GT(s1.reordered, 50u);
  EXPECT_EQ(s1.delivered, 1000 - s1.lost + s1.duplicated);
  EXPECT_EQ(g1.size(), s1.delivered);
  size_t damaged = 0;  // packets with a flipped bit outside byte 1 (which holds the index)
  for (auto& g : g1) {
    bool bad = false;
    for (size_t i = 0; i < g.size(); ++i)
      if (i != 1 && g[i] != 5) bad = true;
    damaged += bad;
  }
  EXPECT_GT(damaged, 0u);
  EXPECT_LE(damaged, 2 * s1.corrupted);  // a corrupted packet may also be duplicated
}

TEST(LoopWire, faults__delay_holds_packet_until_clock_advances) {
  LoopWire w;
  LoopPort& a = w.add_port(v4(1));
  LoopPort& b = w.add_port(v4(2));
  Capture cb;
  b.set_receiver(cb.fn());
  w.set_faults({.delay = 1.0, .delay_ns = 5000});
  send_bytes(a, v4(2), 3);
  EXPECT_FALSE(w.step());
  EXPECT_EQ(w.next_due_ns(), w.clock().now_ns() + 5000);
  w.clock().advance(4999);
  EXPECT_FALSE(w.step());
  w.clock().advance(1);
  EXPECT_TRUE(w.step());
  EXPECT_EQ(cb.got.size(), 1u);
}

}  // namespace
}  // namespace vrnic::transport
