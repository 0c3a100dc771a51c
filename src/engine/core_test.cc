// Core on its own: gather / scatter, completions and CQ events, queue flush, in-flight count.
#include "engine/test_host_memory.h"
#include "engine/core.h"

#include <gtest/gtest.h>

#include <cstring>

#include <numeric>
#include <vector>

#include "engine/qp_transition.h"

namespace vrnic::engine {
namespace {

struct NullPort : PacketPort {
  void send(std::span<const WirePacket>) override {}
  uint16_t source_port_for(uint32_t) override { return 0xc000; }
};
struct FixedClock : Clock {
  uint64_t t = 5000;
  uint64_t now_ns() const override { return t; }
};
struct Events : EventSink {
  std::vector<Cq*> cq_events;
  std::vector<AsyncEventType> async;
  void on_cq_event(Cq* cq, void*) override { cq_events.push_back(cq); }
  void on_async_event(const AsyncEvent& e) override { async.push_back(e.type); }
};

struct CoreTest : ::testing::Test {
  NullPort port;
  FixedClock clock;
  testing::FakeHostMemory host;
  Events events;
  Core core{DeviceConfig{}, port, clock, host, events};
  Pd pd;
  std::vector<uint8_t> one = std::vector<uint8_t>(16), two = std::vector<uint8_t>(32);
  Mr* mr_one = nullptr;
  Mr* mr_two = nullptr;
  void SetUp() override {
    std::iota(one.begin(), one.end(), 0);
    std::iota(two.begin(), two.end(), 100);
    mr_one = add(one, kLocalWrite);
    mr_two = add(two, 0);  // read-only locally
  }
  Mr* add(std::vector<uint8_t>& v, uint32_t access) {
    return core.mem.add(&pd, v.data(), v.size(), reinterpret_cast<uint64_t>(v.data()), access,
                        16);
  }
  Sge sge(std::vector<uint8_t>& v, Mr* mr, uint32_t off, uint32_t len) {
    return {reinterpret_cast<uint64_t>(v.data()) + off, len, mr->key};
  }
};

TEST_F(CoreTest, gather__from_an_offset_across_two_sges) {
  SgeList sges;
  sges.push_back(sge(one, mr_one, 8, 8));  // bytes 8..15
  sges.push_back(sge(two, mr_two, 0, 8));  // bytes 100..107
  uint8_t out[10];
  ASSERT_TRUE(core.gather(&pd, sges, 4, out, sizeof out));
  const uint8_t want[] = {12, 13, 14, 15, 100, 101, 102, 103, 104, 105};
  EXPECT_EQ(std::memcmp(out, want, sizeof want), 0);
}

TEST_F(CoreTest, gather__past_the_list_or_with_a_bad_key_fails) {
  SgeList sges;
  sges.push_back(sge(one, mr_one, 0, 8));
  uint8_t out[16];
  EXPECT_FALSE(core.gather(&pd, sges, 0, out, 9));  // one byte more than the list holds
  sges[0].lkey ^= 0x100;
  EXPECT_FALSE(core.gather(&pd, sges, 0, out, 4));
  Pd other;
  sges[0].lkey ^= 0x100;
  EXPECT_FALSE(core.gather(&other, sges, 0, out, 4));  // the region belongs to another PD
  EXPECT_TRUE(core.gather(&pd, sges, 0, out, 4));
}

TEST_F(CoreTest, scatter__needs_local_write_access) {
  const uint8_t in[4] = {0xa, 0xb, 0xc, 0xd};
  SgeList ro;
  ro.push_back(sge(two, mr_two, 0, 4));
  EXPECT_FALSE(core.scatter(&pd, ro, 0, in, 4));
  EXPECT_EQ(two[0], 100);  // untouched
  SgeList rw;
  rw.push_back(sge(one, mr_one, 0, 2));
  rw.push_back(sge(one, mr_one, 10, 2));
  ASSERT_TRUE(core.scatter(&pd, rw, 0, in, 4));
  EXPECT_EQ(one[0], 0xa);
  EXPECT_EQ(one[1], 0xb);
  EXPECT_EQ(one[2], 2);
  EXPECT_EQ(one[10], 0xc);
  EXPECT_EQ(one[11], 0xd);
}

TEST_F(CoreTest, complete__timestamps_counts_and_fires_an_armed_cq_once) {
  Cq cq(4, nullptr);
  cq.arm(false);
  WorkCompletion wc;
  wc.wr_id = 9;
  core.complete(&cq, wc);
  core.complete(&cq, wc);
  EXPECT_EQ(events.cq_events.size(), 1u);  // one event per arm
  EXPECT_EQ(core.ctr.cqe_ok, 2u);
  WorkCompletion out[4];
  ASSERT_EQ(cq.poll(out, 4), 2);
  EXPECT_EQ(out[0].completion_ts_ns, 5000u);
}

TEST_F(CoreTest, complete__error_fires_a_solicited_only_arm_and_overflow_is_counted) {
  Cq cq(1, nullptr);
  cq.arm(true);
  WorkCompletion ok;
  core.complete(&cq, ok);
  EXPECT_TRUE(events.cq_events.empty());  // neither solicited nor an error
  WorkCompletion err;
  err.status = WcStatus::kLocProtErr;
  core.complete(&cq, err);  // the ring of one is full: lost, counted, CQ error event
  EXPECT_EQ(core.ctr.cq_overflows, 1u);
  EXPECT_EQ(core.ctr.cqe_error, 0u);
  ASSERT_EQ(events.async.size(), 1u);
  EXPECT_EQ(events.async[0], AsyncEventType::kCqErr);
  EXPECT_TRUE(events.cq_events.empty());
  WorkCompletion out[2];
  while (cq.poll(out, 2) > 0) {
  }
  core.complete(&cq, err);
  EXPECT_EQ(core.ctr.cqe_error, 1u);
  EXPECT_EQ(events.cq_events.size(), 1u);
}

TEST_F(CoreTest, complete__moderated_cq_event_waits_for_its_period) {
  Cq cq(8, nullptr);
  cq.set_moderation(4, 3000);
  cq.arm(false);
  core.complete(&cq, WorkCompletion{});
  EXPECT_TRUE(events.cq_events.empty());
  EXPECT_EQ(core.timer_hint, 8000u);  // the first CQE (t 5000) + the period
  ASSERT_EQ(core.moderated_cqs.size(), 1u);
  clock.t = 7999;
  EXPECT_EQ(core.fire_due_cq_events(), 8000u);
  EXPECT_TRUE(events.cq_events.empty());
  clock.t = 8000;
  EXPECT_EQ(core.fire_due_cq_events(), UINT64_MAX);
  ASSERT_EQ(events.cq_events.size(), 1u);
  EXPECT_TRUE(core.moderated_cqs.empty());
  cq.arm(false);
  core.complete(&cq, WorkCompletion{});
  ASSERT_EQ(core.moderated_cqs.size(), 1u);
  core.forget_cq(&cq);  // destroy_cq
  EXPECT_TRUE(core.moderated_cqs.empty());
}

TEST_F(CoreTest, flush_queues__every_wqe_completes_with_flush_error) {
  Cq cq(8, nullptr);
  Qp qp;
  qp.qpn = 0x42;
  qp.send_cq = qp.recv_cq = &cq;
  SendWqe s;
  s.wr_id = 1;  // unsignaled: flushed WQEs complete all the same
  qp.sq.push_back(s);
  RecvWqe r;
  r.wr_id = 2;
  qp.rq.push_back(r);
  qp.resp.have_recv = true;
  qp.resp.recv.wr_id = 3;
  core.flush_queues(qp);
  WorkCompletion out[4];
  ASSERT_EQ(cq.poll(out, 4), 3);
  EXPECT_EQ(out[0].wr_id, 1u);
  EXPECT_EQ(out[1].wr_id, 3u);  // the receive in use first, then the queue
  EXPECT_EQ(out[1].opcode, WcOpcode::kRecv);
  EXPECT_EQ(out[2].wr_id, 2u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(out[i].status, WcStatus::kWrFlushErr);
  EXPECT_TRUE(qp.sq.empty() && qp.rq.empty());
  EXPECT_FALSE(qp.resp.have_recv);
}

TEST_F(CoreTest, recount_inflight__counts_sending_rc_qps_only) {
  Cq cq(8, nullptr);
  Qp rc, uc;
  uc.type = QpType::kUc;
  for (Qp* qp : {&rc, &uc}) {
    qp->send_cq = qp->recv_cq = &cq;
    for (QpState s : {QpState::kInit, QpState::kRtr, QpState::kRts})
      ASSERT_EQ(qp_transition(core, *qp, s, QpCause::kModify), 0);
  }
  rc.req.una = 0xfffffe;  // across the PSN wrap
  rc.req.next_psn = 3;
  core.recount_inflight(rc);
  EXPECT_EQ(core.inflight, 5u);
  uc.req.next_psn = 10;
  core.recount_inflight(uc);
  EXPECT_EQ(core.inflight, 5u);
  // A QP that no longer sends gives its share back (the move to ERR recounts).
  ASSERT_EQ(qp_transition(core, rc, QpState::kErr, QpCause::kError), 0);
  EXPECT_EQ(core.inflight, 0u);
}

}  // namespace
}  // namespace vrnic::engine
