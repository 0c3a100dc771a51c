// On-demand paging on every transport, op by op, as ibv_query_device_ex's odp_caps report it
// (docs/abi.md): UC SEND / RECV / WRITE / SRQ_RECV, UD SEND / RECV / SRQ_RECV, XRC SEND /
// WRITE / READ / ATOMIC / SRQ_RECV. Each op on a present page moves its bytes; on an absent
// page it moves none and fails as that transport fails (RC's own cases: odp_test.cc).
#include <gtest/gtest.h>

#include "engine/srq.h"
#include "engine/test_ud.h"

namespace vrnic::engine::testing {
namespace {

constexpr uint32_t kAll = kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic;

// Two nodes, each with three ODP pages (OdpRegion: [0] present, [1] absent, [2] read-only)
// registered as one ODP MR.
struct OdpTransport : ::testing::Test {
  Fabric f;
  Node& a = f.add_node(1);
  Node& b = f.add_node(2);
  OdpRegion ra{a.memory}, rb{b.memory};
  MrInfo ma, mb;
  void SetUp() override {
    ASSERT_EQ(a.dev->reg_mr(a.pd, ra.base, 3 * ra.ps, ra.addr(0), kAll | kOnDemand, ma), 0);
    ASSERT_EQ(b.dev->reg_mr(b.pd, rb.base, 3 * rb.ps, rb.addr(0), kAll | kOnDemand, mb), 0);
    std::memset(ra.base, 0x11, 64);  // a's message, on its present page
  }
  Sge a_sge(size_t page, uint32_t len = 64) { return {ra.addr(page), len, ma.lkey}; }
  Srq* srq(Node& n) {
    Device::SrqAttr attr{16, 1, 0};
    Errno err = -1;
    Srq* s = n.dev->create_srq(n.pd, attr, nullptr, err);
    EXPECT_EQ(err, 0);
    return s;
  }
  Qp* qp_on_srq(Node& n, QpType type, Srq* s) {
    QpInitAttr init;
    init.type = type;
    init.pd = n.pd;
    init.send_cq = init.recv_cq = n.cq;
    init.srq = s;
    init.cap = {16, 0, 1, 0, 0};
    Errno err = -1;
    Qp* qp = n.dev->create_qp(init, err);
    EXPECT_EQ(err, 0);
    return qp;
  }
  void srq_recv(Srq* s, uint64_t id, size_t page, uint32_t len) {
    Sge sg{rb.addr(page), len, mb.lkey};
    RecvWr wr{id, &sg, 1};
    size_t bad = SIZE_MAX;
    ASSERT_EQ(b.dev->post_srq_recv(s, &wr, 1, &bad), 0);
  }
  // UC pair a -> b; the receive side on an SRQ if given.
  std::pair<Qp*, Qp*> uc_pair(Srq* s = nullptr) {
    Qp* qa = make_qp(a, QpType::kUc);
    Qp* qb = s ? qp_on_srq(b, QpType::kUc, s) : make_qp(b, QpType::kUc);
    uc_up(a, qa, b.gid, b.dev->qp_num(qb), 1, 2);
    uc_up(b, qb, a.gid, a.dev->qp_num(qa), 2, 1);
    return {qa, qb};
  }
  bool b_holds_message(size_t page, size_t off = 0) {
    for (size_t i = 0; i < 64; ++i)
      if (rb.base[page * rb.ps + off + i] != 0x11) return false;
    return true;
  }
};

TEST_F(OdpTransport, uc__send_recv_and_write_on_present_pages) {
  auto [qa, qb] = uc_pair();
  ASSERT_EQ(post_recv(b, qb, 1, {{rb.addr(0), 64, mb.lkey}}), 0);
  Sge s = a_sge(0);
  ASSERT_EQ(post_send(a, qa, wr_of(WrOpcode::kSend, 2, &s)), 0);
  ASSERT_EQ(post_send(a, qa, wr_of(WrOpcode::kRdmaWrite, 3, &s, rb.addr(0, 512), mb.rkey)), 0);
  ASSERT_TRUE(f.run());
  EXPECT_TRUE(b_holds_message(0));
  EXPECT_TRUE(b_holds_message(0, 512));
  auto wb = b.poll();
  ASSERT_EQ(wb.size(), 1u);
  EXPECT_EQ(wb[0].status, WcStatus::kSuccess);
  EXPECT_EQ(a.poll().size(), 2u);
}

TEST_F(OdpTransport, uc__absent_pages_move_nothing) {
  auto [qa, qb] = uc_pair();
  // A WRITE to the read-only page: dropped at the responder (UC has no NAK).
  Sge s = a_sge(0);
  ASSERT_EQ(post_send(a, qa, wr_of(WrOpcode::kRdmaWrite, 3, &s, rb.addr(2), mb.rkey)), 0);
  // A receive on the absent page: the SEND completes it with a local protection error (and
  // the receiving QP goes to ERR).
  ASSERT_EQ(post_recv(b, qb, 1, {{rb.addr(1), 64, mb.lkey}}), 0);
  ASSERT_EQ(post_send(a, qa, wr_of(WrOpcode::kSend, 2, &s)), 0);
  ASSERT_TRUE(f.run());
  EXPECT_TRUE(rb.untouched(1));
  EXPECT_TRUE(rb.untouched(2));
  auto wb = b.poll();
  ASSERT_EQ(wb.size(), 1u);
  EXPECT_EQ(wb[0].status, WcStatus::kLocProtErr);
  EXPECT_EQ(b.ctr().rx_access_errors, 1u);
  // A SEND gathered from a's absent page: a send queue error, nothing on the wire.
  const uint64_t sent = a.ctr().tx_packets;
  Sge hole = a_sge(1);
  ASSERT_EQ(post_send(a, qa, wr_of(WrOpcode::kSend, 4, &hole)), 0);
  ASSERT_TRUE(f.run());
  auto wa = a.poll();
  ASSERT_EQ(wa.size(), 3u);
  EXPECT_EQ(wa[2].status, WcStatus::kLocProtErr);
  EXPECT_EQ(a.ctr().tx_packets, sent);
}

TEST_F(OdpTransport, uc_and_ud__srq_receives_on_odp_pages) {
  Srq* s = srq(b);
  auto [qa, qb] = uc_pair(s);
  srq_recv(s, 1, 0, 64);
  Sge sg = a_sge(0);
  ASSERT_EQ(post_send(a, qa, wr_of(WrOpcode::kSend, 2, &sg)), 0);
  ASSERT_TRUE(f.run());
  EXPECT_TRUE(b_holds_message(0));
  Qp* ua = make_qp(a, QpType::kUd);
  Qp* ub = qp_on_srq(b, QpType::kUd, s);
  ud_up(a, ua);
  ud_up(b, ub);
  srq_recv(s, 3, 0, 40 + 64);  // the GRH, then the datagram
  std::memset(rb.base, 0, 40 + 64);
  ASSERT_EQ(post_send(a, ua, ud_wr(4, &sg, make_ah(a, b.gid), b.dev->qp_num(ub))), 0);
  ASSERT_TRUE(f.run());
  EXPECT_TRUE(b_holds_message(0, 40));
  auto wb = b.poll();
  ASSERT_EQ(wb.size(), 2u);
  EXPECT_EQ(wb[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wb[1].status, WcStatus::kSuccess);
  EXPECT_EQ(wb[1].byte_len, 40u + 64);
}

TEST_F(OdpTransport, ud__send_and_recv_on_present_and_absent_pages) {
  Qp* ua = make_qp(a, QpType::kUd);
  Qp* ub = make_qp(b, QpType::kUd);
  ud_up(a, ua);
  ud_up(b, ub);
  Ah* ah = make_ah(a, b.gid);
  ASSERT_EQ(post_recv(b, ub, 1, {{rb.addr(0), 40 + 64, mb.lkey}}), 0);
  ASSERT_EQ(post_recv(b, ub, 2, {{rb.addr(1), 40 + 64, mb.lkey}}), 0);
  Sge sg = a_sge(0);
  ASSERT_EQ(post_send(a, ua, ud_wr(3, &sg, ah, b.dev->qp_num(ub))), 0);
  ASSERT_EQ(post_send(a, ua, ud_wr(4, &sg, ah, b.dev->qp_num(ub))), 0);
  ASSERT_TRUE(f.run());
  EXPECT_TRUE(b_holds_message(0, 40));
  EXPECT_TRUE(rb.untouched(1));
  auto wb = b.poll();
  ASSERT_EQ(wb.size(), 2u);
  EXPECT_EQ(wb[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wb[1].status, WcStatus::kLocProtErr);
  Sge hole = a_sge(1);
  ASSERT_EQ(post_send(a, ua, ud_wr(5, &hole, ah, b.dev->qp_num(ub))), 0);
  ASSERT_TRUE(f.run());
  auto wa = a.poll();
  ASSERT_EQ(wa.size(), 3u);
  EXPECT_EQ(wa[2].status, WcStatus::kLocProtErr);
}

// XRC: an initiator's SEND gathered from ODP pages into an XRC SRQ receive on ODP pages;
// WRITE, READ and an atomic through the target on b's ODP MR; the absent page refused with a
// remote access error.
TEST_F(OdpTransport, xrc__send_write_read_atomic_and_srq_receive) {
  Xrcd* xrcd = b.dev->open_xrcd();
  Device::SrqAttr attr{16, 1, 0};
  Errno err = -1;
  Srq* s = b.dev->create_xrc_srq(b.pd, xrcd, b.cq, attr, nullptr, err);
  ASSERT_EQ(err, 0);
  uint32_t srqn = 0;
  ASSERT_EQ(b.dev->srq_num(s, srqn), 0);
  QpInitAttr ini;
  ini.type = QpType::kXrcIni;
  ini.pd = a.pd;
  ini.send_cq = ini.recv_cq = a.cq;
  ini.cap = {16, 0, 1, 0, 0};
  Qp* qi = a.dev->create_qp(ini, err);
  QpInitAttr tgt;
  tgt.type = QpType::kXrcTgt;
  tgt.xrcd = xrcd;
  Qp* qt = b.dev->create_qp(tgt, err);
  ASSERT_TRUE(qi && qt);
  Fabric::connect(a, qi, b, qt);
  srq_recv(s, 1, 0, 64);
  Sge sg = a_sge(0);
  auto xrc = [&](SendWr wr) {
    wr.xrc_remote_srqn = srqn;
    return post_send(a, qi, wr);
  };
  ASSERT_EQ(xrc(wr_of(WrOpcode::kSend, 2, &sg)), 0);
  ASSERT_EQ(xrc(wr_of(WrOpcode::kRdmaWrite, 3, &sg, rb.addr(0, 1024), mb.rkey)), 0);
  Sge rd{ra.addr(0, 2048), 64, ma.lkey};
  ASSERT_EQ(xrc(wr_of(WrOpcode::kRdmaRead, 4, &rd, rb.addr(0, 1024), mb.rkey)), 0);
  Sge at{ra.addr(0, 3000), 8, ma.lkey};
  SendWr fa = wr_of(WrOpcode::kAtomicFetchAdd, 5, &at, rb.addr(0, 4000), mb.rkey);
  fa.compare_add = 1;
  ASSERT_EQ(xrc(fa), 0);
  ASSERT_TRUE(f.run());
  EXPECT_TRUE(b_holds_message(0));
  EXPECT_TRUE(b_holds_message(0, 1024));
  EXPECT_EQ(std::memcmp(ra.base + 2048, ra.base, 64), 0);
  EXPECT_EQ(rb.base[4000], 0x5a + 1);
  auto wa = a.poll();
  ASSERT_EQ(wa.size(), 4u);
  for (const WorkCompletion& wc : wa) EXPECT_EQ(wc.status, WcStatus::kSuccess) << wc.wr_id;
  ASSERT_EQ(xrc(wr_of(WrOpcode::kRdmaWrite, 6, &sg, rb.addr(1), mb.rkey)), 0);
  ASSERT_TRUE(f.run());
  wa = a.poll();
  ASSERT_EQ(wa.size(), 1u);
  EXPECT_EQ(wa[0].status, WcStatus::kRemAccessErr);
  EXPECT_TRUE(rb.untouched(1));
}

}  // namespace
}  // namespace vrnic::engine::testing
