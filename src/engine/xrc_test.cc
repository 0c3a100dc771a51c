// XRC over the loop fabric: SENDs from initiator QPs land in the XRC SRQ their XRCETH names,
// target QPs share SRQs, RDMA and atomics on a target, the NAKs for a bad SRQ, Go-Back-N.
#include <gtest/gtest.h>

#include <cerrno>

#include "engine/srq.h"
#include "engine/test_fabric.h"
#include "wire/opcode.h"

namespace vrnic::engine::testing {
namespace {

struct Xrc : ::testing::Test {
  Fabric f;
  Node& a = f.add_node(1);  // initiator side
  Node& b = f.add_node(2);  // target side
  Xrcd* xrcd = b.dev->open_xrcd();

  Qp* ini() {
    QpInitAttr init;
    init.type = QpType::kXrcIni;
    init.pd = a.pd;
    init.send_cq = init.recv_cq = a.cq;
    init.cap = {64, 64, 2, 2, 0};
    Errno err = -1;
    Qp* qp = a.dev->create_qp(init, err);
    EXPECT_EQ(err, 0);
    EXPECT_EQ(init.cap.max_recv_wr, 0u);  // an initiator has no receive queue
    return qp;
  }
  Qp* tgt(Xrcd* in = nullptr) {
    QpInitAttr init;
    init.type = QpType::kXrcTgt;
    init.xrcd = in ? in : xrcd;
    Errno err = -1;
    Qp* qp = b.dev->create_qp(init, err);
    EXPECT_EQ(err, 0);
    return qp;
  }
  Srq* srq(Cq* cq, Xrcd* in = nullptr, uint32_t* num = nullptr) {
    Device::SrqAttr attr{32, 2, 0};
    Errno err = -1;
    Srq* s = b.dev->create_xrc_srq(b.pd, in ? in : xrcd, cq, attr, nullptr, err);
    EXPECT_EQ(err, 0);
    uint32_t n = 0;
    EXPECT_EQ(b.dev->srq_num(s, n), 0);
    EXPECT_NE(n, 0u);
    if (num) *num = n;
    return s;
  }
  Cq* cq() {
    uint32_t cqe = 256;
    return b.dev->create_cq(cqe, nullptr);
  }
  void post_srq(Srq* s, uint64_t id, Buffer& buf, uint64_t off, uint32_t len) {
    Sge sg{buf.addr() + off, len, buf.mr.lkey};
    RecvWr wr{id, &sg, 1};
    size_t bad = SIZE_MAX;
    ASSERT_EQ(b.dev->post_srq_recv(s, &wr, 1, &bad), 0);
  }
  Errno send(Qp* qp, uint32_t srqn, Buffer& buf, uint32_t len, uint64_t id) {
    Sge sg{buf.addr(), len, buf.mr.lkey};
    SendWr wr = wr_of(WrOpcode::kSend, id, &sg);
    wr.xrc_remote_srqn = srqn;
    return post_send(a, qp, wr);
  }
};

TEST_F(Xrc, send__lands_in_the_srq_the_xrceth_names) {
  Cq* cq1 = cq();
  Cq* cq2 = cq();
  uint32_t n1 = 0, n2 = 0;
  Srq* s1 = srq(cq1, nullptr, &n1);
  Srq* s2 = srq(cq2, nullptr, &n2);
  Qp* qi = ini();
  Qp* qt = tgt();
  Fabric::connect(a, qi, b, qt);
  Buffer& src = a.reg(3000);
  Buffer& dst = b.reg(6000);
  fill_random(src.data(), 3000, 7);
  post_srq(s1, 11, dst, 0, 3000);
  post_srq(s2, 22, dst, 3000, 3000);
  ASSERT_EQ(send(qi, n2, src, 3000, 1), 0);  // three packets at MTU 1024
  ASSERT_TRUE(f.run());
  auto w2 = b.poll(cq2);
  ASSERT_EQ(w2.size(), 1u);
  EXPECT_EQ(w2[0].status, WcStatus::kSuccess);
  EXPECT_EQ(w2[0].wr_id, 22u);
  EXPECT_EQ(w2[0].byte_len, 3000u);
  EXPECT_EQ(w2[0].qp_num, b.dev->qp_num(qt));
  EXPECT_EQ(w2[0].opcode, WcOpcode::kRecv);
  EXPECT_EQ(0, std::memcmp(dst.data() + 3000, src.data(), 3000));
  EXPECT_TRUE(b.poll(cq1).empty());
  ASSERT_EQ(send(qi, n1, src, 100, 2), 0);
  ASSERT_TRUE(f.run());
  auto w1 = b.poll(cq1);
  ASSERT_EQ(w1.size(), 1u);
  EXPECT_EQ(w1[0].wr_id, 11u);
  EXPECT_EQ(w1[0].byte_len, 100u);
  auto wa = a.poll();
  ASSERT_EQ(wa.size(), 2u);
  EXPECT_EQ(wa[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wa[1].status, WcStatus::kSuccess);
  EXPECT_TRUE(b.poll().empty());  // nothing on the target node's default CQ
}

// A target only answers: RTR is all it needs (IBA 10.3.1), with the target's required
// attributes only (no access flags beyond INIT's, no RTS attributes at all).
TEST_F(Xrc, send__target_in_rtr_receives_and_acknowledges) {
  Cq* scq = cq();
  uint32_t n = 0;
  Srq* s = srq(scq, nullptr, &n);
  Qp* qi = ini();
  Qp* qt = tgt();
  QpAttr at;
  at.qp_state = QpState::kInit;
  at.qp_access_flags = kRemoteWrite;
  ASSERT_EQ(b.dev->modify_qp(qt, at, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags),
            0);
  at.qp_state = QpState::kRtr;
  at.path_mtu = 3;
  at.dest_qp_num = a.dev->qp_num(qi);
  at.rq_psn = 100;
  at.max_dest_rd_atomic = 1;
  at.min_rnr_timer = 1;
  at.ah.dgid = a.gid;
  ASSERT_EQ(b.dev->modify_qp(qt, at, kAttrState | kAttrAv | kAttrPathMtu | kAttrDestQpn |
                                         kAttrRqPsn | kAttrMaxDestRdAtomic | kAttrMinRnrTimer),
            0);
  Fabric::bring_up(a, qi, b.gid, b.dev->qp_num(qt), 100, 5000, {});
  Buffer& src = a.reg(64);
  Buffer& dst = b.reg(64);
  post_srq(s, 5, dst, 0, 64);
  ASSERT_EQ(send(qi, n, src, 64, 1), 0);
  ASSERT_TRUE(f.run());
  auto w = b.poll(scq);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].status, WcStatus::kSuccess);
  auto wa = a.poll();
  ASSERT_EQ(wa.size(), 1u);
  EXPECT_EQ(wa[0].status, WcStatus::kSuccess);
}

TEST_F(Xrc, send__two_target_qps_share_one_srq) {
  Cq* scq = cq();
  uint32_t n = 0;
  Srq* s = srq(scq, nullptr, &n);
  Qp* i1 = ini();
  Qp* i2 = ini();
  Qp* t1 = tgt();
  Qp* t2 = tgt();
  Fabric::connect(a, i1, b, t1);
  Fabric::connect(a, i2, b, t2);
  Buffer& src = a.reg(64);
  Buffer& dst = b.reg(64 * 4);
  for (int k = 0; k < 4; ++k) post_srq(s, 100 + k, dst, 64 * k, 64);
  ASSERT_EQ(send(i1, n, src, 64, 1), 0);
  ASSERT_EQ(send(i2, n, src, 64, 2), 0);
  ASSERT_EQ(send(i1, n, src, 64, 3), 0);
  ASSERT_TRUE(f.run());
  auto w = b.poll(scq);
  ASSERT_EQ(w.size(), 3u);
  int from1 = 0, from2 = 0;
  for (const WorkCompletion& wc : w) {
    EXPECT_EQ(wc.status, WcStatus::kSuccess);
    if (wc.qp_num == b.dev->qp_num(t1)) ++from1;
    if (wc.qp_num == b.dev->qp_num(t2)) ++from2;
  }
  EXPECT_EQ(from1, 2);
  EXPECT_EQ(from2, 1);
  EXPECT_EQ(a.poll().size(), 3u);
}

TEST_F(Xrc, write_read_atomic__on_a_target_with_the_srq_pd_keys) {
  uint32_t n = 0;
  srq(cq(), nullptr, &n);
  Qp* qi = ini();
  Qp* qt = tgt();
  Fabric::connect(a, qi, b, qt);
  Buffer& src = a.reg(5000);
  Buffer& back = a.reg(5000);
  Buffer& res = a.reg(8);
  Buffer& dst = b.reg(5000);
  Buffer& word = b.reg(8);
  fill_random(src.data(), 5000, 3);
  Sge sg{src.addr(), 5000, src.mr.lkey};
  SendWr w = wr_of(WrOpcode::kRdmaWrite, 1, &sg, dst.addr(), dst.mr.rkey);
  w.xrc_remote_srqn = n;
  ASSERT_EQ(post_send(a, qi, w), 0);
  Sge rg{back.addr(), 5000, back.mr.lkey};
  SendWr r = wr_of(WrOpcode::kRdmaRead, 2, &rg, dst.addr(), dst.mr.rkey);
  r.xrc_remote_srqn = n;
  ASSERT_EQ(post_send(a, qi, r), 0);
  Sge ag{res.addr(), 8, res.mr.lkey};
  SendWr fa = wr_of(WrOpcode::kAtomicFetchAdd, 3, &ag, word.addr(), word.mr.rkey);
  fa.compare_add = 5;
  fa.xrc_remote_srqn = n;
  ASSERT_EQ(post_send(a, qi, fa), 0);
  ASSERT_TRUE(f.run());
  auto wc = a.poll();
  ASSERT_EQ(wc.size(), 3u);
  for (const WorkCompletion& c : wc) EXPECT_EQ(c.status, WcStatus::kSuccess) << c.wr_id;
  EXPECT_EQ(src.bytes, dst.bytes);
  EXPECT_EQ(src.bytes, back.bytes);
  uint64_t v = 0;
  std::memcpy(&v, word.data(), 8);
  EXPECT_EQ(v, 5u);
}

TEST_F(Xrc, write__key_of_another_pd_than_the_srq_is_a_remote_access_error) {
  uint32_t n = 0;
  srq(cq(), nullptr, &n);
  Qp* qi = ini();
  Qp* qt = tgt();
  Fabric::connect(a, qi, b, qt);
  Buffer& src = a.reg(64);
  Pd* other = b.dev->alloc_pd();
  Buffer& dst = b.reg(64, kLocalWrite | kRemoteWrite, other);
  Sge sg{src.addr(), 64, src.mr.lkey};
  SendWr w = wr_of(WrOpcode::kRdmaWrite, 1, &sg, dst.addr(), dst.mr.rkey);
  w.xrc_remote_srqn = n;
  ASSERT_EQ(post_send(a, qi, w), 0);
  ASSERT_TRUE(f.run());
  auto wc = a.poll();
  ASSERT_GE(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kRemAccessErr);
  EXPECT_EQ(b.ctr().tx_nak_rem_access, 1u);
}

// The target's access flags govern as on RC: no remote write, a WRITE is a remote access error.
TEST_F(Xrc, write__target_without_remote_write_is_a_remote_access_error) {
  uint32_t n = 0;
  srq(cq(), nullptr, &n);
  Qp* qi = ini();
  Qp* qt = tgt();
  Fabric::connect(a, qi, b, qt, {.access = kLocalWrite | kRemoteRead});
  Buffer& src = a.reg(64);
  Buffer& dst = b.reg(64);
  fill_random(src.data(), 64, 9);
  Sge sg{src.addr(), 64, src.mr.lkey};
  SendWr w = wr_of(WrOpcode::kRdmaWrite, 1, &sg, dst.addr(), dst.mr.rkey);
  w.xrc_remote_srqn = n;
  ASSERT_EQ(post_send(a, qi, w), 0);
  ASSERT_TRUE(f.run());
  auto wc = a.poll();
  ASSERT_GE(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kRemAccessErr);
  EXPECT_EQ(dst.bytes, std::vector<uint8_t>(64, 0));  // nothing landed
}

// The SRQ of another XRC domain, and a number no SRQ has: Invalid Request NAK, the target in ERR.
TEST_F(Xrc, send__srq_of_another_xrcd_or_unknown_number_is_naked_invalid_request) {
  for (bool unknown : {false, true}) {
    Xrcd* other = b.dev->open_xrcd();
    uint32_t n = 0;
    Srq* s = srq(cq(), other, &n);
    Buffer& dst = b.reg(64);
    post_srq(s, 1, dst, 0, 64);
    Qp* qi = ini();
    Qp* qt = tgt();
    Fabric::connect(a, qi, b, qt);
    Buffer& src = a.reg(64);
    const uint64_t naks = b.ctr().tx_nak_inv_req;
    ASSERT_EQ(send(qi, unknown ? 0xabcdef : n, src, 64, 9), 0);
    ASSERT_TRUE(f.run());
    auto wc = a.poll();
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, WcStatus::kRemInvReqErr);
    EXPECT_EQ(b.ctr().tx_nak_inv_req, naks + 1);
    QpAttr attr;
    QpInitAttr init;
    ASSERT_EQ(b.dev->query_qp(qt, attr, init), 0);
    EXPECT_EQ(attr.qp_state, QpState::kErr);
    EXPECT_EQ(init.xrcd, xrcd);
    Device::SrqAttr sa;
    ASSERT_EQ(b.dev->query_srq(s, sa), 0);
    std::vector<WorkCompletion> none;
    EXPECT_TRUE(b.poll().empty());  // the other domain's WQE was not taken
  }
}

