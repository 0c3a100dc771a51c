// ibv_rereg_mr in the engine: translation, access and PD changes keep the keys and take
// effect for the next access; every refusal leaves the region as it was.
#include <gtest/gtest.h>

#include "engine/memory_table.h"
#include "engine/test_fabric.h"

namespace vrnic::engine::testing {
namespace {

constexpr uint32_t kAll = kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic;
constexpr uint32_t kTranslation = 1, kChangePd = 2, kChangeAccess = 4;

struct Rereg : ::testing::Test {
  Fabric f;
  Node& a = f.add_node(1);
  Node& b = f.add_node(2);
  Qp* qa = a.create_qp();
  Qp* qb = b.create_qp();
  Buffer& src = a.reg(4096);
  std::vector<uint8_t> one = std::vector<uint8_t>(4096, 0), two = std::vector<uint8_t>(4096, 0);
  MrInfo mr;

  void SetUp() override {
    Fabric::connect(a, qa, b, qb);
    fill_random(src.data(), 4096, 21);
    ASSERT_EQ(b.dev->reg_mr(b.pd, one.data(), one.size(), addr(one), kAll, mr), 0);
  }
  static uint64_t addr(std::vector<uint8_t>& v) { return reinterpret_cast<uint64_t>(v.data()); }
  WcStatus write(uint64_t remote, uint32_t len) {
    Sge sg{src.addr(), len, src.mr.lkey};
    SendWr wr;
    wr.opcode = WrOpcode::kRdmaWrite;
    wr.send_flags = kSendSignaled;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    wr.remote_addr = remote;
    wr.rkey = mr.rkey;
    EXPECT_EQ(post_send(a, qa, wr), 0);
    EXPECT_TRUE(f.run());
    auto wcs = a.poll();
    EXPECT_EQ(wcs.size(), 1u);
    return wcs.empty() ? WcStatus::kGeneralErr : wcs[0].status;
  }
  void reconnect() {
    qa = a.create_qp();
    qb = b.create_qp();
    Fabric::connect(a, qa, b, qb);
  }
};

TEST_F(Rereg, rereg_mr__translation_moves_the_region_and_keeps_the_keys) {
  MrInfo out;
  ASSERT_EQ(b.dev->rereg_mr(mr.mr, kTranslation, nullptr, two.data(), 2048, addr(two), 0, out), 0);
  EXPECT_EQ(out.lkey, mr.lkey);
  EXPECT_EQ(out.rkey, mr.rkey);
  EXPECT_EQ(write(addr(two), 512), WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(two.data(), src.data(), 512), 0);
  EXPECT_EQ(one[0], 0);
  // The new length counts: 2048 bytes, not the old 4096; the old range is gone.
  EXPECT_EQ(write(addr(two) + 2000, 100), WcStatus::kRemAccessErr);
  reconnect();
  EXPECT_EQ(write(addr(one), 8), WcStatus::kRemAccessErr);
}

TEST_F(Rereg, rereg_mr__access_change_applies_to_the_next_request) {
  MrInfo out;
  ASSERT_EQ(b.dev->rereg_mr(mr.mr, kChangeAccess, nullptr, nullptr, 0, 0,
                            kLocalWrite | kRemoteRead, out), 0);
  EXPECT_EQ(write(addr(one), 8), WcStatus::kRemAccessErr);
  EXPECT_EQ(one[0], 0);
  reconnect();
  ASSERT_EQ(b.dev->rereg_mr(mr.mr, kChangeAccess, nullptr, nullptr, 0, 0, kAll, out), 0);
  EXPECT_EQ(write(addr(one), 8), WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(one.data(), src.data(), 8), 0);
}

TEST_F(Rereg, rereg_mr__pd_change_moves_the_region_out_of_the_qps_pd) {
  Pd* other = b.dev->alloc_pd();
  MrInfo out;
  ASSERT_EQ(b.dev->rereg_mr(mr.mr, kChangePd, other, nullptr, 0, 0, 0, out), 0);
  EXPECT_EQ(write(addr(one), 8), WcStatus::kRemAccessErr);
  EXPECT_EQ(b.dev->dealloc_pd(other), EBUSY);  // the MR counts as the new PD's user now
  ASSERT_EQ(b.dev->rereg_mr(mr.mr, kChangePd, b.pd, nullptr, 0, 0, 0, out), 0);
  EXPECT_EQ(b.dev->dealloc_pd(other), 0);
  reconnect();
  EXPECT_EQ(write(addr(one), 8), WcStatus::kSuccess);
}

// A SEND into a receive WQE whose SGE no longer names a usable region of the QP's PD: the
// responder completes the receive with a local protection error and NAKs the request with
// Remote Operational Error (IBA 9.7.5.2.4, class B responder error 9.9.3.1.2), so the
// requester sees IBV_WC_REM_OP_ERR, not a flush; both QPs end in ERR.
struct ReregRecv : Rereg {
  WcStatus send_into_recv(uint64_t recv_addr, uint32_t len, WorkCompletion& recv_wc) {
    EXPECT_EQ(post_recv(b, qb, 7, {Sge{recv_addr, len, mr.lkey}}), 0);
    Sge sg{src.addr(), len, src.mr.lkey};
    EXPECT_EQ(post_send(a, qa, wr_of(WrOpcode::kSend, 9, &sg)), 0);
    EXPECT_TRUE(f.run());
    auto rx = b.poll();
    EXPECT_EQ(rx.size(), 1u);
    if (!rx.empty()) recv_wc = rx[0];
    auto tx = a.poll();
    EXPECT_EQ(tx.size(), 1u);
    return tx.empty() ? WcStatus::kGeneralErr : tx[0].status;
  }
};

TEST_F(ReregRecv, rereg_mr__pd_change_makes_a_posted_receive_fail_with_rem_op_err) {
  Pd* other = b.dev->alloc_pd();
  MrInfo out;
  WorkCompletion rwc;
  ASSERT_EQ(b.dev->rereg_mr(mr.mr, kChangePd, other, nullptr, 0, 0, 0, out), 0);
  EXPECT_EQ(send_into_recv(addr(one), 64, rwc), WcStatus::kRemOpErr);
  EXPECT_EQ(rwc.wr_id, 7u);
  EXPECT_EQ(rwc.status, WcStatus::kLocProtErr);
  EXPECT_EQ(one[0], 0);
  EXPECT_EQ(b.ctr().tx_nak_rem_op, 1u);
  EXPECT_EQ(a.ctr().rx_nak_rem_op, 1u);
}

TEST_F(ReregRecv, rereg_mr__translation_change_makes_a_posted_receive_fail_with_rem_op_err) {
  MrInfo out;
  // The receive is posted first, then the region moves away from the buffer it names.
  ASSERT_EQ(post_recv(b, qb, 7, {Sge{addr(one), 64, mr.lkey}}), 0);
  ASSERT_EQ(b.dev->rereg_mr(mr.mr, kTranslation, nullptr, two.data(), 4096, addr(two), 0, out),
            0);
  Sge sg{src.addr(), 64, src.mr.lkey};
  ASSERT_EQ(post_send(a, qa, wr_of(WrOpcode::kSend, 9, &sg)), 0);
  ASSERT_TRUE(f.run());
  auto rx = b.poll();
  ASSERT_EQ(rx.size(), 1u);
  EXPECT_EQ(rx[0].status, WcStatus::kLocProtErr);
  auto tx = a.poll();
  ASSERT_EQ(tx.size(), 1u);
  EXPECT_EQ(tx[0].status, WcStatus::kRemOpErr);
  EXPECT_EQ(one[0], 0);
  EXPECT_EQ(two[0], 0);
}

TEST_F(ReregRecv, rereg_mr__shrunk_region_fails_a_send_in_its_third_packet) {
  MrInfo out;
  WorkCompletion rwc;
  // 2048 bytes stay registered; the 4096-byte SEND (1024-byte MTU) fails at its third packet,
  // after two packets were placed.
  ASSERT_EQ(b.dev->rereg_mr(mr.mr, kTranslation, nullptr, one.data(), 2048, addr(one), 0, out),
            0);
  EXPECT_EQ(send_into_recv(addr(one), 4096, rwc), WcStatus::kRemOpErr);
  EXPECT_EQ(rwc.status, WcStatus::kLocProtErr);
  EXPECT_EQ(std::memcmp(one.data(), src.data(), 2048), 0);
  EXPECT_EQ(one[2048], 0);
}

TEST_F(ReregRecv, rereg_mr__pd_change_fails_a_receive_taken_from_an_srq) {
  Device::SrqAttr sa{16, 1, 0};
  Errno err = -1;
  Srq* srq = b.dev->create_srq(b.pd, sa, nullptr, err);
  ASSERT_NE(srq, nullptr);
  QpInitAttr init;
  init.pd = b.pd;
  init.send_cq = init.recv_cq = b.cq;
  init.srq = srq;
  init.cap = {16, 16, 1, 1, 0};
  Qp* qs = b.dev->create_qp(init, err);
  ASSERT_NE(qs, nullptr);
  Qp* qa2 = a.create_qp();
  Fabric::connect(a, qa2, b, qs);
  Sge rs{addr(one), 64, mr.lkey};
  RecvWr rw{5, &rs, 1};
  size_t bad = SIZE_MAX;
  ASSERT_EQ(b.dev->post_srq_recv(srq, &rw, 1, &bad), 0);
  Pd* other = b.dev->alloc_pd();
  MrInfo out;
  ASSERT_EQ(b.dev->rereg_mr(mr.mr, kChangePd, other, nullptr, 0, 0, 0, out), 0);
  Sge sg{src.addr(), 64, src.mr.lkey};
  ASSERT_EQ(post_send(a, qa2, wr_of(WrOpcode::kSend, 9, &sg)), 0);
  ASSERT_TRUE(f.run());
  auto rx = b.poll();
  ASSERT_EQ(rx.size(), 1u);
  EXPECT_EQ(rx[0].wr_id, 5u);
  EXPECT_EQ(rx[0].status, WcStatus::kLocProtErr);
  auto tx = a.poll();
  ASSERT_EQ(tx.size(), 1u);
  EXPECT_EQ(tx[0].status, WcStatus::kRemOpErr);
  EXPECT_EQ(one[0], 0);
}

TEST_F(Rereg, rereg_mr__errors_leave_the_region_unchanged) {
  MrInfo out;
  EXPECT_EQ(b.dev->rereg_mr(mr.mr, 0, nullptr, nullptr, 0, 0, 0, out), EINVAL);
  EXPECT_EQ(b.dev->rereg_mr(mr.mr, 8, nullptr, nullptr, 0, 0, 0, out), EINVAL);
  EXPECT_EQ(b.dev->rereg_mr(mr.mr, kChangePd, nullptr, nullptr, 0, 0, 0, out), EINVAL);
  EXPECT_EQ(b.dev->rereg_mr(mr.mr, kTranslation, nullptr, nullptr, 4096, 0, 0, out), EINVAL);
  EXPECT_EQ(b.dev->rereg_mr(mr.mr, kTranslation, nullptr, two.data(), 0, addr(two), 0, out),
            EINVAL);
  // Remote write without local write (11.2.8.1), in a combined change: nothing applied.
  EXPECT_EQ(b.dev->rereg_mr(mr.mr, kTranslation | kChangeAccess, nullptr, two.data(), 4096,
                            addr(two), kRemoteWrite, out),
            EINVAL);
  // Turning ODP on or off without a new translation.
  EXPECT_EQ(b.dev->rereg_mr(mr.mr, kChangeAccess, nullptr, nullptr, 0, 0, kAll | kOnDemand, out),
            EINVAL);
  EXPECT_EQ(write(addr(one), 16), WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(one.data(), src.data(), 16), 0);
  EXPECT_EQ(two[0], 0);
  // A deregistered region.
  Buffer& gone = b.reg(64);
  Mr* stale = gone.mr.mr;
  ASSERT_EQ(b.dev->dereg_mr(stale), 0);
  EXPECT_EQ(b.dev->rereg_mr(stale, kChangeAccess, nullptr, nullptr, 0, 0, kAll, out), EINVAL);
}

TEST_F(Rereg, rereg_mr__busy_while_a_window_is_bound) {
  Buffer& target = b.reg(4096, kAll | kMwBind);
  uint32_t rkey = 0;
  Errno err = 0;
  Mw* mw = b.dev->alloc_mw(b.pd, 1, rkey, err);
  ASSERT_NE(mw, nullptr);
  MwBindInfo bi{mw, (rkey & ~0xffu) | ((rkey + 1) & 0xff), target.mr.mr, target.addr(), 64,
                kRemoteRead};
  ASSERT_EQ(b.dev->bind_mw(qb, 1, kSendSignaled, bi), 0);
  ASSERT_TRUE(f.run());
  ASSERT_EQ(b.poll().size(), 1u);
  MrInfo out;
  EXPECT_EQ(b.dev->rereg_mr(target.mr.mr, kChangeAccess, nullptr, nullptr, 0, 0, kAll, out),
            EBUSY);
  ASSERT_EQ(b.dev->dealloc_mw(mw), 0);
  EXPECT_EQ(b.dev->rereg_mr(target.mr.mr, kChangeAccess, nullptr, nullptr, 0, 0, kAll, out), 0);
}

}  // namespace
}  // namespace vrnic::engine::testing
