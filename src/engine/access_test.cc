// Protection tests: every refused remote access leaves the target bytes unchanged, NAKs
// with the right code, completes with the right status and counts; posting rules.
#include <gtest/gtest.h>

#include "engine/test_fabric.h"

namespace vrnic::engine::testing {
namespace {

struct Access : ::testing::Test {
  Fabric f;
  Node& a = f.add_node(1);
  Node& b = f.add_node(2);
  Qp* qa = a.create_qp();
  Qp* qb = b.create_qp();
  Buffer& local = a.reg(8192);
  Buffer& target = b.reg(4096);
  std::vector<uint8_t> before;

  void SetUp() override {
    Fabric::connect(a, qa, b, qb);
    fill_random(target.data(), 4096, 1);
    fill_random(local.data(), 8192, 2);
    before = target.bytes;
  }
  SendWr rdma(WrOpcode op, uint64_t raddr, uint32_t rkey, uint32_t len, Sge& sg) {
    sg = {local.addr(), len, local.mr.lkey};
    SendWr wr;
    wr.wr_id = 1;
    wr.opcode = op;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    wr.send_flags = kSendSignaled;
    wr.remote_addr = raddr;
    wr.rkey = rkey;
    wr.compare_add = 1;
    wr.swap = 2;
    return wr;
  }
  // Posts the WR and a second one behind it; expects the first to fail with `status` and
  // the second to be flushed; the target is unchanged.
  void expect_refused(const SendWr& wr, WcStatus status = WcStatus::kRemAccessErr) {
    Sge sg2{local.addr(), 4, local.mr.lkey};
    SendWr next = wr;
    next.wr_id = 2;
    next.opcode = WrOpcode::kSend;
    next.sg_list = &sg2;
    ASSERT_EQ(post_send(a, qa, wr), 0);
    ASSERT_EQ(post_send(a, qa, next), 0);
    ASSERT_TRUE(f.run());
    EXPECT_EQ(target.bytes, before) << "target memory changed";
    auto wcs = a.poll();
    ASSERT_EQ(wcs.size(), 2u);
    EXPECT_EQ(wcs[0].wr_id, 1u);
    EXPECT_EQ(wcs[0].status, status) << to_string(wcs[0].status);
    EXPECT_EQ(wcs[1].wr_id, 2u);
    EXPECT_EQ(wcs[1].status, WcStatus::kWrFlushErr);
    QpAttr attr;
    QpInitAttr init;
    a.dev->query_qp(qa, attr, init);
    EXPECT_EQ(attr.qp_state, QpState::kErr);
  }
};

TEST_F(Access, write__invalid_rkey_is_remote_access_error) {
  Sge sg;
  expect_refused(rdma(WrOpcode::kRdmaWrite, target.addr(), target.mr.rkey + 1, 100, sg));
  EXPECT_EQ(static_cast<int>(WcStatus::kRemAccessErr), 10);  // IBV_WC_REM_ACCESS_ERR
  EXPECT_EQ(b.ctr().rx_access_errors, 1u);
  EXPECT_EQ(b.ctr().tx_nak_rem_access, 1u);
  EXPECT_EQ(a.ctr().rx_nak_rem_access, 1u);
  ASSERT_EQ(b.sink.async_events.size(), 1u);
  EXPECT_EQ(b.sink.async_events[0].type, AsyncEventType::kQpAccessErr);
}

TEST_F(Access, write__past_the_end_is_refused_before_any_byte) {
  Sge sg;
  // 5000 bytes = 5 packets, the first four of which would fit: none may land.
  expect_refused(rdma(WrOpcode::kRdmaWrite, target.addr() + 100, target.mr.rkey, 4000, sg));
}

TEST_F(Access, write__before_the_start_is_refused) {
  Sge sg;
  expect_refused(rdma(WrOpcode::kRdmaWrite, target.addr() - 1, target.mr.rkey, 10, sg));
}

TEST_F(Access, write__va_plus_len_overflow_is_refused) {
  Sge sg;
  expect_refused(rdma(WrOpcode::kRdmaWrite, ~uint64_t{0} - 3, target.mr.rkey, 100, sg));
}

TEST_F(Access, write__mr_without_remote_write_is_refused) {
  Buffer& ro = b.reg(4096, kLocalWrite | kRemoteRead);
  fill_random(ro.data(), 4096, 3);
  std::vector<uint8_t> ro_before = ro.bytes;
  Sge sg;
  expect_refused(rdma(WrOpcode::kRdmaWrite, ro.addr(), ro.mr.rkey, 100, sg));
  EXPECT_EQ(ro.bytes, ro_before);
}

TEST_F(Access, read__mr_without_remote_read_is_refused) {
  Buffer& wo = b.reg(4096, kLocalWrite | kRemoteWrite);
  std::vector<uint8_t> local_before = local.bytes;
  Sge sg;
  expect_refused(rdma(WrOpcode::kRdmaRead, wo.addr(), wo.mr.rkey, 100, sg));
  EXPECT_EQ(local.bytes, local_before);  // nothing placed locally either
}

TEST_F(Access, atomic__mr_without_remote_atomic_is_refused) {
  Buffer& noat = b.reg(64, kLocalWrite | kRemoteWrite | kRemoteRead);
  std::vector<uint8_t> noat_before = noat.bytes;
  Sge sg;
  expect_refused(rdma(WrOpcode::kAtomicFetchAdd, noat.addr(), noat.mr.rkey, 8, sg));
  EXPECT_EQ(noat.bytes, noat_before);
}

TEST_F(Access, atomic__out_of_bounds_is_refused) {
  Sge sg;
  expect_refused(rdma(WrOpcode::kAtomicCmpSwp, target.addr() + 4096, target.mr.rkey, 8, sg));
}

TEST_F(Access, atomic__misaligned_va_is_invalid_request) {
  Sge sg;
  expect_refused(rdma(WrOpcode::kAtomicFetchAdd, target.addr() + 4, target.mr.rkey, 8, sg),
                 WcStatus::kRemInvReqErr);
  EXPECT_EQ(b.ctr().tx_nak_inv_req, 1u);
}

TEST_F(Access, write__mr_of_another_pd_is_refused) {
  Pd* other = b.dev->alloc_pd();
  Buffer& foreign = b.reg(4096, kLocalWrite | kRemoteWrite, other);
  std::vector<uint8_t> foreign_before = foreign.bytes;
  Sge sg;
  expect_refused(rdma(WrOpcode::kRdmaWrite, foreign.addr(), foreign.mr.rkey, 10, sg));
  EXPECT_EQ(foreign.bytes, foreign_before);
}

TEST_F(Access, write__stale_key_of_deregistered_mr_never_matches) {
  uint32_t stale = target.mr.rkey;
  ASSERT_EQ(b.dev->dereg_mr(target.mr.mr), 0);
  Buffer& fresh = b.reg(4096);  // takes the freed slot under a new name, next generation
  EXPECT_NE(fresh.mr.rkey, stale);
  EXPECT_NE(fresh.mr.rkey >> 8, stale >> 8);
  std::vector<uint8_t> fresh_before = fresh.bytes;
  Sge sg;
  SendWr wr = rdma(WrOpcode::kRdmaWrite, fresh.addr(), stale, 10, sg);
  ASSERT_EQ(post_send(a, qa, wr), 0);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(fresh.bytes, fresh_before);
  EXPECT_EQ(a.poll().at(0).status, WcStatus::kRemAccessErr);
}

TEST_F(Access, write__qp_without_remote_write_access_is_refused) {
  Qp* qa2 = a.create_qp();
  Qp* qb2 = b.create_qp();
  Fabric::connect(a, qa2, b, qb2, {.access = kLocalWrite | kRemoteRead});
  Sge sg;
  SendWr wr = rdma(WrOpcode::kRdmaWrite, target.addr(), target.mr.rkey, 10, sg);
  ASSERT_EQ(post_send(a, qa2, wr), 0);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(target.bytes, before);
  EXPECT_EQ(a.poll().at(0).status, WcStatus::kRemAccessErr);
}

TEST_F(Access, send__message_longer_than_receive_is_invalid_request) {
  Buffer& rbuf = b.reg(100);
  ASSERT_EQ(post_recv(b, qb, 9, {{rbuf.addr(), 50, rbuf.mr.lkey}}), 0);
  Sge sg;
  SendWr wr = rdma(WrOpcode::kSend, 0, 0, 51, sg);
  ASSERT_EQ(post_send(a, qa, wr), 0);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(a.poll().at(0).status, WcStatus::kRemInvReqErr);
  auto rc = b.poll();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].wr_id, 9u);
  EXPECT_EQ(rc[0].status, WcStatus::kLocLenErr);
}

