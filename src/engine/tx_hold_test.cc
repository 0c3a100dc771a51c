// Tests of the doorbell batch (Device::set_tx_hold / flush_tx): held packets wait in the
// transmit batch, leave in the order they were made, before what later calls make, and a
// full batch leaves by itself; over the loop wire.
#include <gtest/gtest.h>

#include <vector>

#include "engine/test_fabric.h"

namespace vrnic::engine::testing {
namespace {

struct TxHold : ::testing::Test {
  Fabric f;
  Node& a = f.add_node(1);
  Node& b = f.add_node(2);
  Qp* qa = nullptr;
  Qp* qb = nullptr;
  Buffer* a_buf = nullptr;
  Buffer* b_buf = nullptr;
  std::vector<uint32_t> psns;  // the BTH PSN of every request a put on the wire, in order

  void SetUp() override {
    f.wire().set_drop_filter([this](const WirePacket& p) {
      if (p.ip.src[3] == 1 && p.kind == wire::PacketKind::kRequest)
        psns.push_back((uint32_t{p.data[9]} << 16) | (uint32_t{p.data[10]} << 8) | p.data[11]);
      return false;
    });
    qa = a.create_qp();
    qb = b.create_qp();
    Fabric::connect(a, qa, b, qb, ConnectOptions{});
    a_buf = &a.reg(4096);
    b_buf = &b.reg(4096);
  }
  // One 8-byte RDMA WRITE of a to b: one packet.
  void write(uint64_t id) {
    Sge sg{a_buf->addr(), 8, a_buf->mr.lkey};
    ASSERT_EQ(post_send(a, qa, wr_of(WrOpcode::kRdmaWrite, id, &sg, b_buf->addr(),
                                     b_buf->mr.rkey)),
              0);
  }
  uint32_t first_psn() const { return qa->req.next_psn; }
  static std::vector<uint32_t> run(uint32_t from, uint32_t n) {
    std::vector<uint32_t> v;
    for (uint32_t i = 0; i < n; ++i) v.push_back((from + i) & 0xFFFFFF);
    return v;
  }
};

TEST_F(TxHold, flush_tx__held_packets_wait_then_leave_in_the_order_they_were_made) {
  const uint32_t psn0 = first_psn();
  a.dev->set_tx_hold(true);
  for (uint64_t id = 1; id <= 3; ++id) write(id);
  EXPECT_TRUE(psns.empty());  // nothing on the wire while held
  EXPECT_TRUE(a.dev->tx_queued());
  a.dev->set_tx_hold(false);
  EXPECT_TRUE(psns.empty());  // letting go of the hold sends nothing by itself
  a.dev->flush_tx();
  EXPECT_FALSE(a.dev->tx_queued());
  EXPECT_EQ(psns, run(psn0, 3));
  ASSERT_TRUE(f.run());
  auto wc = a.poll();
  ASSERT_EQ(wc.size(), 3u);
  for (const WorkCompletion& w : wc) EXPECT_EQ(w.status, WcStatus::kSuccess);
}

TEST_F(TxHold, post_send__after_the_hold_sends_the_held_packets_first) {
  const uint32_t psn0 = first_psn();
  a.dev->set_tx_hold(true);
  write(1);
  write(2);
  a.dev->set_tx_hold(false);
  write(3);  // an unheld call: the held two go first, in the same batch
  EXPECT_EQ(psns, run(psn0, 3));
  EXPECT_FALSE(a.dev->tx_queued());
}

TEST_F(TxHold, post_send__a_full_batch_leaves_by_itself) {
  const uint32_t psn0 = first_psn();
  const uint32_t n = TxBatch::kMaxBatch + 5;
  a.dev->set_tx_hold(true);
  for (uint64_t id = 1; id <= n; ++id) write(id);
  EXPECT_EQ(psns, run(psn0, TxBatch::kMaxBatch));  // the 64th made the batch go
  EXPECT_TRUE(a.dev->tx_queued());
  a.dev->flush_tx();
  EXPECT_EQ(psns, run(psn0, n));
}

TEST_F(TxHold, poll_cq__a_held_post_is_not_completed_before_it_left) {
  a.dev->set_tx_hold(true);
  write(1);
  f.wire().deliver_all();
  EXPECT_TRUE(a.poll().empty());  // not on the wire: no ACK, no completion
  a.dev->set_tx_hold(false);
  a.dev->flush_tx();
  ASSERT_TRUE(f.run());
  auto wc = a.poll();
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
}

}  // namespace
}  // namespace vrnic::engine::testing
