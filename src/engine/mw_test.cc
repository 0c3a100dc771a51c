// Memory windows over the loop fabric: type 1 (Bind MW verb) and type 2 (IBV_WR_BIND_MW)
// binds, access through a window (range, rights, QP association), LOCAL_INV, SEND with
// Invalidate, and the bind errors.
#include <gtest/gtest.h>

#include "engine/test_fabric.h"

namespace vrnic::engine::testing {
namespace {

constexpr uint32_t kAll = kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic;

struct MwFixture : ::testing::Test {
  Fabric f;
  Node& a = f.add_node(1);
  Node& b = f.add_node(2);
  Qp* qa = a.create_qp();
  Qp* qb = b.create_qp();
  Buffer& target = b.reg(8192, kAll | kMwBind);
  Buffer& src = a.reg(8192);

  void SetUp() override {
    Fabric::connect(a, qa, b, qb);
    fill_random(src.data(), src.bytes.size(), 11);
  }
  Mw* alloc(uint8_t type, uint32_t& rkey) {
    Errno err = -1;
    Mw* mw = b.dev->alloc_mw(b.pd, type, rkey, err);
    EXPECT_EQ(err, 0);
    return mw;
  }
  // Posts a WR on b's QP and returns its completion.
  WorkCompletion b_post(const SendWr& wr, Qp* qp = nullptr) {
    EXPECT_EQ(post_send(b, qp ? qp : qb, wr), 0);
    EXPECT_TRUE(f.run());
    auto wcs = b.poll();
    EXPECT_GE(wcs.size(), 1u);
    return wcs.empty() ? WorkCompletion{} : wcs[0];
  }
  WorkCompletion bind2(Mw* mw, uint32_t new_rkey, Mr* mr, uint64_t addr, uint64_t len,
                       uint32_t access, Qp* qp = nullptr) {
    SendWr wr;
    wr.wr_id = 50;
    wr.opcode = WrOpcode::kBindMw;
    wr.send_flags = kSendSignaled;
    wr.bind = {mw, new_rkey, mr, addr, len, access};
    return b_post(wr, qp);
  }
  WorkCompletion local_inv(uint32_t rkey) {
    SendWr wr;
    wr.wr_id = 60;
    wr.opcode = WrOpcode::kLocalInv;
    wr.send_flags = kSendSignaled;
    wr.invalidate_rkey = rkey;
    return b_post(wr);
  }
  // An RDMA op from a into b's memory: returns a's completion status.
  WcStatus rdma(WrOpcode op, uint64_t remote, uint32_t rkey, uint32_t len,
                uint64_t local_off = 0, Qp* from = nullptr) {
    Sge sg{src.addr() + local_off, len, src.mr.lkey};
    EXPECT_EQ(post_send(a, from ? from : qa, wr_of(op, 70, &sg, remote, rkey)), 0);
    EXPECT_TRUE(f.run());
    auto wcs = a.poll();
    EXPECT_EQ(wcs.size(), 1u);
    return wcs.empty() ? WcStatus::kGeneralErr : wcs[0].status;
  }
  void reconnect() {  // after an error: fresh QPs on both sides
    qa = a.create_qp();
    qb = b.create_qp();
    Fabric::connect(a, qa, b, qb);
  }
};

uint32_t next_key(uint32_t rkey) { return (rkey & ~0xffu) | ((rkey + 1) & 0xff); }

TEST_F(MwFixture, bind__type2_gives_access_to_the_window_only) {
  uint32_t rkey0 = 0;
  Mw* mw = alloc(2, rkey0);
  ASSERT_NE(mw, nullptr);
  uint32_t rkey = next_key(rkey0);
  WorkCompletion wc = bind2(mw, rkey, target.mr.mr, target.addr() + 1024, 2048,
                            kRemoteWrite | kRemoteRead);
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(wc.opcode, WcOpcode::kBindMw);
  EXPECT_EQ(wc.wr_id, 50u);
  // Inside the window: lands in the MR's memory.
  EXPECT_EQ(rdma(WrOpcode::kRdmaWrite, target.addr() + 1024, rkey, 2048), WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(target.data() + 1024, src.data(), 2048), 0);
  // The window's previous key never worked and does not now.
  EXPECT_EQ(rdma(WrOpcode::kRdmaWrite, target.addr() + 1024, rkey0, 8), WcStatus::kRemAccessErr);
  reconnect();
  // One byte past the window (still inside the MR).
  EXPECT_EQ(rdma(WrOpcode::kRdmaRead, target.addr() + 1024 + 2041, rkey, 8),
            WcStatus::kRemAccessErr);
}

TEST_F(MwFixture, check_remote__type2_window_answers_only_on_its_qp) {
  uint32_t rkey0 = 0;
  Mw* mw = alloc(2, rkey0);
  uint32_t rkey = next_key(rkey0);
  ASSERT_EQ(bind2(mw, rkey, target.mr.mr, target.addr(), 4096, kRemoteWrite).status,
            WcStatus::kSuccess);
  Qp* qa2 = a.create_qp();
  Qp* qb2 = b.create_qp();
  Fabric::connect(a, qa2, b, qb2);
  EXPECT_EQ(rdma(WrOpcode::kRdmaWrite, target.addr(), rkey, 64, 0, qa2), WcStatus::kRemAccessErr);
  EXPECT_EQ(rdma(WrOpcode::kRdmaWrite, target.addr(), rkey, 64, 0, qa), WcStatus::kSuccess);
}

TEST_F(MwFixture, check_remote__window_rights_are_checked) {
  uint32_t rkey0 = 0;
  Mw* mw = alloc(2, rkey0);
  uint32_t rkey = next_key(rkey0);
  ASSERT_EQ(bind2(mw, rkey, target.mr.mr, target.addr(), 4096, kRemoteRead).status,
            WcStatus::kSuccess);
  EXPECT_EQ(rdma(WrOpcode::kRdmaRead, target.addr(), rkey, 64), WcStatus::kSuccess);
  EXPECT_EQ(rdma(WrOpcode::kRdmaWrite, target.addr(), rkey, 64), WcStatus::kRemAccessErr);
  EXPECT_EQ(target.data()[0], 0);
}

TEST_F(MwFixture, bind__zero_based_type2_window) {
  uint32_t rkey0 = 0;
  Mw* mw = alloc(2, rkey0);
  uint32_t rkey = next_key(rkey0);
  ASSERT_EQ(bind2(mw, rkey, target.mr.mr, target.addr() + 4096, 1024,
                  kRemoteWrite | kZeroBased).status,
            WcStatus::kSuccess);
  EXPECT_EQ(rdma(WrOpcode::kRdmaWrite, 100, rkey, 64), WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(target.data() + 4096 + 100, src.data(), 64), 0);
}

TEST_F(MwFixture, local_invalidate__then_rebind) {
  uint32_t rkey0 = 0;
  Mw* mw = alloc(2, rkey0);
  uint32_t rkey = next_key(rkey0);
  ASSERT_EQ(bind2(mw, rkey, target.mr.mr, target.addr(), 4096, kRemoteWrite).status,
            WcStatus::kSuccess);
  // A bound type 2 window cannot be bound again before it is invalidated.
  WorkCompletion again = bind2(mw, next_key(rkey), target.mr.mr, target.addr(), 64, kRemoteWrite);
  EXPECT_EQ(again.status, WcStatus::kMwBindErr);
  reconnect();
  // The window was bound through the old qb: only that QP may invalidate it. Rebind on the
  // new QPs after a dealloc / alloc.
  ASSERT_EQ(b.dev->dealloc_mw(mw), 0);
  mw = alloc(2, rkey0);
  rkey = next_key(rkey0);
  ASSERT_EQ(bind2(mw, rkey, target.mr.mr, target.addr(), 4096, kRemoteWrite).status,
            WcStatus::kSuccess);
  WorkCompletion inv = local_inv(rkey);
  EXPECT_EQ(inv.status, WcStatus::kSuccess);
  EXPECT_EQ(inv.opcode, WcOpcode::kLocalInv);
  EXPECT_EQ(rdma(WrOpcode::kRdmaWrite, target.addr(), rkey, 8), WcStatus::kRemAccessErr);
  reconnect();
  rkey = next_key(rkey);
  ASSERT_EQ(bind2(mw, rkey, target.mr.mr, target.addr(), 4096, kRemoteWrite).status,
            WcStatus::kSuccess);
  EXPECT_EQ(rdma(WrOpcode::kRdmaWrite, target.addr(), rkey, 8), WcStatus::kSuccess);
  // Invalidating a key that names no bound window fails the WR and the QP.
  EXPECT_EQ(local_inv(target.mr.rkey).status, WcStatus::kLocQpOpErr);
}

TEST_F(MwFixture, send_with_invalidate__invalidates_the_window) {
  uint32_t rkey0 = 0;
  Mw* mw = alloc(2, rkey0);
  uint32_t rkey = next_key(rkey0);
  ASSERT_EQ(bind2(mw, rkey, target.mr.mr, target.addr(), 4096, kRemoteWrite).status,
            WcStatus::kSuccess);
  Buffer& rbuf = b.reg(256);
  ASSERT_EQ(post_recv(b, qb, 9, {{rbuf.addr(), 256, rbuf.mr.lkey}}), 0);
  Sge sg{src.addr(), 32, src.mr.lkey};
  SendWr wr = wr_of(WrOpcode::kSendWithInv, 0, &sg);
  wr.invalidate_rkey = rkey;
  ASSERT_EQ(post_send(a, qa, wr), 0);
  ASSERT_TRUE(f.run());
  auto rwc = b.poll();
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(rwc[0].wc_flags & kWcWithInv, uint32_t{kWcWithInv});
  EXPECT_EQ(rwc[0].imm_data, rkey);
  EXPECT_EQ(rwc[0].byte_len, 32u);
  ASSERT_EQ(a.poll().size(), 1u);
  EXPECT_EQ(rdma(WrOpcode::kRdmaWrite, target.addr(), rkey, 8), WcStatus::kRemAccessErr);
}

TEST_F(MwFixture, send_with_invalidate__of_an_mr_key_fails_the_receive) {
  Buffer& rbuf = b.reg(256);
  ASSERT_EQ(post_recv(b, qb, 9, {{rbuf.addr(), 256, rbuf.mr.lkey}}), 0);
  Sge sg{src.addr(), 32, src.mr.lkey};
  SendWr wr = wr_of(WrOpcode::kSendWithInv, 0, &sg);
  wr.invalidate_rkey = target.mr.rkey;
  ASSERT_EQ(post_send(a, qa, wr), 0);
  f.run(1'000'000'000);
  auto rwc = b.poll();
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].status, WcStatus::kRemInvReqErr);
  QpAttr qattr;
  QpInitAttr init;
  ASSERT_EQ(b.dev->query_qp(qb, qattr, init), 0);
  EXPECT_EQ(qattr.qp_state, QpState::kErr);
}

TEST_F(MwFixture, bind_mw__type1_bind_unbind_and_rekey) {
  uint32_t rkey0 = 0;
  Mw* mw = alloc(1, rkey0);
  ASSERT_NE(mw, nullptr);
  uint32_t k1 = next_key(rkey0);
  MwBindInfo bi{mw, k1, target.mr.mr, target.addr(), 4096, kRemoteWrite | kRemoteRead};
  ASSERT_EQ(b.dev->bind_mw(qb, 80, kSendSignaled, bi), 0);
  ASSERT_TRUE(f.run());
  auto wcs = b.poll();
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[0].opcode, WcOpcode::kBindMw);
  EXPECT_EQ(wcs[0].wr_id, 80u);
  // A type 1 window is not tied to a QP.
  Qp* qa2 = a.create_qp();
  Qp* qb2 = b.create_qp();
  Fabric::connect(a, qa2, b, qb2);
  EXPECT_EQ(rdma(WrOpcode::kRdmaWrite, target.addr() + 8, k1, 64, 0, qa2), WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(target.data() + 8, src.data(), 64), 0);
  // Rebinding changes the key: the old one stops working.
  uint32_t k2 = next_key(k1);
  bi.new_rkey = k2;
  ASSERT_EQ(b.dev->bind_mw(qb, 81, kSendSignaled, bi), 0);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(b.poll().size(), 1u);
  EXPECT_EQ(rdma(WrOpcode::kRdmaWrite, target.addr(), k2, 8), WcStatus::kSuccess);
  EXPECT_EQ(rdma(WrOpcode::kRdmaWrite, target.addr(), k1, 8), WcStatus::kRemAccessErr);
  // dereg_mr is refused while the window is bound (as rxe); unbinding releases it.
  reconnect();
  EXPECT_EQ(b.dev->dereg_mr(target.mr.mr), EINVAL);
  uint32_t k3 = next_key(k2);
  MwBindInfo unbind{mw, k3, nullptr, 0, 0, 0};
  ASSERT_EQ(b.dev->bind_mw(qb, 82, kSendSignaled, unbind), 0);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(b.poll().size(), 1u);
  EXPECT_EQ(rdma(WrOpcode::kRdmaWrite, target.addr(), k3, 8), WcStatus::kRemAccessErr);
  EXPECT_EQ(b.dev->dereg_mr(target.mr.mr), 0);
}

