// QP error recovery over the loop wire: a QP in ERR (by a failed request or by the consumer)
// moved through RESET, INIT, RTR and RTS carries traffic again, its PSNs those given at
// RTR / RTS, nothing left from before (queues, CQEs, timers, ACK queue, congestion state).
#include <gtest/gtest.h>

#include "engine/qp.h"
#include "engine/test_fabric.h"
#include "wire/headers.h"
#include "wire/icrc.h"
#include "wire/opcode.h"

namespace vrnic::engine::testing {
namespace {

constexpr uint32_t kAll = kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic;

struct Recovery : ::testing::Test {
  Fabric f;
  Node& a = f.add_node(1);
  Node& b = f.add_node(2);
  Qp* qa = a.create_qp();
  Qp* qb = b.create_qp();
  Buffer& src = a.reg(8192);
  Buffer& dst = b.reg(8192);

  void SetUp() override {
    Fabric::connect(a, qa, b, qb);
    fill_random(src.data(), src.bytes.size(), 3);
  }
  static Errno to(Node& n, Qp* qp, QpState s) {
    QpAttr at;
    at.qp_state = s;
    return n.dev->modify_qp(qp, at, kAttrState);
  }
  // RESET, then INIT / RTR / RTS with these PSNs on both sides.
  void recover(uint32_t a_psn, uint32_t b_psn) {
    ASSERT_EQ(to(a, qa, QpState::kReset), 0);
    ASSERT_EQ(to(b, qb, QpState::kReset), 0);
    ConnectOptions o;
    o.a_psn = a_psn;
    o.b_psn = b_psn;
    Fabric::connect(a, qa, b, qb, o);
  }
  Errno post(Node& n, Qp* qp, const SendWr& wr) { return post_send(n, qp, wr); }
  // A signaled WRITE of len bytes of src at off to dst at off (rkey: dst's unless given).
  SendWr write(uint64_t id, Sge& sg, uint64_t off, uint32_t len, uint32_t rkey = 0) {
    sg = {src.addr() + off, len, src.mr.lkey};
    return wr_of(WrOpcode::kRdmaWrite, id, &sg, dst.addr() + off, rkey ? rkey : dst.mr.rkey);
  }
  // Fails a WRITE at the responder (bad rkey): both QPs end in ERR.
  void fail_both() {
    Sge sg, sg2;
    ASSERT_EQ(post(a, qa, write(1, sg, 0, 64, dst.mr.rkey ^ 0x80)), 0);
    ASSERT_EQ(post(a, qa, write(2, sg2, 64, 64)), 0);
    ASSERT_EQ(post_recv(b, qb, 9, {{dst.addr(), 64, dst.mr.lkey}}), 0);
    ASSERT_TRUE(f.run());
    ASSERT_EQ(qa->state(), QpState::kErr);
    ASSERT_EQ(qb->state(), QpState::kErr);
  }
  // SEND, WRITE, READ and FETCH_ADD from a to b; all must succeed with their bytes placed.
  void traffic_flows(uint64_t first_id) {
    ASSERT_EQ(post_recv(b, qb, first_id, {{dst.addr() + 4096, 512, dst.mr.lkey}}), 0);
    Sge s1{src.addr(), 512, src.mr.lkey};
    Sge s2, s3{src.addr() + 5000, 1000, src.mr.lkey}, s4{src.addr() + 6100, 8, src.mr.lkey};
    ASSERT_EQ(post(a, qa, wr_of(WrOpcode::kSend, first_id + 1, &s1)), 0);
    ASSERT_EQ(post(a, qa, write(first_id + 2, s2, 1024, 3000)), 0);
    ASSERT_EQ(post(a, qa, wr_of(WrOpcode::kRdmaRead, first_id + 3, &s3, dst.addr() + 6000,
                                dst.mr.rkey)),
              0);
    uint64_t word = 41;
    std::memcpy(dst.data() + 7000, &word, 8);
    SendWr fa = wr_of(WrOpcode::kAtomicFetchAdd, first_id + 4, &s4, dst.addr() + 7000,
                      dst.mr.rkey);
    fa.compare_add = 1;
    ASSERT_EQ(post(a, qa, fa), 0);
    ASSERT_TRUE(f.run());
    auto wa = a.poll(), wb = b.poll();
    ASSERT_EQ(wa.size(), 4u);
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_EQ(wa[i].status, WcStatus::kSuccess) << i;
      EXPECT_EQ(wa[i].wr_id, first_id + 1 + i);
    }
    ASSERT_EQ(wb.size(), 1u);
    EXPECT_EQ(wb[0].status, WcStatus::kSuccess);
    EXPECT_EQ(wb[0].wr_id, first_id);
    EXPECT_EQ(std::memcmp(dst.data() + 4096, src.data(), 512), 0);
    EXPECT_EQ(std::memcmp(dst.data() + 1024, src.data() + 1024, 3000), 0);
    EXPECT_EQ(std::memcmp(src.data() + 5000, dst.data() + 6000, 1000), 0);
    std::memcpy(&word, dst.data() + 7000, 8);
    EXPECT_EQ(word, 42u);
    std::memcpy(&word, src.data() + 6100, 8);
    EXPECT_EQ(word, 41u);
  }
};

TEST_F(Recovery, qp_transition__reset_after_remote_access_error_carries_traffic_again) {
  fail_both();
  recover(0x123456, 0xfffff0);  // b's send PSNs wrap during the traffic
  traffic_flows(100);
  EXPECT_EQ(qa->state(), QpState::kRts);
  EXPECT_EQ(qb->state(), QpState::kRts);
}

// mlx5's provider cleans a QP's CQEs from its CQs on the move to RESET (mlx5_modify_qp,
// __mlx5_cq_clean): after recovery the next poll sees only new completions. Those of other
// QPs on the same CQ stay, in order.
TEST_F(Recovery, qp_transition__reset_removes_the_qps_completions_from_its_cqs) {
  Qp* other = a.create_qp();
  Qp* other_b = b.create_qp();
  Fabric::connect(a, other, b, other_b);
  Sge s0;
  ASSERT_EQ(post(a, other, write(50, s0, 0, 8)), 0);
  ASSERT_TRUE(f.run());
  fail_both();  // leaves REM_ACCESS_ERR + WR_FLUSH_ERR on a's CQ, a flushed receive on b's
  ASSERT_EQ(post(a, other, write(51, s0, 0, 8)), 0);
  ASSERT_TRUE(f.run());
  recover(10, 20);
  auto wa = a.poll();
  ASSERT_EQ(wa.size(), 2u);
  EXPECT_EQ(wa[0].wr_id, 50u);
  EXPECT_EQ(wa[1].wr_id, 51u);
  EXPECT_TRUE(b.poll().empty());
  traffic_flows(200);
}

TEST_F(Recovery, qp_transition__error_by_the_consumer_then_reset_carries_traffic_again) {
  // Outstanding work when the consumer moves a to ERR: a READ whose responses are in flight.
  Sge sg{src.addr(), 4096, src.mr.lkey};
  ASSERT_EQ(post(a, qa, wr_of(WrOpcode::kRdmaRead, 1, &sg, dst.addr(), dst.mr.rkey)), 0);
  ASSERT_EQ(to(a, qa, QpState::kErr), 0);
  ASSERT_EQ(to(b, qb, QpState::kErr), 0);
  ASSERT_TRUE(f.run());  // the stale responses reach a QP in ERR and are dropped
  auto wa = a.poll();
  ASSERT_EQ(wa.size(), 1u);
  EXPECT_EQ(wa[0].status, WcStatus::kWrFlushErr);
  recover(100, 5000);  // the same PSNs as before: the old responses are long gone
  traffic_flows(300);
}

// Congestion state, the ACK timer and the retry counters belong to the connection that
// ended: the recovered QP sends at line rate with full counts and no armed timer.
TEST_F(Recovery, qp_transition__reset_forgets_timers_retries_and_congestion_state) {
  f.wire().set_drop_filter([](const WirePacket&) { return true; });  // b never answers
  Sge sg;
  ASSERT_EQ(post(a, qa, write(1, sg, 0, 64)), 0);
  f.run();
  ASSERT_EQ(qa->state(), QpState::kErr);  // retries exhausted
  f.wire().set_drop_filter({});
  qa->cc.rp = std::make_unique<Dcqcn>(DcqcnParams{});
  qa->cc.pace_deadline = f.clock().now_ns() + 1'000'000'000;
  qa->resp.nak_sent = true;
  ASSERT_EQ(to(b, qb, QpState::kErr), 0);
  recover(7, 9);
  EXPECT_EQ(qa->cc.rp, nullptr);
  EXPECT_EQ(qa->cc.pace_deadline, 0u);
  EXPECT_EQ(qa->req.ack_deadline, 0u);
  EXPECT_EQ(qa->req.retry_left, 7);
  EXPECT_FALSE(qa->resp.nak_sent);
  EXPECT_EQ(qa->resp.ack_queue.size(), 0u);
  a.poll();
  b.poll();
  traffic_flows(400);
}

// The attributes query_qp returns, fed back after a RESET, restore the same connection: the
// send PSN is the requester's next, the receive PSN the responder's expected one (as rxe's
// rxe_qp_to_attr reports them).
TEST_F(Recovery, query_qp__attributes_fed_back_restore_the_connection) {
  traffic_flows(500);  // both PSNs have moved on
  QpAttr qa_attr, qb_attr;
  QpInitAttr init;
  ASSERT_EQ(a.dev->query_qp(qa, qa_attr, init), 0);
  ASSERT_EQ(b.dev->query_qp(qb, qb_attr, init), 0);
  EXPECT_EQ(qa_attr.sq_psn, qb_attr.rq_psn);
  EXPECT_EQ(qb_attr.sq_psn, qa_attr.rq_psn);
  EXPECT_NE(qb_attr.rq_psn, 100u);  // not the PSN given at RTR any more
  for (auto [n, qp, at] : {std::tuple{&a, qa, qa_attr}, std::tuple{&b, qb, qb_attr}}) {
    ASSERT_EQ(to(*n, qp, QpState::kReset), 0);
    at.qp_state = QpState::kInit;
    ASSERT_EQ(n->dev->modify_qp(qp, at, kAttrState | kAttrPkeyIndex | kAttrPort |
                                            kAttrAccessFlags), 0);
    at.qp_state = QpState::kRtr;
    ASSERT_EQ(n->dev->modify_qp(qp, at, kAttrState | kAttrAv | kAttrPathMtu | kAttrDestQpn |
                                            kAttrRqPsn | kAttrMaxDestRdAtomic |
                                            kAttrMinRnrTimer), 0);
    at.qp_state = QpState::kRts;
    ASSERT_EQ(n->dev->modify_qp(qp, at, kAttrState | kAttrSqPsn | kAttrTimeout | kAttrRetryCnt |
                                            kAttrRnrRetry | kAttrMaxQpRdAtomic), 0);
  }
  traffic_flows(600);
  EXPECT_EQ(a.ctr().rx_nak_psn_seq + b.ctr().rx_nak_psn_seq, 0u);
  EXPECT_EQ(a.ctr().ack_timeouts, 0u);
}

// After recovery b's responder knows only the PSN given at RTR: a packet before it is a
// duplicate (acknowledged, not placed), one at it is placed, one beyond it gets one NAK.
struct RecoveredResponder : Recovery {
  transport::LoopPort& peer = f.wire().add_port({10, 0, 0, 3});
  std::vector<wire::Packet> replies;
  static constexpr uint32_t kPeerQpn = 0x99, kRqPsn = 0x800000;