// Go-Back-N as on RC: lost request packets are resent with their XRCETH, lost ACKs too.
TEST_F(Xrc, go_back_n__send_and_write_survive_loss) {
  Cq* scq = cq();
  uint32_t n = 0;
  Srq* s = srq(scq, nullptr, &n);
  Qp* qi = ini();
  Qp* qt = tgt();
  Fabric::connect(a, qi, b, qt, {.timeout = 8});
  int dropped = 0;
  f.wire().set_drop_filter([&](const WirePacket& p) {
    wire::Packet h;
    if (wire::parse_packet(p.data, h) != wire::ParseError::kOk) return false;
    // Every XRC SEND Middle once, and the first XRC ACK.
    const bool pick = (h.bth.opcode == 0xa1 && h.bth.psn % 2 == 0) ||
                      (h.bth.opcode == wire::kXrcAck && dropped == 0);
    if (pick && dropped < 6) {
      ++dropped;
      return true;
    }
    return false;
  });
  Buffer& src = a.reg(8 * 1024);
  Buffer& dst = b.reg(16 * 1024);
  fill_random(src.data(), src.bytes.size(), 5);
  post_srq(s, 1, dst, 0, 8 * 1024);
  ASSERT_EQ(send(qi, n, src, 8 * 1024, 1), 0);
  Sge sg{src.addr(), 8 * 1024, src.mr.lkey};
  SendWr w = wr_of(WrOpcode::kRdmaWrite, 2, &sg, dst.addr() + 8 * 1024, dst.mr.rkey);
  w.xrc_remote_srqn = n;
  ASSERT_EQ(post_send(a, qi, w), 0);
  ASSERT_TRUE(f.run());
  EXPECT_GE(dropped, 2);
  EXPECT_GT(a.ctr().retransmitted_packets, 0u);
  auto wc = a.poll();
  ASSERT_EQ(wc.size(), 2u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wc[1].status, WcStatus::kSuccess);
  auto rc = b.poll(scq);
  ASSERT_EQ(rc.size(), 1u);  // placed once despite the resends
  EXPECT_EQ(rc[0].byte_len, 8u * 1024);
  EXPECT_EQ(0, std::memcmp(dst.data(), src.data(), 8 * 1024));
  EXPECT_EQ(0, std::memcmp(dst.data() + 8 * 1024, src.data(), 8 * 1024));
}