TEST_F(MwFixture, bind__errors_complete_with_mw_bind_err) {
  uint32_t rkey0 = 0;
  Mw* mw = alloc(2, rkey0);
  Buffer& no_bind = b.reg(4096, kAll);
  Buffer& read_only = b.reg(4096, kRemoteRead | kMwBind);
  struct Case {
    const char* what;
    MwBindInfo bi;
  } cases[] = {
      {"MR without MW_BIND", {mw, next_key(rkey0), no_bind.mr.mr, no_bind.addr(), 64, kRemoteRead}},
      {"range past the MR", {mw, next_key(rkey0), target.mr.mr, target.addr() + 8000, 1024, kRemoteRead}},
      {"index part of the rkey changed", {mw, rkey0 + 0x100, target.mr.mr, target.addr(), 64, kRemoteRead}},
      {"remote write on an MR without local write",
       {mw, next_key(rkey0), read_only.mr.mr, read_only.addr(), 64, kRemoteWrite}},
  };
  for (const Case& k : cases) {
    WorkCompletion wc = bind2(k.bi.mw, k.bi.new_rkey, k.bi.mr, k.bi.addr, k.bi.length, k.bi.access);
    EXPECT_EQ(wc.status, WcStatus::kMwBindErr) << k.what;
    QpAttr qattr;
    QpInitAttr init;
    ASSERT_EQ(b.dev->query_qp(qb, qattr, init), 0);
    EXPECT_EQ(qattr.qp_state, QpState::kErr) << k.what;
    reconnect();
  }
  // A type 1 window through IBV_WR_BIND_MW, a type 2 one through the Bind MW verb.
  uint32_t r1 = 0;
  Mw* mw1 = alloc(1, r1);
  EXPECT_EQ(bind2(mw1, next_key(r1), target.mr.mr, target.addr(), 64, kRemoteRead).status,
            WcStatus::kMwBindErr);
  reconnect();
  MwBindInfo t2{mw, next_key(rkey0), target.mr.mr, target.addr(), 64, kRemoteRead};
  EXPECT_EQ(b.dev->bind_mw(qb, 1, kSendSignaled, t2), EINVAL);
  MwBindInfo zb{mw1, next_key(r1), target.mr.mr, target.addr(), 64, kRemoteRead | kZeroBased};
  ASSERT_EQ(b.dev->bind_mw(qb, 2, kSendSignaled, zb), 0);  // type 1 cannot be zero based
  ASSERT_TRUE(f.run());
  auto wcs = b.poll();
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kMwBindErr);
}