  void SetUp() override {
    Recovery::SetUp();
    fail_both();
    ASSERT_EQ(to(b, qb, QpState::kReset), 0);
    Gid g;
    g.raw = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 3};
    Fabric::bring_up(b, qb, g, kPeerQpn, 1, kRqPsn, {});
    b.poll();
    peer.set_receiver([this](std::span<const WirePacket> batch) {
      for (const WirePacket& w : batch) {
        wire::Packet p;
        ASSERT_EQ(wire::parse_packet(w.data, p), wire::ParseError::kOk);
        replies.push_back(p);
      }
    });
  }
  void inject_write(uint32_t psn, uint64_t off, uint8_t fill) {
    wire::Packet p;
    p.bth.opcode = wire::kRcWriteOnly;
    p.bth.psn = psn;
    p.bth.ack_req = true;
    p.bth.dest_qp = b.dev->qp_num(qb);
    p.reth = {dst.addr() + off, dst.mr.rkey, 8};
    std::vector<uint8_t> payload(8, fill);
    const size_t h = wire::header_size(p.bth.opcode);
    std::vector<uint8_t> out(h + 8 + 4, 0);
    wire::write_headers(p, out.data());
    std::copy(payload.begin(), payload.end(), out.begin() + h);
    WirePacket w;
    w.ip.src = {10, 0, 0, 3};
    w.ip.dst = {10, 0, 0, 2};
    w.ip.src_port = 0xC001;
    wire::store_icrc(wire::compute_icrc(w.ip, {out.data(), out.size() - 4}),
                     out.data() + out.size() - 4);
    w.data = out;
    b.dev->receive({&w, 1});
    f.wire().deliver_all();
  }
};

