// UC over the loop wire: SEND / WRITE without ACKs, loss semantics, access and post-time checks.
#include "engine/test_ud.h"

namespace vrnic::engine::testing {
namespace {

TEST(UcModify, modify_qp__uc_takes_no_ack_or_read_attributes) {
  Fabric f;
  Node& n = f.add_node(1);
  Qp* qp = make_qp(n, QpType::kUc);
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.qp_access_flags = kRemoteWrite | kLocalWrite;
  EXPECT_EQ(n.dev->modify_qp(qp, a, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrQkey), EINVAL);
  ASSERT_EQ(n.dev->modify_qp(qp, a, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags), 0);
  a.qp_state = QpState::kRtr;
  a.ah.dgid = n.gid;
  a.dest_qp_num = 5;
  const uint32_t need = kAttrState | kAttrAv | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn;
  EXPECT_EQ(n.dev->modify_qp(qp, a, need & ~kAttrDestQpn), EINVAL);
  EXPECT_EQ(n.dev->modify_qp(qp, a, need | kAttrMaxDestRdAtomic), EINVAL);  // no READ on UC
  EXPECT_EQ(n.dev->modify_qp(qp, a, need | kAttrMinRnrTimer), EINVAL);      // no RNR on UC
  ASSERT_EQ(n.dev->modify_qp(qp, a, need), 0);
  a.qp_state = QpState::kRts;
  EXPECT_EQ(n.dev->modify_qp(qp, a, kAttrState | kAttrSqPsn | kAttrRetryCnt), EINVAL);
  EXPECT_EQ(n.dev->modify_qp(qp, a, kAttrState | kAttrSqPsn | kAttrMaxQpRdAtomic), EINVAL);
  ASSERT_EQ(n.dev->modify_qp(qp, a, kAttrState | kAttrSqPsn), 0);
}

struct Uc : ::testing::Test {
  Fabric f;
  Node& a = f.add_node(1);
  Node& b = f.add_node(2);
  Qp* qa = nullptr;
  Qp* qb = nullptr;
  void connect(uint32_t b_access = kLocalWrite | kRemoteWrite) {
    qa = make_qp(a, QpType::kUc);
    qb = make_qp(b, QpType::kUc);
    uc_up(a, qa, b.gid, b.dev->qp_num(qb), 100, 900);
    uc_up(b, qb, a.gid, a.dev->qp_num(qa), 900, 100, b_access);
  }
  SendWr wr(WrOpcode op, uint64_t id, Sge* sg, uint64_t raddr = 0, uint32_t rkey = 0) {
    SendWr w;
    w.wr_id = id;
    w.opcode = op;
    w.sg_list = sg;
    w.num_sge = 1;
    w.send_flags = kSendSignaled;
    w.remote_addr = raddr;
    w.rkey = rkey;
    return w;
  }
};

TEST_F(Uc, send_write_and_write_imm__land_without_any_ack) {
  connect();
  Buffer& src = a.reg(16384);
  Buffer& rbuf = b.reg(16384);
  Buffer& wbuf = b.reg(16384);
  fill_random(src.data(), src.bytes.size(), 11);
  ASSERT_EQ(post_recv(b, qb, 1, {{rbuf.addr(), 8192, rbuf.mr.lkey}}), 0);
  ASSERT_EQ(post_recv(b, qb, 2, {{rbuf.addr() + 8192, 16, rbuf.mr.lkey}}), 0);
  Sge s1{src.addr(), 3000, src.mr.lkey};  // 3 packets at MTU 1024
  ASSERT_EQ(post_send(a, qa, wr(WrOpcode::kSend, 10, &s1)), 0);
  Sge s2{src.addr() + 3000, 5000, src.mr.lkey};
  ASSERT_EQ(post_send(a, qa, wr(WrOpcode::kRdmaWrite, 11, &s2, wbuf.addr(), wbuf.mr.rkey)), 0);
  Sge s3{src.addr() + 8000, 2048, src.mr.lkey};
  SendWr w3 = wr(WrOpcode::kRdmaWriteWithImm, 12, &s3, wbuf.addr() + 5000, wbuf.mr.rkey);
  w3.imm_data = 0x01020304;
  ASSERT_EQ(post_send(a, qa, w3), 0);
  // The sender completes each WQE when its last packet is sent, before any reply could come.
  auto sc = a.poll();
  ASSERT_EQ(sc.size(), 3u);
  EXPECT_EQ(sc[0].wr_id, 10u);
  EXPECT_EQ(sc[0].opcode, WcOpcode::kSend);
  EXPECT_EQ(sc[1].opcode, WcOpcode::kRdmaWrite);
  EXPECT_EQ(sc[2].opcode, WcOpcode::kRdmaWrite);
  for (auto& w : sc) EXPECT_EQ(w.status, WcStatus::kSuccess);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(0, std::memcmp(rbuf.data(), src.data(), 3000));
  EXPECT_EQ(0, std::memcmp(wbuf.data(), src.data() + 3000, 5000 + 2048));
  auto rc = b.poll();
  ASSERT_EQ(rc.size(), 2u);
  EXPECT_EQ(rc[0].wr_id, 1u);
  EXPECT_EQ(rc[0].opcode, WcOpcode::kRecv);
  EXPECT_EQ(rc[0].byte_len, 3000u);
  EXPECT_EQ(rc[0].src_qp, a.dev->qp_num(qa));
  EXPECT_EQ(rc[0].wc_flags, 0u);
  EXPECT_EQ(rc[1].wr_id, 2u);
  EXPECT_EQ(rc[1].opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(rc[1].byte_len, 2048u);
  EXPECT_EQ(rc[1].wc_flags, uint32_t{kWcWithImm});
  EXPECT_EQ(rc[1].imm_data, 0x01020304u);
  EXPECT_EQ(a.ctr().tx_send, 3u);
  EXPECT_EQ(a.ctr().tx_write, 5u + 2u);
  EXPECT_EQ(b.ctr().tx_packets, 0u);  // no ACK, no NAK: UC is unacknowledged
  EXPECT_EQ(b.ctr().tx_ack, 0u);
  EXPECT_EQ(a.ctr().rx_packets, 0u);
  EXPECT_EQ(a.dev->next_timer_ns(), UINT64_MAX);  // no ACK timer either
}

TEST_F(Uc, lost_packet__drops_that_message_only_and_reuses_the_receive) {
  connect();
  Buffer& src = a.reg(8192);
  Buffer& dst = b.reg(8192);
  fill_random(src.data(), src.bytes.size(), 4);
  // Message 1: PSNs 100..102 (its middle packet lost); message 2: PSNs 103..104.
  f.wire().set_drop_filter([&](const WirePacket& p) { return parse(p).bth.psn == 101; });
  ASSERT_EQ(post_recv(b, qb, 1, {{dst.addr(), 4096, dst.mr.lkey}}), 0);
  ASSERT_EQ(post_recv(b, qb, 2, {{dst.addr() + 4096, 4096, dst.mr.lkey}}), 0);
  Sge m1{src.addr(), 3000, src.mr.lkey};
  Sge m2{src.addr() + 4096, 2000, src.mr.lkey};
  ASSERT_EQ(post_send(a, qa, wr(WrOpcode::kSend, 1, &m1)), 0);
  ASSERT_EQ(post_send(a, qa, wr(WrOpcode::kSend, 2, &m2)), 0);
  ASSERT_TRUE(f.run());
  auto rc = b.poll();
  ASSERT_EQ(rc.size(), 1u);
  // The receive WQE message 1 had started is used by message 2.
  EXPECT_EQ(rc[0].wr_id, 1u);
  EXPECT_EQ(rc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(rc[0].byte_len, 2000u);
  EXPECT_EQ(0, std::memcmp(dst.data(), src.data() + 4096, 2000));
  EXPECT_EQ(b.ctr().rx_out_of_sequence, 1u);
  EXPECT_EQ(b.ctr().rx_uc_dropped, 1u);  // message 1's LAST (its FIRST was placed, then dropped)
  EXPECT_EQ(b.ctr().tx_packets, 0u);
  EXPECT_EQ(a.ctr().retransmitted_packets, 0u);
  // Both sends completed at the sender: UC cannot know about the loss.
  auto sc = a.poll();
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(sc[1].status, WcStatus::kSuccess);
  EXPECT_EQ(state_of(b, qb), QpState::kRts);
}

TEST_F(Uc, lost_last_packet_of_a_write__next_write_still_lands) {
  connect();
  Buffer& src = a.reg(8192);
  Buffer& dst = b.reg(8192);
  fill_random(src.data(), src.bytes.size(), 8);
  f.wire().set_drop_filter([&](const WirePacket& p) { return parse(p).bth.psn == 101; });
  Sge w1{src.addr(), 2048, src.mr.lkey};  // PSNs 100, 101 (LAST lost)
  Sge w2{src.addr() + 4096, 1024, src.mr.lkey};  // PSN 102, an ONLY
  ASSERT_EQ(post_send(a, qa, wr(WrOpcode::kRdmaWrite, 1, &w1, dst.addr(), dst.mr.rkey)), 0);
  ASSERT_EQ(post_send(a, qa, wr(WrOpcode::kRdmaWrite, 2, &w2, dst.addr() + 4096, dst.mr.rkey)), 0);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(0, std::memcmp(dst.data() + 4096, src.data() + 4096, 1024));
  EXPECT_EQ(0, std::memcmp(dst.data(), src.data(), 1024));  // the first packet was placed
  EXPECT_EQ(b.ctr().rx_out_of_sequence, 1u);
}

TEST_F(Uc, post_send__read_atomics_and_send_with_inv_refused) {
  connect();
  Buffer& src = a.reg(64);
  Sge sg{src.addr(), 8, src.mr.lkey};
  for (WrOpcode op : {WrOpcode::kRdmaRead, WrOpcode::kAtomicCmpSwp, WrOpcode::kAtomicFetchAdd,
                      WrOpcode::kSendWithInv}) {
    EXPECT_EQ(post_send(a, qa, wr(op, 1, &sg, src.addr(), src.mr.rkey)), EINVAL)
        << static_cast<int>(op);
  }
  ASSERT_TRUE(f.run());
  EXPECT_EQ(a.ctr().tx_packets, 0u);
}

TEST_F(Uc, no_receive_posted__message_dropped_and_counted) {
  connect();
  Buffer& src = a.reg(4096);
  Sge sg{src.addr(), 2500, src.mr.lkey};
  ASSERT_EQ(post_send(a, qa, wr(WrOpcode::kSend, 1, &sg)), 0);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(b.ctr().rx_dropped_no_recv, 1u);
  EXPECT_EQ(b.ctr().rx_uc_dropped, 2u);  // the MIDDLE and LAST of the dropped message
  EXPECT_EQ(b.ctr().tx_packets, 0u);     // no RNR NAK
  EXPECT_TRUE(b.poll().empty());
  EXPECT_EQ(state_of(b, qb), QpState::kRts);
}

TEST_F(Uc, write_without_remote_write_access__dropped_and_counted) {
  connect(kLocalWrite);
  Buffer& src = a.reg(64);
  Buffer& dst = b.reg(64);
  std::memset(src.data(), 0x33, 64);
  Sge sg{src.addr(), 64, src.mr.lkey};
  ASSERT_EQ(post_send(a, qa, wr(WrOpcode::kRdmaWrite, 1, &sg, dst.addr(), dst.mr.rkey)), 0);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(dst.bytes[0], 0);
  EXPECT_EQ(b.ctr().rx_access_errors, 1u);
  EXPECT_EQ(b.ctr().tx_packets, 0u);
  EXPECT_EQ(state_of(b, qb), QpState::kRts);
}

TEST_F(Uc, send_longer_than_receive__loc_len_err) {
  connect();
  Buffer& src = a.reg(4096);
  Buffer& dst = b.reg(4096);
  ASSERT_EQ(post_recv(b, qb, 1, {{dst.addr(), 1500, dst.mr.lkey}}), 0);
  Sge sg{src.addr(), 2000, src.mr.lkey};
  ASSERT_EQ(post_send(a, qa, wr(WrOpcode::kSend, 1, &sg)), 0);
  ASSERT_TRUE(f.run());
  auto rc = b.poll();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, WcStatus::kLocLenErr);
  EXPECT_EQ(state_of(b, qb), QpState::kErr);
}

TEST_F(Uc, packets_from_another_address__not_placed) {
  connect();
  // A third node sends UC packets to b's QP: b's QP is connected to a and ignores them.
  Node& c = f.add_node(3);
  Qp* qc = make_qp(c, QpType::kUc);
  uc_up(c, qc, b.gid, b.dev->qp_num(qb), 900, 100);
  Buffer& src = c.reg(64);
  Buffer& dst = b.reg(64);
  ASSERT_EQ(post_recv(b, qb, 1, {{dst.addr(), 64, dst.mr.lkey}}), 0);
  Sge sg{src.addr(), 64, src.mr.lkey};
  ASSERT_EQ(post_send(c, qc, wr(WrOpcode::kSend, 1, &sg)), 0);
  ASSERT_TRUE(f.run());
  EXPECT_TRUE(b.poll().empty());
  EXPECT_EQ(b.ctr().rx_wrong_source, 1u);
}

}  // namespace
}  // namespace vrnic::engine::testing
