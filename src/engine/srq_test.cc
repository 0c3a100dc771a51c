// Shared receive queues over the loop fabric: many QPs taking receives from one SRQ, the
// SRQ limit event, a QP entering ERR with an SRQ, and the errors of every SRQ verb.
#include "engine/srq.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "engine/test_fabric.h"

namespace vrnic::engine::testing {
namespace {

constexpr uint32_t kMaxWr = 1, kLimit = 2;  // IBV_SRQ_MAX_WR, IBV_SRQ_LIMIT

struct SrqFixture : ::testing::Test {
  Fabric f;
  Node& a = f.add_node(1);
  Node& b = f.add_node(2);
  Srq* srq = nullptr;
  int srq_ctx = 0;  // address used as the SRQ's user_context

  void SetUp() override {
    Device::SrqAttr attr{64, 2, 0};
    Errno err = -1;
    srq = b.dev->create_srq(b.pd, attr, &srq_ctx, err);
    ASSERT_EQ(err, 0);
    ASSERT_NE(srq, nullptr);
    EXPECT_EQ(attr.max_wr, 64u);
    EXPECT_EQ(attr.max_sge, 2u);
  }
  Qp* srq_qp(void* ctx = nullptr) {
    QpInitAttr init;
    init.pd = b.pd;
    init.send_cq = init.recv_cq = b.cq;
    init.srq = srq;
    init.cap = {16, 16, 2, 2, 0};
    init.user_context = ctx;
    Errno err = -1;
    Qp* qp = b.dev->create_qp(init, err);
    EXPECT_EQ(err, 0);
    EXPECT_EQ(init.cap.max_recv_wr, 0u);  // the SRQ's size counts, not the QP's
    return qp;
  }
  Errno post_srq(uint64_t wr_id, Buffer& buf, uint64_t off, uint32_t len) {
    Sge sg{buf.addr() + off, len, buf.mr.lkey};
    RecvWr wr{wr_id, &sg, 1};
    size_t bad = SIZE_MAX;
    return b.dev->post_srq_recv(srq, &wr, 1, &bad);
  }
  void send(Qp* qp, Buffer& buf, uint64_t off, uint32_t len, uint64_t wr_id) {
    Sge sg{buf.addr() + off, len, buf.mr.lkey};
    SendWr wr;
    wr.wr_id = wr_id;
    wr.opcode = WrOpcode::kSend;
    wr.send_flags = kSendSignaled;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    ASSERT_EQ(post_send(a, qp, wr), 0);
  }
  size_t srq_events() const {
    size_t n = 0;
    for (const AsyncEvent& e : b.sink.async_events)
      if (e.type == AsyncEventType::kSrqLimitReached) {
        EXPECT_EQ(e.user_context, &srq_ctx);
        ++n;
      }
    return n;
  }
};

TEST_F(SrqFixture, post_srq_recv__many_qps_share_one_srq) {
  constexpr int kQps = 16, kMsgs = 3, kLen = 100;
  std::vector<Qp*> qa, qb;
  for (int i = 0; i < kQps; ++i) {
    qa.push_back(a.create_qp());
    qb.push_back(srq_qp());
    Fabric::connect(a, qa.back(), b, qb.back());
  }
  Buffer& src = a.reg(kQps * kMsgs * kLen);
  Buffer& dst = b.reg(kQps * kMsgs * kLen);
  fill_random(src.data(), src.bytes.size(), 7);
  for (int i = 0; i < kQps * kMsgs; ++i) ASSERT_EQ(post_srq(1000 + i, dst, i * kLen, kLen), 0);
  for (int m = 0; m < kMsgs; ++m)
    for (int q = 0; q < kQps; ++q) send(qa[q], src, (q * kMsgs + m) * kLen, kLen, q * kMsgs + m);
  ASSERT_TRUE(f.run());
  auto wcs = b.poll();
  ASSERT_EQ(wcs.size(), size_t(kQps * kMsgs));
  std::set<uint64_t> ids;
  std::map<uint32_t, int> per_qp;
  for (const WorkCompletion& wc : wcs) {
    EXPECT_EQ(wc.status, WcStatus::kSuccess);
    EXPECT_EQ(wc.opcode, WcOpcode::kRecv);
    EXPECT_EQ(wc.byte_len, uint32_t(kLen));
    ids.insert(wc.wr_id);
    ++per_qp[wc.qp_num];
  }
  EXPECT_EQ(ids.size(), size_t(kQps * kMsgs));  // every SRQ WQE used exactly once
  EXPECT_EQ(per_qp.size(), size_t(kQps));
  for (auto& [qpn, n] : per_qp) EXPECT_EQ(n, kMsgs) << qpn;
  // WQEs are taken in posting order, so message k (in arrival order) landed in slot k; check
  // every message's bytes by matching each receive slot against its sender's slot.
  std::set<std::vector<uint8_t>> sent, got;
  for (int i = 0; i < kQps * kMsgs; ++i) {
    sent.emplace(src.data() + i * kLen, src.data() + (i + 1) * kLen);
    got.emplace(dst.data() + i * kLen, dst.data() + (i + 1) * kLen);
  }
  EXPECT_EQ(sent, got);
  auto swcs = a.poll();
  EXPECT_EQ(swcs.size(), size_t(kQps * kMsgs));
  // The SRQ is empty now: one more message gets RNR NAKs, not a receive.
  send(qa[0], src, 0, kLen, 99);
  f.run(1'000'000);
  EXPECT_GT(a.ctr().rx_nak_rnr, 0u);
  EXPECT_TRUE(b.poll().empty());
}

TEST_F(SrqFixture, modify_srq__limit_event_raised_once_per_arming) {
  Qp* qa = a.create_qp();
  Qp* qb = srq_qp();
  Fabric::connect(a, qa, b, qb);
  Buffer& src = a.reg(4096);
  Buffer& dst = b.reg(4096);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(post_srq(i, dst, i * 64, 64), 0);
  Device::SrqAttr attr{0, 0, 5};
  ASSERT_EQ(b.dev->modify_srq(srq, attr, kLimit), 0);
  Device::SrqAttr q;
  ASSERT_EQ(b.dev->query_srq(srq, q), 0);
  EXPECT_EQ(q.srq_limit, 5u);
  EXPECT_EQ(q.max_wr, 64u);
  EXPECT_EQ(q.max_sge, 2u);
  // 10 -> 5 WQEs: not below the limit yet.
  for (int i = 0; i < 5; ++i) send(qa, src, 0, 64, i);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(b.poll().size(), 5u);
  EXPECT_EQ(srq_events(), 0u);
  // 5 -> 4: below the limit, one event, and the SRQ disarms.
  send(qa, src, 0, 64, 5);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(srq_events(), 1u);
  ASSERT_EQ(b.dev->query_srq(srq, q), 0);
  EXPECT_EQ(q.srq_limit, 0u);
  for (int i = 0; i < 4; ++i) send(qa, src, 0, 64, 6 + i);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(b.poll().size(), 5u);
  EXPECT_EQ(srq_events(), 1u);  // still once
  // Re-armed: the next drop below the limit raises it again.
  for (int i = 0; i < 3; ++i) ASSERT_EQ(post_srq(20 + i, dst, i * 64, 64), 0);
  attr.srq_limit = 3;
  ASSERT_EQ(b.dev->modify_srq(srq, attr, kLimit), 0);
  send(qa, src, 0, 64, 30);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(srq_events(), 2u);
  // Disarming with limit 0: nothing more.
  ASSERT_EQ(post_srq(40, dst, 0, 64), 0);
  attr.srq_limit = 2;
  ASSERT_EQ(b.dev->modify_srq(srq, attr, kLimit), 0);
  attr.srq_limit = 0;
  ASSERT_EQ(b.dev->modify_srq(srq, attr, kLimit), 0);
  send(qa, src, 0, 64, 31);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(srq_events(), 2u);
}

TEST_F(SrqFixture, enter_error__leaves_srq_wqes_and_raises_last_wqe_reached) {
  int ctx1 = 0, ctx2 = 0;
  Qp* qa1 = a.create_qp();
  Qp* qa2 = a.create_qp();
  Qp* qb1 = srq_qp(&ctx1);
  Qp* qb2 = srq_qp(&ctx2);
  Fabric::connect(a, qa1, b, qb1);
  Fabric::connect(a, qa2, b, qb2);
  Buffer& src = a.reg(4096);
  Buffer& dst = b.reg(4096);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(post_srq(i, dst, i * 64, 64), 0);
  QpAttr err_attr;
  err_attr.qp_state = QpState::kErr;
  ASSERT_EQ(b.dev->modify_qp(qb1, err_attr, kAttrState), 0);
  ASSERT_EQ(b.sink.async_events.size(), 1u);
  EXPECT_EQ(b.sink.async_events[0].type, AsyncEventType::kQpLastWqeReached);
  EXPECT_EQ(b.sink.async_events[0].user_context, &ctx1);
  EXPECT_TRUE(b.poll().empty());  // the SRQ's WQEs are not flushed by qb1
  // All four WQEs are still there for qb2.
  for (int i = 0; i < 4; ++i) send(qa2, src, 0, 64, i);
  ASSERT_TRUE(f.run());
  auto wcs = b.poll();
  ASSERT_EQ(wcs.size(), 4u);
  for (size_t i = 0; i < wcs.size(); ++i) {
    EXPECT_EQ(wcs[i].status, WcStatus::kSuccess);
    EXPECT_EQ(wcs[i].wr_id, i);
    EXPECT_EQ(wcs[i].qp_num, b.dev->qp_num(qb2));
  }
}

TEST_F(SrqFixture, enter_error__wqe_in_progress_is_flushed_by_its_qp_only) {
  // A multi-packet SEND took an SRQ WQE; the QP fails before the last packet: that WQE
  // (already the QP's) completes flushed, the other SRQ WQEs stay.
  Qp* qa = a.create_qp();
  Qp* qb = srq_qp();
  Fabric::connect(a, qa, b, qb);
  Buffer& src = a.reg(8192);
  Buffer& dst = b.reg(8192);
  ASSERT_EQ(post_srq(1, dst, 0, 4096), 0);
  ASSERT_EQ(post_srq(2, dst, 4096, 4096), 0);
  send(qa, src, 0, 3000, 1);  // three packets at MTU 1024
  f.wire().deliver_all();     // nothing is delivered before this call; first packets land
  QpAttr err_attr;
  err_attr.qp_state = QpState::kErr;
  ASSERT_EQ(b.dev->modify_qp(qb, err_attr, kAttrState), 0);
  auto wcs = b.poll();
  // Either the message completed before the ERR (WQE 1 consumed, success) or it was in
  // progress (WQE 1 flushed); WQE 2 is never touched.
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 1u);
  Qp* qa2 = a.create_qp();
  Qp* qb2 = srq_qp();
  Fabric::connect(a, qa2, b, qb2);
  send(qa2, src, 0, 64, 2);
  f.run();
  wcs = b.poll();
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 2u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
}

TEST_F(SrqFixture, create_srq__and_post_srq_recv_errors) {
  const DeviceLimits& l = b.dev->config().limits;
  Errno err = 0;
  Device::SrqAttr too_deep{l.max_srq_wr + 1, 1, 0};
  EXPECT_EQ(b.dev->create_srq(b.pd, too_deep, nullptr, err), nullptr);
  EXPECT_EQ(err, EINVAL);
  Device::SrqAttr too_wide{16, l.max_srq_sge + 1, 0};
  EXPECT_EQ(b.dev->create_srq(b.pd, too_wide, nullptr, err), nullptr);
  EXPECT_EQ(err, EINVAL);
  Device::SrqAttr ok{16, 1, 0};
  EXPECT_EQ(b.dev->create_srq(nullptr, ok, nullptr, err), nullptr);
  EXPECT_EQ(err, EINVAL);

  Buffer& dst = b.reg(4096);
  // Too many SGEs in a WR; a full SRQ.
  Sge sgs[3] = {{dst.addr(), 8, dst.mr.lkey}, {dst.addr(), 8, dst.mr.lkey}, {dst.addr(), 8, dst.mr.lkey}};
  RecvWr wide{1, sgs, 3};
  size_t bad = SIZE_MAX;
  EXPECT_EQ(b.dev->post_srq_recv(srq, &wide, 1, &bad), EINVAL);
  EXPECT_EQ(bad, 0u);
  std::vector<RecvWr> many(65, RecvWr{2, sgs, 1});
  EXPECT_EQ(b.dev->post_srq_recv(srq, many.data(), many.size(), &bad), ENOMEM);
  EXPECT_EQ(bad, 64u);

  // modify: unknown mask bits, limit beyond the size, resize below what it holds.
  Device::SrqAttr m{0, 0, 0};
  EXPECT_EQ(b.dev->modify_srq(srq, m, 4), EINVAL);
  EXPECT_EQ(b.dev->modify_srq(srq, m, 0), EINVAL);
  m.srq_limit = 65;
  EXPECT_EQ(b.dev->modify_srq(srq, m, kLimit), EINVAL);
  m.max_wr = 32;
  EXPECT_EQ(b.dev->modify_srq(srq, m, kMaxWr), EINVAL);  // holds 64 WQEs
  m.max_wr = l.max_srq_wr + 1;
  EXPECT_EQ(b.dev->modify_srq(srq, m, kMaxWr), EINVAL);
  m.max_wr = 128;
  EXPECT_EQ(b.dev->modify_srq(srq, m, kMaxWr), 0);  // grow
  Device::SrqAttr q;
  ASSERT_EQ(b.dev->query_srq(srq, q), 0);
  EXPECT_EQ(q.max_wr, 128u);
  EXPECT_EQ(b.dev->post_srq_recv(srq, many.data(), 1, &bad), 0);  // room again

  // A QP on the SRQ: no receives of its own; the SRQ and its PD stay while it exists.
  Qp* qp = srq_qp();
  RecvWr one{3, sgs, 1};
  EXPECT_EQ(b.dev->post_recv(qp, &one, 1, &bad), EINVAL);
  QpAttr qa;
  QpInitAttr qi;
  ASSERT_EQ(b.dev->query_qp(qp, qa, qi), 0);
  EXPECT_EQ(qi.srq, srq);
  EXPECT_EQ(b.dev->destroy_srq(srq), EBUSY);
  ASSERT_EQ(b.dev->destroy_qp(qp), 0);
  // A QP on an SRQ that is not this device's.
  QpInitAttr bogus;
  bogus.pd = b.pd;
  bogus.send_cq = bogus.recv_cq = b.cq;
  bogus.srq = reinterpret_cast<Srq*>(&srq_ctx);
  EXPECT_EQ(b.dev->create_qp(bogus, err), nullptr);
  EXPECT_EQ(err, EINVAL);
  EXPECT_EQ(b.dev->destroy_srq(srq), 0);
  EXPECT_EQ(b.dev->destroy_srq(srq), EINVAL);
  EXPECT_EQ(b.dev->query_srq(srq, q), EINVAL);
}

}  // namespace
}  // namespace vrnic::engine::testing