TEST_F(RecoveredResponder, receive__past_present_and_future_psns_after_recovery) {
  const std::vector<uint8_t> before = dst.bytes;
  inject_write(kRqPsn - 1, 0, 0xaa);  // past: a duplicate of the new connection's view
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].bth.opcode, wire::kRcAck);
  EXPECT_EQ(replies[0].aeth.syndrome, 0x1f);
  EXPECT_EQ(replies[0].bth.psn, kRqPsn - 1);
  EXPECT_EQ(dst.bytes, before);
  inject_write(kRqPsn + 2, 0, 0xbb);  // future: one PSN sequence NAK naming the expected
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_EQ(replies[1].aeth.syndrome, 0x60);
  EXPECT_EQ(replies[1].bth.psn, kRqPsn);
  EXPECT_EQ(dst.bytes, before);
  inject_write(kRqPsn, 16, 0xcc);  // present: placed and acknowledged with MSN 1
  ASSERT_EQ(replies.size(), 3u);
  EXPECT_EQ(replies[2].aeth.syndrome, 0x1f);
  EXPECT_EQ(replies[2].bth.psn, kRqPsn);
  EXPECT_EQ(replies[2].aeth.msn, 1u);
  EXPECT_EQ(dst.data()[16], 0xcc);
  EXPECT_EQ(dst.data()[0], before[0]);
  EXPECT_EQ(b.ctr().rx_duplicate, 1u);
}

}  // namespace
}  // namespace vrnic::engine::testing
