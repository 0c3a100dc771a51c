// Tests of ibv_get_cq_event on a blocking channel, which moves the device's packets in the
// caller's thread before it sleeps: every event delivered once, the channel fd's tokens
// matching the events left, events that come after the spin delivered by the sleep.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <thread>

#include "abi/verbs_test.h"

namespace vrnic::abi::test {
namespace {

class EventWait : public Loopback {
 protected:
  void set_nonblocking(bool on) {
    const int flags = fcntl(channel_->fd, F_GETFL);
    ASSERT_EQ(fcntl(channel_->fd, F_SETFL, on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK), 0);
  }
  // The channel fd holds no token: nothing left to read.
  void expect_no_token() {
    pollfd p{channel_->fd, POLLIN, 0};
    EXPECT_EQ(poll(&p, 1, 0), 0);
  }
  void post_write(uint64_t id) {
    ibv_sge s = sge(a_buf_, a_mr_, 0, 16);
    ibv_send_wr w = rdma_to_b(IBV_WR_RDMA_WRITE, id, &s, b_mr_->rkey);
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_send(a_, &w, &bad), 0);
  }
};

TEST_F(EventWait, get_cq_event__a_blocking_wait_gets_the_event_and_leaves_no_token) {
  ASSERT_EQ(ibv_req_notify_cq(cq_, 0), 0);
  post_write(1);
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  ASSERT_EQ(ibv_get_cq_event(channel_, &ev_cq, &ev_ctx), 0);  // no poll before: it waits
  EXPECT_EQ(ev_cq, cq_);
  EXPECT_EQ(ev_ctx, this);
  ibv_ack_cq_events(cq_, 1);
  expect_no_token();
  set_nonblocking(true);
  EXPECT_EQ(ibv_get_cq_event(channel_, &ev_cq, &ev_ctx), -1);
  EXPECT_EQ(errno, EAGAIN);
  auto wcs = wait(1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
}

TEST_F(EventWait, get_cq_event__two_events_in_one_wait_are_both_delivered_once) {
  // A second CQ on the same channel takes b's receive completions.
  ibv_cq* recv_cq = ibv_create_cq(ctx_, 16, nullptr, channel_, 0);
  ASSERT_NE(recv_cq, nullptr);
  ibv_qp_init_attr init{};
  init.send_cq = cq_;
  init.recv_cq = recv_cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = init.cap.max_recv_wr = 8;
  init.cap.max_send_sge = init.cap.max_recv_sge = 1;
  ibv_qp* rx = ibv_create_qp(pd_, &init);
  ibv_qp* tx = make_qp();
  ASSERT_NE(rx, nullptr);
  ASSERT_NE(tx, nullptr);
  connect(rx, tx->qp_num, 300, 100);
  connect(tx, rx->qp_num, 100, 300);
  ibv_sge rs = sge(b_buf_, b_mr_, 0, 64);
  ibv_recv_wr rw{};
  rw.wr_id = 7;
  rw.sg_list = &rs;
  rw.num_sge = 1;
  ibv_recv_wr* bad_rw = nullptr;
  ASSERT_EQ(ibv_post_recv(rx, &rw, &bad_rw), 0);
  ASSERT_EQ(ibv_req_notify_cq(cq_, 0), 0);
  ASSERT_EQ(ibv_req_notify_cq(recv_cq, 0), 0);
  ibv_sge s = sge(a_buf_, a_mr_, 0, 8);
  ibv_send_wr w{};
  w.wr_id = 8;
  w.opcode = IBV_WR_SEND;
  w.send_flags = IBV_SEND_SIGNALED;
  w.sg_list = &s;
  w.num_sge = 1;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(tx, &w, &bad), 0);
  // The receive's event comes first, the send's (on its ACK) after: wait for both.
  std::vector<ibv_cq*> got;
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(ibv_get_cq_event(channel_, &ev_cq, &ev_ctx), 0);
    got.push_back(ev_cq);
  }
  EXPECT_TRUE((got == std::vector<ibv_cq*>{recv_cq, cq_}) ||
              (got == std::vector<ibv_cq*>{cq_, recv_cq}));
  expect_no_token();  // two events, two deliveries, no token left over
  set_nonblocking(true);
  EXPECT_EQ(ibv_get_cq_event(channel_, &ev_cq, &ev_ctx), -1);
  EXPECT_EQ(errno, EAGAIN);
  ibv_ack_cq_events(cq_, 1);
  ibv_ack_cq_events(recv_cq, 1);
  ibv_wc wc;
  while (ibv_poll_cq(recv_cq, 1, &wc) == 0) {
  }
  EXPECT_EQ(wc.wr_id, 7u);
  EXPECT_EQ(wait(1).size(), 1u);
  EXPECT_EQ(ibv_destroy_qp(tx), 0);
  EXPECT_EQ(ibv_destroy_qp(rx), 0);
  EXPECT_EQ(ibv_destroy_cq(recv_cq), 0);
}

TEST_F(EventWait, get_cq_event__an_event_after_the_spin_wakes_the_sleeping_wait) {
  ASSERT_EQ(ibv_req_notify_cq(cq_, 0), 0);
  std::thread later([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // far past the spin
    post_write(2);
  });
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  ASSERT_EQ(ibv_get_cq_event(channel_, &ev_cq, &ev_ctx), 0);
  later.join();
  EXPECT_EQ(ev_cq, cq_);
  ibv_ack_cq_events(cq_, 1);
  expect_no_token();
  EXPECT_EQ(wait(1).size(), 1u);
}

}  // namespace
}  // namespace vrnic::abi::test
