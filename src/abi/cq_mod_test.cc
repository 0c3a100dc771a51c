// ibv_modify_cq (CQ moderation): an armed CQ's completion event waits for a count of CQEs or
// a period after the first of them; the limits ibv_query_device_ex advertises; its errors.
#include <fcntl.h>
#include <poll.h>
#include <time.h>

#include "abi/verbs_test.h"

namespace vrnic::abi::test {
namespace {

uint64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

class CqModeration : public Loopback {
 protected:
  void SetUp() override {
    Loopback::SetUp();
    if (HasFatalFailure()) return;
    const int flags = fcntl(channel_->fd, F_GETFL);
    ASSERT_EQ(fcntl(channel_->fd, F_SETFL, flags | O_NONBLOCK), 0);
  }
  int modify(uint32_t mask, uint16_t count, uint16_t period_us) {
    ibv_modify_cq_attr attr{};
    attr.attr_mask = mask;
    attr.moderate.cq_count = count;
    attr.moderate.cq_period = period_us;
    return ibv_modify_cq(cq_, &attr);
  }
  // One signaled RDMA WRITE from a to b, and its CQE polled.
  void write_and_poll(uint64_t wr_id) {
    ibv_sge s = sge(a_buf_, a_mr_, 0, 64);
    ibv_send_wr w = rdma_to_b(IBV_WR_RDMA_WRITE, wr_id, &s, b_mr_->rkey);
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_send(a_, &w, &bad), 0);
    auto got = wait(1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(got[0].wr_id, wr_id);
  }
  // Takes an event without blocking: true if one was there.
  bool try_event() {
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    if (ibv_get_cq_event(channel_, &ev_cq, &ev_ctx) != 0) {
      EXPECT_EQ(errno, EAGAIN);
      return false;
    }
    EXPECT_EQ(ev_cq, cq_);
    ibv_ack_cq_events(ev_cq, 1);
    return true;
  }
  // Waits up to 5 s for an event.
  bool wait_event() {
    pollfd p{channel_->fd, POLLIN, 0};
    if (poll(&p, 1, 5000) != 1) return false;
    return try_event();
  }
};

TEST_F(CqModeration, query_device_ex__advertises_the_moderation_limits) {
  ibv_device_attr_ex attr{};
  ASSERT_EQ(ibv_query_device_ex(ctx_, nullptr, &attr), 0);
  EXPECT_EQ(attr.cq_mod_caps.max_cq_count, 65535);
  EXPECT_EQ(attr.cq_mod_caps.max_cq_period, 4095);
  // The limits themselves are accepted.
  EXPECT_EQ(modify(IBV_CQ_ATTR_MODERATE, attr.cq_mod_caps.max_cq_count,
                   attr.cq_mod_caps.max_cq_period), 0);
}

TEST_F(CqModeration, modify_cq__bad_mask_or_period_is_einval) {
  EXPECT_EQ(modify(0, 4, 10), EINVAL);                     // nothing to modify
  EXPECT_EQ(modify(IBV_CQ_ATTR_RESERVED, 4, 10), EINVAL);  // an unknown bit
  EXPECT_EQ(modify(IBV_CQ_ATTR_MODERATE | 4, 4, 10), EINVAL);
  EXPECT_EQ(modify(IBV_CQ_ATTR_MODERATE, 4, 4096), EINVAL);  // over 12 bits of µs
  EXPECT_EQ(modify(IBV_CQ_ATTR_MODERATE, 0, 0), 0);
  // A refused call changed nothing: events still come one per CQE.
  ASSERT_EQ(ibv_req_notify_cq(cq_, 0), 0);
  write_and_poll(1);
  EXPECT_TRUE(try_event());
}

TEST_F(CqModeration, count__three_cqes_give_no_event_the_fourth_does) {
  ASSERT_EQ(modify(IBV_CQ_ATTR_MODERATE, 4, 0), 0);
  ASSERT_EQ(ibv_req_notify_cq(cq_, 0), 0);
  for (uint64_t i = 1; i <= 3; ++i) {
    write_and_poll(i);
    EXPECT_FALSE(try_event()) << "event after CQE " << i;
  }
  write_and_poll(4);
  EXPECT_TRUE(try_event());
  // Disarmed by the event; the next arm counts from zero again.
  write_and_poll(5);
  EXPECT_FALSE(try_event());
  ASSERT_EQ(ibv_req_notify_cq(cq_, 0), 0);
  for (uint64_t i = 6; i <= 8; ++i) write_and_poll(i);
  EXPECT_FALSE(try_event());
  write_and_poll(9);
  EXPECT_TRUE(try_event());
}

TEST_F(CqModeration, period__a_single_cqe_raises_the_event_after_the_period) {
  constexpr uint16_t kPeriodUs = 4000;
  ASSERT_EQ(modify(IBV_CQ_ATTR_MODERATE, 0, kPeriodUs), 0);
  ASSERT_EQ(ibv_req_notify_cq(cq_, 0), 0);
  const uint64_t posted = mono_ns();
  write_and_poll(1);
  // Not at once: only checked while the period surely has not run out yet.
  if (mono_ns() - posted < kPeriodUs * 1000ull / 2) {
    EXPECT_FALSE(try_event());
  }
  ASSERT_TRUE(wait_event());
  EXPECT_GE(mono_ns() - posted, kPeriodUs * 1000ull);
  EXPECT_FALSE(try_event());  // one event per arm
}

TEST_F(CqModeration, count_and_period__whichever_comes_first) {
  ASSERT_EQ(modify(IBV_CQ_ATTR_MODERATE, 2, 4000), 0);
  ASSERT_EQ(ibv_req_notify_cq(cq_, 0), 0);
  write_and_poll(1);
  write_and_poll(2);  // the count: no waiting for the period
  EXPECT_TRUE(try_event());
  ASSERT_EQ(ibv_req_notify_cq(cq_, 0), 0);
  const uint64_t posted = mono_ns();
  write_and_poll(3);  // one CQE of two: the period ends it
  ASSERT_TRUE(wait_event());
  EXPECT_GE(mono_ns() - posted, 4000000ull);
}

TEST_F(CqModeration, modify_cq__moderation_off_releases_a_held_event) {
  ASSERT_EQ(modify(IBV_CQ_ATTR_MODERATE, 8, 0), 0);
  ASSERT_EQ(ibv_req_notify_cq(cq_, 0), 0);
  write_and_poll(1);
  EXPECT_FALSE(try_event());
  ASSERT_EQ(modify(IBV_CQ_ATTR_MODERATE, 0, 0), 0);
  EXPECT_TRUE(try_event());
}

}  // namespace
}  // namespace vrnic::abi::test