TEST_F(MwFixture, bind__completes_after_the_wqes_before_it) {
  // b sends to a (which has no receive yet: RNR), then binds: the bind's CQE comes second.
  uint32_t rkey0 = 0;
  Mw* mw = alloc(2, rkey0);
  Buffer& sbuf = b.reg(64);
  Sge sg{sbuf.addr(), 64, sbuf.mr.lkey};
  SendWr send;
  send.wr_id = 1;
  send.opcode = WrOpcode::kSend;
  send.send_flags = kSendSignaled;
  send.sg_list = &sg;
  send.num_sge = 1;
  ASSERT_EQ(post_send(b, qb, send), 0);
  SendWr bind;
  bind.wr_id = 2;
  bind.opcode = WrOpcode::kBindMw;
  bind.send_flags = kSendSignaled;
  bind.bind = {mw, next_key(rkey0), target.mr.mr, target.addr(), 64, kRemoteRead};
  ASSERT_EQ(post_send(b, qb, bind), 0);
  EXPECT_TRUE(b.poll().empty());  // nothing completes before the SEND is acknowledged
  ASSERT_EQ(post_recv(a, qa, 5, {{src.addr(), 64, src.mr.lkey}}), 0);
  ASSERT_TRUE(f.run());
  auto wcs = b.poll();
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_EQ(wcs[1].wr_id, 2u);
  EXPECT_EQ(wcs[1].status, WcStatus::kSuccess);
}

