// Control-path tests of the device: QP state machine and attribute masks, object lifetime
// rules, CQ notification and overflow, timer encodings.
#include "engine/device.h"

#include <gtest/gtest.h>

#include "engine/qp.h"
#include "engine/test_fabric.h"

namespace vrnic::engine::testing {
namespace {

constexpr uint32_t kInitMask = kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags;
constexpr uint32_t kRtrMask = kAttrState | kAttrAv | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn |
                              kAttrMaxDestRdAtomic | kAttrMinRnrTimer;
constexpr uint32_t kRtsMask = kAttrState | kAttrSqPsn | kAttrTimeout | kAttrRetryCnt |
                              kAttrRnrRetry | kAttrMaxQpRdAtomic;

struct Dev : ::testing::Test {
  Fabric f;
  Node& n = f.add_node(1);
  Qp* qp = n.create_qp();
  QpAttr attr;
  void SetUp() override {
    attr.port_num = 1;
    attr.path_mtu = 3;
    attr.ah.dgid = n.gid;
    attr.dest_qp_num = 0x99;
    attr.max_dest_rd_atomic = 4;
    attr.max_rd_atomic = 4;
    attr.timeout = 14;
    attr.retry_cnt = 7;
    attr.rnr_retry = 7;
  }
  Errno to(QpState s, uint32_t mask) {
    attr.qp_state = s;
    return n.dev->modify_qp(qp, attr, mask);
  }
  QpState state() {
    QpAttr a;
    QpInitAttr i;
    n.dev->query_qp(qp, a, i);
    return a.qp_state;
  }
};

TEST_F(Dev, modify_qp__full_path_to_rts) {
  EXPECT_EQ(to(QpState::kInit, kInitMask), 0);
  EXPECT_EQ(to(QpState::kRtr, kRtrMask), 0);
  EXPECT_EQ(to(QpState::kRts, kRtsMask), 0);
  QpAttr a;
  QpInitAttr init;
  ASSERT_EQ(n.dev->query_qp(qp, a, init), 0);
  EXPECT_EQ(a.qp_state, QpState::kRts);
  EXPECT_EQ(a.dest_qp_num, 0x99u);
  EXPECT_EQ(a.path_mtu, 3);
  EXPECT_EQ(a.timeout, 14);
  EXPECT_EQ(a.max_dest_rd_atomic, 4);
  EXPECT_EQ(init.pd, n.pd);
  EXPECT_EQ(init.send_cq, n.cq);
  EXPECT_GE(init.cap.max_inline_data, 64u);
}

TEST_F(Dev, modify_qp__missing_required_attribute_is_einval) {
  EXPECT_EQ(to(QpState::kInit, kInitMask & ~kAttrPort), EINVAL);
  EXPECT_EQ(state(), QpState::kReset);
  ASSERT_EQ(to(QpState::kInit, kInitMask), 0);
  for (uint32_t bit : {kAttrAv, kAttrPathMtu, kAttrDestQpn, kAttrRqPsn, kAttrMaxDestRdAtomic,
                       kAttrMinRnrTimer})
    EXPECT_EQ(to(QpState::kRtr, kRtrMask & ~bit), EINVAL) << bit;
  ASSERT_EQ(to(QpState::kRtr, kRtrMask), 0);
  for (uint32_t bit : {kAttrSqPsn, kAttrTimeout, kAttrRetryCnt, kAttrRnrRetry, kAttrMaxQpRdAtomic})
    EXPECT_EQ(to(QpState::kRts, kRtsMask & ~bit), EINVAL) << bit;
  EXPECT_EQ(state(), QpState::kRtr);
}

TEST_F(Dev, modify_qp__attribute_not_allowed_in_transition_is_einval) {
  EXPECT_EQ(to(QpState::kInit, kInitMask | kAttrSqPsn), EINVAL);
  ASSERT_EQ(to(QpState::kInit, kInitMask), 0);
  EXPECT_EQ(to(QpState::kRtr, kRtrMask | kAttrTimeout), EINVAL);
}

TEST_F(Dev, modify_qp__invalid_transitions_are_einval) {
  EXPECT_EQ(to(QpState::kRtr, kRtrMask), EINVAL);  // RESET -> RTR
  EXPECT_EQ(to(QpState::kRts, kRtsMask), EINVAL);  // RESET -> RTS
  ASSERT_EQ(to(QpState::kInit, kInitMask), 0);
  EXPECT_EQ(to(QpState::kRts, kRtsMask), EINVAL);  // INIT -> RTS
  ASSERT_EQ(to(QpState::kRtr, kRtrMask), 0);
  EXPECT_EQ(to(QpState::kInit, kInitMask), EINVAL);  // RTR -> INIT
  EXPECT_EQ(to(QpState::kRtr, 0), EINVAL);          // RTR -> RTR (no STATE: cur -> cur)
}

TEST_F(Dev, modify_qp__bad_values_are_einval) {
  ASSERT_EQ(to(QpState::kInit, kInitMask), 0);
  attr.path_mtu = 6;
  EXPECT_EQ(to(QpState::kRtr, kRtrMask), EINVAL);
  attr.path_mtu = 3;
  attr.max_dest_rd_atomic = 17;
  EXPECT_EQ(to(QpState::kRtr, kRtrMask), EINVAL);
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = 32;
  EXPECT_EQ(to(QpState::kRtr, kRtrMask), EINVAL);
  attr.min_rnr_timer = 0;
  attr.dest_qp_num = 1 << 24;
  EXPECT_EQ(to(QpState::kRtr, kRtrMask), EINVAL);
  attr.dest_qp_num = 5;
  ASSERT_EQ(to(QpState::kRtr, kRtrMask), 0);
  attr.retry_cnt = 8;
  EXPECT_EQ(to(QpState::kRts, kRtsMask), EINVAL);
}

TEST_F(Dev, modify_qp__cur_state_must_match) {
  ASSERT_EQ(to(QpState::kInit, kInitMask), 0);
  ASSERT_EQ(to(QpState::kRtr, kRtrMask), 0);
  attr.cur_qp_state = QpState::kInit;
  EXPECT_EQ(to(QpState::kRts, kRtsMask | kAttrCurState), EINVAL);
  attr.cur_qp_state = QpState::kRtr;
  EXPECT_EQ(to(QpState::kRts, kRtsMask | kAttrCurState), 0);
}

TEST_F(Dev, modify_qp__rts_to_rts_changes_optional_attributes) {
  ASSERT_EQ(to(QpState::kInit, kInitMask), 0);
  ASSERT_EQ(to(QpState::kRtr, kRtrMask), 0);
  ASSERT_EQ(to(QpState::kRts, kRtsMask), 0);
  attr.min_rnr_timer = 12;
  EXPECT_EQ(n.dev->modify_qp(qp, attr, kAttrMinRnrTimer), 0);
  EXPECT_EQ(n.dev->modify_qp(qp, attr, kAttrTimeout), EINVAL);
}

TEST_F(Dev, modify_qp__to_err_flushes_receives_and_reset_reinitialises) {
  ASSERT_EQ(to(QpState::kInit, kInitMask), 0);
  Buffer& buf = n.reg(64);
  ASSERT_EQ(post_recv(n, qp, 5, {{buf.addr(), 64, buf.mr.lkey}}), 0);
  ASSERT_EQ(post_recv(n, qp, 6, {{buf.addr(), 64, buf.mr.lkey}}), 0);
  ASSERT_EQ(to(QpState::kErr, kAttrState), 0);
  auto wcs = n.poll();
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].wr_id, 5u);
  EXPECT_EQ(wcs[0].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(wcs[0].opcode, WcOpcode::kRecv);
  // A receive posted in ERR is flushed at once.
  ASSERT_EQ(post_recv(n, qp, 7, {{buf.addr(), 64, buf.mr.lkey}}), 0);
  EXPECT_EQ(n.poll().at(0).wr_id, 7u);
  ASSERT_EQ(to(QpState::kReset, kAttrState), 0);
  EXPECT_EQ(post_recv(n, qp, 8, {{buf.addr(), 64, buf.mr.lkey}}), EINVAL);  // RESET
  EXPECT_EQ(to(QpState::kInit, kInitMask), 0);
}

TEST_F(Dev, create_qp__bad_attributes_refused) {
  QpInitAttr init;
  init.pd = n.pd;
  init.send_cq = init.recv_cq = n.cq;
  init.type = static_cast<QpType>(7);  // no such QP type (9 and 10 are the XRC halves)
  Errno err = 0;
  EXPECT_EQ(n.dev->create_qp(init, err), nullptr);
  EXPECT_EQ(err, EINVAL);
  init.type = QpType::kRc;
  init.cap.max_send_sge = 1000;
  EXPECT_EQ(n.dev->create_qp(init, err), nullptr);
  EXPECT_EQ(err, EINVAL);
  init.cap.max_send_sge = 1;
  init.send_cq = nullptr;
  EXPECT_EQ(n.dev->create_qp(init, err), nullptr);
  EXPECT_EQ(err, EINVAL);
}

TEST_F(Dev, dealloc_pd__busy_while_used) {
  EXPECT_EQ(n.dev->dealloc_pd(n.pd), EBUSY);  // the QP uses it
  Pd* pd = n.dev->alloc_pd();
  Buffer& b = n.reg(16, kLocalWrite, pd);
  EXPECT_EQ(n.dev->dealloc_pd(pd), EBUSY);
  EXPECT_EQ(n.dev->dereg_mr(b.mr.mr), 0);
  EXPECT_EQ(n.dev->dealloc_pd(pd), 0);
  EXPECT_EQ(n.dev->destroy_cq(n.cq), EBUSY);
  EXPECT_EQ(n.dev->destroy_qp(qp), 0);
  EXPECT_EQ(n.dev->destroy_cq(n.cq), 0);
}

TEST_F(Dev, reg_mr__remote_write_requires_local_write) {
  std::vector<uint8_t> mem(64);
  MrInfo mr;
  EXPECT_EQ(n.dev->reg_mr(n.pd, mem.data(), 64, 0, kRemoteWrite, mr), EINVAL);
  EXPECT_EQ(n.dev->reg_mr(n.pd, mem.data(), 64, 0, kRemoteAtomic, mr), EINVAL);
  EXPECT_EQ(n.dev->reg_mr(n.pd, mem.data(), 64, 0, kRemoteRead, mr), 0);
  EXPECT_EQ(mr.lkey, mr.rkey);
  EXPECT_EQ(n.dev->reg_mr(n.pd, mem.data(), 0, 0, kRemoteRead, mr), EINVAL);
}

// An empty region registers zero-based only (device memory, ibv_reg_dm_mr); it covers no byte.
TEST_F(Dev, reg_mr__empty_region_only_zero_based) {
  std::vector<uint8_t> mem(64);
  MrInfo mr;
  EXPECT_EQ(n.dev->reg_mr(n.pd, mem.data(), 0, 0, kLocalWrite, mr), EINVAL);
  ASSERT_EQ(n.dev->reg_mr(n.pd, mem.data(), 0, 0, kLocalWrite | kZeroBased, mr), 0);
  EXPECT_EQ(n.dev->dereg_mr(mr.mr), 0);
}

TEST_F(Dev, cq__overflow_is_counted_and_raises_cq_error) {
  uint32_t depth = 1;
  Cq* small = n.dev->create_cq(depth, reinterpret_cast<void*>(0x55));
  Qp* q = n.create_qp(8, small);
  QpAttr a = attr;
  a.qp_state = QpState::kInit;
  ASSERT_EQ(n.dev->modify_qp(q, a, kInitMask), 0);
  Buffer& buf = n.reg(64);
  ASSERT_EQ(post_recv(n, q, 1, {{buf.addr(), 64, buf.mr.lkey}}), 0);
  ASSERT_EQ(post_recv(n, q, 2, {{buf.addr(), 64, buf.mr.lkey}}), 0);
  a.qp_state = QpState::kErr;
  ASSERT_EQ(n.dev->modify_qp(q, a, kAttrState), 0);
  EXPECT_EQ(n.ctr().cq_overflows, 1u);
  ASSERT_EQ(n.sink.async_events.size(), 1u);
  EXPECT_EQ(n.sink.async_events[0].type, AsyncEventType::kCqErr);
  EXPECT_EQ(n.sink.async_events[0].user_context, reinterpret_cast<void*>(0x55));
}

TEST_F(Dev, req_notify_cq__fires_once_per_arm) {
  ASSERT_EQ(to(QpState::kInit, kInitMask), 0);
  Buffer& buf = n.reg(64);
  ASSERT_EQ(post_recv(n, qp, 1, {{buf.addr(), 64, buf.mr.lkey}}), 0);
  ASSERT_EQ(post_recv(n, qp, 2, {{buf.addr(), 64, buf.mr.lkey}}), 0);
  ASSERT_EQ(n.dev->req_notify_cq(n.cq, false), 0);
  ASSERT_EQ(to(QpState::kErr, kAttrState), 0);
  EXPECT_EQ(n.sink.cq_events.size(), 1u);  // two CQEs, one event
}

TEST(Timers, ack_timeout_ns__and_rnr_timer_ns_encodings) {
  EXPECT_EQ(ack_timeout_ns(0), 0u);  // infinite
  EXPECT_EQ(ack_timeout_ns(1), 8192u);
  EXPECT_EQ(ack_timeout_ns(14), 67108864u);  // 4.096 us * 2^14 = 67.1 ms
  EXPECT_EQ(rnr_timer_ns(0), 655360000u);    // 655.36 ms
  EXPECT_EQ(rnr_timer_ns(1), 10000u);        // 0.01 ms
  EXPECT_EQ(rnr_timer_ns(14), 1280000u);     // 1.28 ms
  EXPECT_EQ(rnr_timer_ns(31), 491520000u);   // 491.52 ms
}

TEST(Types, to_string__names) {
  EXPECT_STREQ(to_string(QpState::kRts), "RTS");
  EXPECT_STREQ(to_string(WcStatus::kRemAccessErr), "REM_ACCESS_ERR");
  EXPECT_STREQ(to_string(WcStatus::kWrFlushErr), "WR_FLUSH_ERR");
  Gid g;
  g.raw = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
  EXPECT_TRUE(g.is_ipv4_mapped());
  g.raw[10] = 0;
  EXPECT_FALSE(g.is_ipv4_mapped());
}

}  // namespace
}  // namespace vrnic::engine::testing
