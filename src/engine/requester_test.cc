// The requester over the loop wire: MTU segmentation, window, READ pieces, limits, post checks.
#include "engine/requester.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <vector>

#include "engine/test_fabric.h"
#include "wire/opcode.h"

namespace vrnic::engine::testing {
namespace {

// The headers of a packet as it left its sender (payload size kept, bytes not).
struct Sent {
  wire::Packet h;
  size_t payload = 0;
};

struct Requester : ::testing::Test {
  Fabric f;
  Node& a = f.add_node(1);
  Node& b = f.add_node(2);
  Qp* qa = nullptr;
  Qp* qb = nullptr;
  Buffer* src = nullptr;
  Buffer* dst = nullptr;
  std::vector<Sent> from_a;  // every packet a sent, in order

  void connect(const ConnectOptions& o = {}) {
    qa = a.create_qp();
    qb = b.create_qp();
    Fabric::connect(a, qa, b, qb, o);
    src = &a.reg(1024 * 1024);
    dst = &b.reg(1024 * 1024);
    fill_random(src->data(), src->bytes.size(), 3);
    fill_random(dst->data(), dst->bytes.size(), 4);
    f.wire().set_drop_filter([this](const WirePacket& p) {
      if (p.ip.src[3] != 1) return false;
      Sent s;
      EXPECT_EQ(wire::parse_packet(p.data, s.h), wire::ParseError::kOk);
      s.payload = s.h.payload.size();
      s.h.payload = {};
      from_a.push_back(s);
      return false;
    });
  }
  Errno post(WrOpcode op, uint64_t id, uint32_t len, uint32_t send_flags = kSendSignaled) {
    Sge sge{src->addr(), len, src->mr.lkey};
    SendWr wr = wr_of(op, id, &sge, dst->addr(), dst->mr.rkey);
    wr.send_flags = send_flags;
    if (op == WrOpcode::kRdmaRead) {  // READ: from b's buffer into a's
      sge = {src->addr(), len, src->mr.lkey};
      wr.remote_addr = dst->addr();
    }
    return post_send(a, qa, wr);
  }
};

TEST_F(Requester, requester_progress__send_segmented_by_path_mtu) {
  connect();  // MTU 1024, a's first PSN 100
  ASSERT_EQ(post_recv(b, qb, 1, {{dst->addr(), 4096, dst->mr.lkey}}), 0);
  ASSERT_EQ(post(WrOpcode::kSend, 1, 2500), 0);
  ASSERT_EQ(from_a.size(), 3u);
  const uint8_t want[] = {wire::kRcSendFirst, wire::kRcSendMiddle, wire::kRcSendLast};
  const size_t sizes[] = {1024, 1024, 452};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(from_a[i].h.bth.opcode, want[i]);
    EXPECT_EQ(from_a[i].h.bth.psn, 100u + i);
    EXPECT_EQ(from_a[i].payload, sizes[i]);
  }
  EXPECT_FALSE(from_a[0].h.bth.ack_req);
  EXPECT_TRUE(from_a[2].h.bth.ack_req);  // the last packet of a message asks for the ACK
  ASSERT_TRUE(f.run());
  EXPECT_EQ(std::memcmp(dst->data(), src->data(), 2500), 0);
}

TEST_F(Requester, requester_progress__write_reth_on_the_first_packet_only) {
  connect();
  ASSERT_EQ(post(WrOpcode::kRdmaWrite, 1, 3000), 0);
  ASSERT_EQ(from_a.size(), 3u);
  EXPECT_EQ(from_a[0].h.bth.opcode, wire::kRcWriteFirst);
  EXPECT_EQ(from_a[0].h.reth.va, dst->addr());
  EXPECT_EQ(from_a[0].h.reth.rkey, dst->mr.rkey);
  EXPECT_EQ(from_a[0].h.reth.dma_len, 3000u);
  EXPECT_EQ(from_a[1].h.bth.opcode, wire::kRcWriteMiddle);
  EXPECT_EQ(from_a[2].h.bth.opcode, wire::kRcWriteLast);
  EXPECT_EQ(from_a[2].payload, 3000u - 2048u);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(std::memcmp(dst->data(), src->data(), 3000), 0);
}

TEST_F(Requester, requester_progress__zero_length_write_is_one_packet_one_psn) {
  connect();
  ASSERT_EQ(post(WrOpcode::kRdmaWrite, 1, 0), 0);
  ASSERT_EQ(post(WrOpcode::kRdmaWrite, 2, 8), 0);
  ASSERT_EQ(from_a.size(), 2u);
  EXPECT_EQ(from_a[0].h.bth.opcode, wire::kRcWriteOnly);
  EXPECT_EQ(from_a[0].payload, 0u);
  EXPECT_EQ(from_a[1].h.bth.psn, 101u);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(a.poll().size(), 2u);
}

TEST_F(Requester, requester_progress__window_holds_at_send_window_packets) {
  connect();
  const uint32_t n = kWindow1k + 36;
  ASSERT_EQ(post(WrOpcode::kRdmaWrite, 1, n * 1024), 0);
  EXPECT_EQ(from_a.size(), size_t(kWindow1k));
  EXPECT_TRUE(from_a.back().h.bth.ack_req);  // the window holds it: it asks for an ACK
  ASSERT_TRUE(f.run());
  EXPECT_EQ(from_a.size(), n);
  EXPECT_EQ(a.ctr().retransmitted_packets, 0u);
  EXPECT_EQ(std::memcmp(dst->data(), src->data(), n * 1024), 0);
}

// Pieces of half the window: the second is asked for with the first, each next one as soon
// as a piece is answered, so the responder always has the next piece to send.
TEST_F(Requester, requester_progress__long_read_requested_in_pieces_of_half_the_window) {
  connect();
  const uint32_t piece = kWindow1k / 2;
  const uint32_t len = (6 * piece + 8) * 1024;  // six whole pieces and 8 packets
  ASSERT_EQ(post(WrOpcode::kRdmaRead, 1, len), 0);
  ASSERT_EQ(from_a.size(), 2u);  // the window holds two pieces
  for (uint32_t i = 0; i < 2; ++i) {
    EXPECT_EQ(from_a[i].h.bth.opcode, wire::kRcReadRequest);
    EXPECT_EQ(from_a[i].h.bth.psn, 100u + i * piece);
    EXPECT_EQ(from_a[i].h.reth.dma_len, piece * 1024);
  }
  ASSERT_TRUE(f.run());
  ASSERT_EQ(from_a.size(), 7u);
  for (uint32_t i = 0; i < 7; ++i) EXPECT_EQ(from_a[i].h.bth.psn, 100u + i * piece);
  EXPECT_EQ(from_a[6].h.reth.dma_len, 8u * 1024);
  EXPECT_EQ(a.ctr().retransmitted_packets, 0u);
  EXPECT_EQ(std::memcmp(src->data(), dst->data(), len), 0);
}

// One responder resource (max_rd_atomic 1): whole-window pieces, one at a time.
TEST_F(Requester, requester_progress__one_rd_atomic__whole_window_pieces_one_at_a_time) {
  ConnectOptions o;
  o.max_rd_atomic = 1;
  connect(o);
  const uint32_t len = (3 * kWindow1k + 8) * 1024;  // three whole pieces and 8 packets
  ASSERT_EQ(post(WrOpcode::kRdmaRead, 1, len), 0);
  ASSERT_EQ(from_a.size(), 1u);
  EXPECT_EQ(from_a[0].h.reth.dma_len, kWindow1k * 1024);
  ASSERT_TRUE(f.run());
  ASSERT_EQ(from_a.size(), 4u);
  EXPECT_EQ(from_a[1].h.bth.psn, 100u + kWindow1k);
  EXPECT_EQ(from_a[3].h.reth.dma_len, 8u * 1024);
  EXPECT_EQ(std::memcmp(src->data(), dst->data(), len), 0);
}

TEST_F(Requester, requester_progress__rd_atomic_limit_holds_the_second_read) {
  ConnectOptions o;
  o.max_rd_atomic = 1;
  connect(o);
  ASSERT_EQ(post(WrOpcode::kRdmaRead, 1, 64), 0);
  ASSERT_EQ(post(WrOpcode::kRdmaRead, 2, 64), 0);
  ASSERT_EQ(post(WrOpcode::kRdmaWrite, 3, 64), 0);  // behind the held READ, in order
  EXPECT_EQ(from_a.size(), 1u);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(from_a.size(), 3u);
  auto wcs = a.poll();
  ASSERT_EQ(wcs.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(wcs[i].wr_id, i + 1);
}

TEST_F(Requester, requester_progress__fence_waits_for_the_read_before_it) {
  connect();
  ASSERT_EQ(post(WrOpcode::kRdmaRead, 1, 64), 0);
  ASSERT_EQ(post(WrOpcode::kRdmaWrite, 2, 64, kSendSignaled | kSendFence), 0);
  EXPECT_EQ(from_a.size(), 1u);  // 10.8.3.3: the fenced WRITE waits for the READ's response
  ASSERT_TRUE(f.run());
  ASSERT_EQ(from_a.size(), 2u);
  EXPECT_EQ(from_a[1].h.bth.opcode, wire::kRcWriteOnly);
}

TEST_F(Requester, requester_post__refusals) {
  qa = a.create_qp(2);
  src = &a.reg(4096);
  Sge sge{src->addr(), 64, src->mr.lkey};
  SendWr wr = wr_of(WrOpcode::kSend, 1, &sge);
  EXPECT_EQ(post_send(a, qa, wr), EINVAL);  // RESET: no send queue yet
  qb = b.create_qp();
  Fabric::connect(a, qa, b, qb);
  SendWr many = wr;
  many.num_sge = 9;  // the QP was created with 8 SGEs
  EXPECT_EQ(post_send(a, qa, many), EINVAL);
  SendWr atomic = wr_of(WrOpcode::kAtomicFetchAdd, 1, &sge);
  Sge short_sge{src->addr(), 4, src->mr.lkey};
  atomic.sg_list = &short_sge;
  EXPECT_EQ(post_send(a, qa, atomic), EINVAL);  // an atomic needs 8 bytes
  SendWr inl = wr;
  Sge big{src->addr(), 4096, src->mr.lkey};
  inl.sg_list = &big;
  inl.send_flags |= kSendInline;
  EXPECT_EQ(post_send(a, qa, inl), EINVAL);  // longer than max_inline_data
  EXPECT_EQ(post_send(a, qa, wr), 0);
  EXPECT_EQ(post_send(a, qa, wr), 0);
  EXPECT_EQ(post_send(a, qa, wr), ENOMEM);  // depth 2
}

}  // namespace
}  // namespace vrnic::engine::testing
