// Asynchronous events: QP and CQ events reach ibv_get_async_event with their object, the
// destroy verbs wait for the acknowledgement of every event read, and unread events of a
// destroyed object are dropped.
#include <fcntl.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "abi/verbs_test.h"

namespace vrnic::abi::test {
namespace {

class Async : public VerbsTest {
 protected:
  void SetUp() override {
    VerbsTest::SetUp();
    if (HasFatalFailure()) return;
    buf_.assign(4096, 0x5a);
    mr_ = ibv_reg_mr(pd_, buf_.data(), buf_.size(),
                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    ASSERT_NE(mr_, nullptr);
  }
  void TearDown() override {
    if (mr_) {
      EXPECT_EQ(ibv_dereg_mr(mr_), 0);
    }
    VerbsTest::TearDown();
  }

  ibv_qp* make_qp(ibv_cq* cq) {
    ibv_qp_init_attr init{};
    init.send_cq = init.recv_cq = cq;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = init.cap.max_recv_wr = 8;
    init.cap.max_send_sge = init.cap.max_recv_sge = 1;
    return ibv_create_qp(pd_, &init);
  }

  // Remote write access only, no READ/atomic resources: the events under test come from
  // writes with bad keys.
  void connect(ibv_qp* qp, uint32_t remote_qpn) {
    connect_rc(qp, remote_qpn, {.my_psn = 0, .remote_psn = 0, .access = IBV_ACCESS_REMOTE_WRITE,
                                .max_dest_rd_atomic = 0});
  }

  // A signaled 16-byte RDMA WRITE from qp to buf_ with rkey.
  void write(ibv_qp* qp, uint32_t rkey, uint64_t wr_id = 1) {
    ibv_sge s{reinterpret_cast<uint64_t>(buf_.data()), 16, mr_->lkey};
    ibv_send_wr w{};
    w.wr_id = wr_id;
    w.opcode = IBV_WR_RDMA_WRITE;
    w.send_flags = IBV_SEND_SIGNALED;
    w.sg_list = &s;
    w.num_sge = 1;
    w.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(buf_.data() + 1024);
    w.wr.rdma.rkey = rkey;
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_send(qp, &w, &bad), 0);
  }

  // The next async event within 5 s; false if none came.
  bool next_event(ibv_async_event& ev) {
    pollfd p{ctx_->async_fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) != 1) return false;
    return ibv_get_async_event(ctx_, &ev) == 0;
  }

  // Runs destroy() while another thread acknowledges ev after 100 ms; true if destroy()
  // returned only after the acknowledgement.
  template <typename F>
  bool destroy_waits_for_ack(ibv_async_event ev, F destroy) {
    std::atomic<bool> acked{false};
    std::thread t([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      acked = true;
      ibv_ack_async_event(&ev);
    });
    destroy();
    const bool waited = acked;
    t.join();
    return waited;
  }