TEST_F(MwFixture, alloc_mw__and_dealloc_mw_errors) {
  uint32_t rkey = 0;
  Errno err = 0;
  EXPECT_EQ(b.dev->alloc_mw(b.pd, 3, rkey, err), nullptr);
  EXPECT_EQ(err, EINVAL);
  EXPECT_EQ(b.dev->alloc_mw(nullptr, 1, rkey, err), nullptr);
  EXPECT_EQ(err, EINVAL);
  Pd* pd = b.dev->alloc_pd();
  Mw* mw = b.dev->alloc_mw(pd, 2, rkey, err);
  ASSERT_NE(mw, nullptr);
  EXPECT_EQ(b.dev->dealloc_pd(pd), EBUSY);
  EXPECT_EQ(b.dev->dealloc_mw(mw), 0);
  EXPECT_EQ(b.dev->dealloc_mw(mw), EINVAL);
  EXPECT_EQ(b.dev->dealloc_pd(pd), 0);
}

}  // namespace
}  // namespace vrnic::engine::testing

namespace vrnic::engine::testing {
namespace {

TEST_F(MwFixture, bind__window_or_region_gone_before_it_runs) {
  // A fenced bind waits behind an outstanding READ; the window is deallocated (round 0) or
  // the MR deregistered (round 1) before it runs: it fails cleanly with MW_BIND_ERR.
  for (int round = 0; round < 2; ++round) {
    uint32_t rkey0 = 0;
    Mw* mw = alloc(2, rkey0);
    Buffer& mrbuf = b.reg(4096, kAll | kMwBind);
    Buffer& rbuf = b.reg(64);
    Sge sg{rbuf.addr(), 64, rbuf.mr.lkey};
    SendWr read;
    read.wr_id = 1;
    read.opcode = WrOpcode::kRdmaRead;
    read.send_flags = kSendSignaled;
    read.sg_list = &sg;
    read.num_sge = 1;
    read.remote_addr = src.addr();
    read.rkey = src.mr.rkey;
    ASSERT_EQ(post_send(b, qb, read), 0);
    SendWr bind;
    bind.wr_id = 2;
    bind.opcode = WrOpcode::kBindMw;
    bind.send_flags = kSendSignaled | kSendFence;
    bind.bind = {mw, next_key(rkey0), mrbuf.mr.mr, mrbuf.addr(), 64, kRemoteRead};
    ASSERT_EQ(post_send(b, qb, bind), 0);
    if (round == 0) ASSERT_EQ(b.dev->dealloc_mw(mw), 0);
    else ASSERT_EQ(b.dev->dereg_mr(mrbuf.mr.mr), 0);
    ASSERT_TRUE(f.run());
    auto wcs = b.poll();
    ASSERT_EQ(wcs.size(), 2u) << round;
    EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
    EXPECT_EQ(std::memcmp(rbuf.data(), src.data(), 64), 0);
    EXPECT_EQ(wcs[1].wr_id, 2u);
    EXPECT_EQ(wcs[1].status, WcStatus::kMwBindErr);
    reconnect();
  }
}

}  // namespace
}  // namespace vrnic::engine::testing