TEST_F(Access, post_send__bad_lkey_is_local_protection_error) {
  Sge sg;
  SendWr wr = rdma(WrOpcode::kRdmaWrite, target.addr(), target.mr.rkey, 10, sg);
  sg.lkey ^= 0x100;  // a key no MR has
  ASSERT_EQ(post_send(a, qa, wr), 0);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(a.poll().at(0).status, WcStatus::kLocProtErr);
  EXPECT_EQ(target.bytes, before);
  EXPECT_EQ(a.ctr().tx_write, 0u);
}

TEST_F(Access, post_send__not_in_rts_is_einval_and_sets_bad) {
  Qp* q = a.create_qp();
  Sge sg;
  SendWr wrs[2] = {rdma(WrOpcode::kSend, 0, 0, 4, sg), rdma(WrOpcode::kSend, 0, 0, 4, sg)};
  size_t bad = 99;
  EXPECT_EQ(a.dev->post_send(q, wrs, 2, &bad), EINVAL);  // RESET
  EXPECT_EQ(bad, 0u);
  QpAttr attr;
  attr.qp_state = QpState::kInit;
  ASSERT_EQ(a.dev->modify_qp(q, attr, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags), 0);
  bad = 99;
  EXPECT_EQ(a.dev->post_send(q, wrs, 2, &bad), EINVAL);  // INIT
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(f.wire().in_flight(), 0u);
}

TEST_F(Access, post_send__queue_full_is_enomem_at_the_overflowing_wr) {
  QpInitAttr init;
  init.pd = a.pd;
  init.send_cq = init.recv_cq = a.cq;
  init.cap = {2, 2, 1, 1, 0};
  Errno err;
  Qp* small = a.dev->create_qp(init, err);
  ASSERT_NE(small, nullptr);
  Qp* peer = b.create_qp();
  Fabric::connect(a, small, b, peer);
  Sge sg;
  SendWr wr = rdma(WrOpcode::kRdmaWrite, target.addr(), target.mr.rkey, 4, sg);
  SendWr wrs[3] = {wr, wr, wr};
  size_t bad = 99;
  EXPECT_EQ(a.dev->post_send(small, wrs, 3, &bad), ENOMEM);
  EXPECT_EQ(bad, 2u);
}

}  // namespace
}  // namespace vrnic::engine::testing