  std::vector<uint8_t> buf_;
  ibv_mr* mr_ = nullptr;
};

TEST_F(Async, qp_event__delivered_and_destroy_waits_for_ack) {
  ibv_cq* cq = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  ibv_qp* a = make_qp(cq);
  ibv_qp* b = make_qp(cq);
  ASSERT_TRUE(a && b);
  connect(a, b->qp_num);
  connect(b, a->qp_num);
  write(a, mr_->rkey ^ 0x100);  // a bad rkey: b's QP reports an access violation
  ibv_async_event ev{};
  ASSERT_TRUE(next_event(ev));
  EXPECT_EQ(ev.event_type, IBV_EVENT_QP_ACCESS_ERR) << ibv_event_type_str(ev.event_type);
  EXPECT_EQ(ev.element.qp, b);
  EXPECT_TRUE(destroy_waits_for_ack(ev, [&] { EXPECT_EQ(ibv_destroy_qp(b), 0); }));
  EXPECT_EQ(ibv_destroy_qp(a), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
}

TEST_F(Async, cq_overrun__cq_err_event_and_destroy_waits_for_ack) {
  ibv_cq* cq = ibv_create_cq(ctx_, 1, nullptr, nullptr, 0);
  ibv_cq* other = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
  ASSERT_TRUE(cq && other);
  ibv_qp* a = make_qp(cq);
  ibv_qp* b = make_qp(other);
  ASSERT_TRUE(a && b);
  connect(a, b->qp_num);
  connect(b, a->qp_num);
  write(a, mr_->rkey, 1);
  write(a, mr_->rkey, 2);  // the second CQE finds the one-entry CQ full
  ibv_async_event ev{};
  ASSERT_TRUE(next_event(ev));
  EXPECT_EQ(ev.event_type, IBV_EVENT_CQ_ERR) << ibv_event_type_str(ev.event_type);
  EXPECT_EQ(ev.element.cq, cq);
  ibv_wc wc;
  ASSERT_EQ(ibv_poll_cq(cq, 1, &wc), 1);  // the first CQE is kept
  EXPECT_EQ(wc.wr_id, 1u);
  EXPECT_EQ(ibv_destroy_qp(a), 0);
  EXPECT_EQ(ibv_destroy_qp(b), 0);
  EXPECT_TRUE(destroy_waits_for_ack(ev, [&] { EXPECT_EQ(ibv_destroy_cq(cq), 0); }));
  EXPECT_EQ(ibv_destroy_cq(other), 0);
}

TEST_F(Async, sq_drained__after_rts_to_sqd_with_notify) {
  ibv_cq* cq = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  ibv_qp* a = make_qp(cq);
  ibv_qp* b = make_qp(cq);
  ASSERT_TRUE(a && b);
  connect(a, b->qp_num);
  connect(b, a->qp_num);
  write(a, mr_->rkey);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_SQD;
  attr.en_sqd_async_notify = 1;
  ASSERT_EQ(ibv_modify_qp(a, &attr, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY), 0);
  ibv_async_event ev{};
  ASSERT_TRUE(next_event(ev));
  EXPECT_EQ(ev.event_type, IBV_EVENT_SQ_DRAINED) << ibv_event_type_str(ev.event_type);
  EXPECT_EQ(ev.element.qp, a);
  ibv_ack_async_event(&ev);
  ibv_wc wc;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  int got = 0;
  while (got == 0 && std::chrono::steady_clock::now() < deadline) got = ibv_poll_cq(cq, 1, &wc);
  ASSERT_EQ(got, 1);  // the WR posted before SQD completed
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(ibv_destroy_qp(a), 0);
  EXPECT_EQ(ibv_destroy_qp(b), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
}

// An event nobody read is dropped with its object: no stale element reaches the program.
TEST_F(Async, unread_event__dropped_when_its_qp_is_destroyed) {
  ibv_cq* cq = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  ibv_qp* a = make_qp(cq);
  ibv_qp* b = make_qp(cq);
  ASSERT_TRUE(a && b);
  connect(a, b->qp_num);
  connect(b, a->qp_num);
  write(a, mr_->rkey ^ 0x100);
  pollfd p{ctx_->async_fd, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1);  // queued, not read
  EXPECT_EQ(ibv_destroy_qp(b), 0);    // does not wait: the event was never delivered
  // a gets a remote access error completion; it may or may not add its own QP event.
  const int flags = fcntl(ctx_->async_fd, F_GETFL);
  ASSERT_EQ(fcntl(ctx_->async_fd, F_SETFL, flags | O_NONBLOCK), 0);
  ibv_async_event ev{};
  while (ibv_get_async_event(ctx_, &ev) == 0) {
    EXPECT_NE(ev.element.qp, b) << ibv_event_type_str(ev.event_type);
    ibv_ack_async_event(&ev);
  }
  EXPECT_EQ(errno, EAGAIN);
  ASSERT_EQ(fcntl(ctx_->async_fd, F_SETFL, flags), 0);
  EXPECT_EQ(ibv_destroy_qp(a), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
}

// Each context sees the events of its own objects only.
TEST_F(Async, events__go_to_the_owning_context) {
  ibv_context* other = ibv_open_device(list_[0]);
  ASSERT_NE(other, nullptr);
  ibv_cq* cq = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  ibv_qp* a = make_qp(cq);
  ibv_qp* b = make_qp(cq);
  ASSERT_TRUE(a && b);
  connect(a, b->qp_num);
  connect(b, a->qp_num);
  write(a, mr_->rkey ^ 0x100);
  ibv_async_event ev{};
  ASSERT_TRUE(next_event(ev));
  ibv_ack_async_event(&ev);
  pollfd p{other->async_fd, POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 100), 0);
  EXPECT_EQ(ibv_destroy_qp(a), 0);
  EXPECT_EQ(ibv_destroy_qp(b), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_close_device(other), 0);
}

}  // namespace
}  // namespace vrnic::abi::test