TEST_F(Xrc, verbs__errors_and_references) {
  QpInitAttr init;
  init.type = QpType::kXrcTgt;  // no XRCD
  Errno err = 0;
  EXPECT_EQ(b.dev->create_qp(init, err), nullptr);
  EXPECT_EQ(err, EINVAL);
  Qp* qt = tgt();
  Qp* qi = ini();
  EXPECT_EQ(b.dev->close_xrcd(xrcd), EBUSY);  // the target QP is in it
  Buffer& buf = a.reg(64);
  EXPECT_EQ(post_recv(a, qi, 1, {{buf.addr(), 64, buf.mr.lkey}}), EINVAL);  // no receive queue
  SendWr wr;
  size_t bad = SIZE_MAX;
  EXPECT_EQ(b.dev->post_send(qt, &wr, 1, &bad), EINVAL);  // no send queue
  EXPECT_EQ(bad, 0u);
  Device::SrqAttr attr{8, 1, 0};
  Srq* basic = b.dev->create_srq(b.pd, attr, nullptr, err);
  uint32_t num = 0;
  EXPECT_EQ(b.dev->srq_num(basic, num), EINVAL);
  Cq* c = cq();
  Srq* x = srq(c);
  EXPECT_EQ(b.dev->destroy_cq(c), EBUSY);  // the XRC SRQ completes into it
  // An XRC SRQ serves target QPs only.
  QpInitAttr rc;
  rc.pd = b.pd;
  rc.send_cq = rc.recv_cq = b.cq;
  rc.srq = x;
  EXPECT_EQ(b.dev->create_qp(rc, err), nullptr);
  EXPECT_EQ(err, EINVAL);
  EXPECT_EQ(b.dev->destroy_srq(x), 0);
  EXPECT_EQ(b.dev->destroy_cq(c), 0);
  EXPECT_EQ(b.dev->destroy_qp(qt), 0);
  EXPECT_EQ(b.dev->close_xrcd(xrcd), 0);
  EXPECT_EQ(b.dev->close_xrcd(xrcd), EINVAL);
}

}  // namespace
}  // namespace vrnic::engine::testing
