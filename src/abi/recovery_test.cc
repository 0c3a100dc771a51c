// QP error recovery through the verbs: RC QPs in ERR (a failed request, ibv_rereg_mr under
// traffic, or ibv_modify_qp) moved through RESET, INIT, RTR and RTS carry traffic again; the
// completions they left are gone after RESET (as mlx5's provider cleans them); the attributes
// ibv_query_qp returns restore the connection.
#include <poll.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "abi/verbs_test.h"

namespace vrnic::abi::test {
namespace {

class Recovery : public Loopback {
 protected:
  void TearDown() override {
    drain_async();
    Loopback::TearDown();
  }
  void drain_async() {
    pollfd p{ctx_->async_fd, POLLIN, 0};
    while (poll(&p, 1, 0) == 1) {
      ibv_async_event ev{};
      ASSERT_EQ(ibv_get_async_event(ctx_, &ev), 0);
      ibv_ack_async_event(&ev);
    }
  }
  static int to_state(ibv_qp* qp, ibv_qp_state s) {
    ibv_qp_attr a{};
    a.qp_state = s;
    return ibv_modify_qp(qp, &a, IBV_QP_STATE);
  }
  // Both QPs: RESET, then INIT / RTR / RTS with fresh PSNs.
  void restart(uint32_t a_psn, uint32_t b_psn) {
    ASSERT_EQ(to_state(a_, IBV_QPS_RESET), 0);
    ASSERT_EQ(to_state(b_, IBV_QPS_RESET), 0);
    EXPECT_EQ(a_->state, IBV_QPS_RESET);
    connect(a_, b_->qp_num, a_psn, b_psn);
    connect(b_, a_->qp_num, b_psn, a_psn);
  }
  int post(ibv_qp* qp, ibv_send_wr& w) {
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(qp, &w, &bad);
  }
  int post_recv(ibv_qp* qp, uint64_t id, ibv_sge* s) {
    ibv_recv_wr r{};
    r.wr_id = id;
    r.sg_list = s;
    r.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    return ibv_post_recv(qp, &r, &bad);
  }
  // Receives on b (wr_id 1, 2, ...) whose region ibv_rereg_mr then moves to pd2, and two
  // SENDs from a (wr_id 3, 4) into them: REM_OP_ERR and a flush at a, LOC_PROT_ERR at b.
  void send_into_moved_region(ibv_pd* pd2, int receives) {
    ibv_sge r = sge(b_buf_, b_mr_, 0, 64);
    for (int i = 1; i <= receives; ++i) ASSERT_EQ(post_recv(b_, uint64_t(i), &r), 0);
    ASSERT_EQ(ibv_rereg_mr(b_mr_, IBV_REREG_MR_CHANGE_PD, pd2, nullptr, 0, 0), 0);
    ibv_sge s = sge(a_buf_, a_mr_, 0, 64);
    ibv_send_wr w = rdma_to_b(IBV_WR_SEND, 3, &s, 0);
    ASSERT_EQ(post(a_, w), 0);
    w.wr_id = 4;
    ASSERT_EQ(post(a_, w), 0);
  }
  // A SEND into a receive of b, a WRITE to and a READ from b's buffer: every CQE a success,
  // the first ones polled after recovery, the bytes where they belong.
  void traffic_succeeds(uint64_t id) {
    for (size_t i = 0; i < 4096; ++i) a_buf_[i] = uint8_t(id + i * 7);
    ibv_sge r = sge(b_buf_, b_mr_, 8192, 256);
    ASSERT_EQ(post_recv(b_, id, &r), 0);
    ibv_sge s1 = sge(a_buf_, a_mr_, 0, 256);
    ibv_send_wr send = rdma_to_b(IBV_WR_SEND, id + 1, &s1, 0);
    ASSERT_EQ(post(a_, send), 0);
    ibv_sge s2 = sge(a_buf_, a_mr_, 1024, 2000);
    ibv_send_wr write = rdma_to_b(IBV_WR_RDMA_WRITE, id + 2, &s2, b_mr_->rkey);
    ASSERT_EQ(post(a_, write), 0);
    ibv_sge s3 = sge(a_buf_, a_mr_, 65536, 2000);
    ibv_send_wr read = rdma_to_b(IBV_WR_RDMA_READ, id + 3, &s3, b_mr_->rkey);
    ASSERT_EQ(post(a_, read), 0);
    auto wcs = wait(4);
    ASSERT_EQ(wcs.size(), 4u);
    for (const ibv_wc& wc : wcs) {
      EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status) << " " << wc.wr_id;
      EXPECT_GE(wc.wr_id, id);
      EXPECT_LE(wc.wr_id, id + 3);
    }
    EXPECT_EQ(std::memcmp(b_buf_.data() + 8192, a_buf_.data(), 256), 0);
    EXPECT_EQ(std::memcmp(b_buf_.data(), a_buf_.data() + 1024, 2000), 0);
    EXPECT_EQ(std::memcmp(a_buf_.data() + 65536, a_buf_.data() + 1024, 2000), 0);
    ibv_wc extra;
    EXPECT_EQ(ibv_poll_cq(cq_, 1, &extra), 0);
  }
};

// A receive whose region ibv_rereg_mr moved to another PD: Remote Operational Error at the
// requester, a local protection error at the responder, both QPs in ERR with WRs flushed.
// The program re-registers the region back and restarts both QPs without polling the errors:
// the next poll sees only the new traffic.
TEST_F(Recovery, modify_qp__restart_after_remote_operation_error_carries_traffic) {
  ibv_pd* pd2 = ibv_alloc_pd(ctx_);
  ASSERT_NE(pd2, nullptr);
  send_into_moved_region(pd2, 2);
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  for (int i = 0; i < 500 && attr.qp_state != IBV_QPS_ERR; ++i) {
    ASSERT_EQ(ibv_query_qp(a_, &attr, IBV_QP_STATE, &init), 0);
    usleep(1000);
  }
  ASSERT_EQ(attr.qp_state, IBV_QPS_ERR);
  ASSERT_EQ(ibv_query_qp(b_, &attr, IBV_QP_STATE, &init), 0);
  ASSERT_EQ(attr.qp_state, IBV_QPS_ERR);
  ASSERT_EQ(ibv_rereg_mr(b_mr_, IBV_REREG_MR_CHANGE_PD, pd_, nullptr, 0, 0), 0);
  restart(300, 400);
  traffic_succeeds(100);
  EXPECT_EQ(ibv_dealloc_pd(pd2), 0);
}

// The same failure, the errors polled as a program would: REM_OP_ERR first, then flushes.
TEST_F(Recovery, modify_qp__errors_polled_then_restart_carries_traffic) {
  ibv_pd* pd2 = ibv_alloc_pd(ctx_);
  ASSERT_NE(pd2, nullptr);
  send_into_moved_region(pd2, 1);
  auto wcs = wait(3);
  ASSERT_EQ(wcs.size(), 3u);
  for (const ibv_wc& wc : wcs) {
    const ibv_wc_status want = wc.wr_id == 1   ? IBV_WC_LOC_PROT_ERR
                               : wc.wr_id == 3 ? IBV_WC_REM_OP_ERR
                                               : IBV_WC_WR_FLUSH_ERR;
    EXPECT_EQ(wc.status, want) << wc.wr_id << " " << ibv_wc_status_str(wc.status);
  }
  ASSERT_EQ(ibv_rereg_mr(b_mr_, IBV_REREG_MR_CHANGE_PD, pd_, nullptr, 0, 0), 0);
  restart(100, 200);  // the PSNs of the first connection again
  traffic_succeeds(100);
  traffic_succeeds(200);
  EXPECT_EQ(ibv_dealloc_pd(pd2), 0);
}

// ibv_rereg_mr moving the target of WRITEs away (a new translation): a WRITE through the
// old address is refused with a remote access error (IBV_WC_REM_ACCESS_ERR, as mlx5), the
// responder's QP gets IBV_EVENT_QP_ACCESS_ERR. Re-registered back and restarted, it succeeds.
TEST_F(Recovery, rereg_mr__old_translation_refused_then_restored_after_restart) {
  std::vector<uint8_t> other(4096, 0);
  ASSERT_EQ(ibv_rereg_mr(b_mr_, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, other.data(),
                         other.size(), 0),
            0);
  ibv_sge s = sge(a_buf_, a_mr_, 0, 64);
  ibv_send_wr w = rdma_to_b(IBV_WR_RDMA_WRITE, 5, &s, b_mr_->rkey);
  ASSERT_EQ(post(a_, w), 0);
  auto wcs = wait(1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_REM_ACCESS_ERR);
  ibv_async_event ev{};
  ASSERT_EQ(ibv_get_async_event(ctx_, &ev), 0);
  EXPECT_EQ(ev.event_type, IBV_EVENT_QP_ACCESS_ERR);
  EXPECT_EQ(ev.element.qp, b_);
  ibv_ack_async_event(&ev);
  EXPECT_EQ(other[0], 0);
  ASSERT_EQ(ibv_rereg_mr(b_mr_, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, b_buf_.data(),
                         b_buf_.size(), 0),
            0);
  restart(7, 8);
  traffic_succeeds(300);
}

// The program moves a QP to ERR itself with WRs outstanding: they flush; RESET removes the
// flushes it did not poll; after the restart its peer's old state is gone as well.
TEST_F(Recovery, modify_qp__error_by_the_program_then_restart) {
  ibv_sge r = sge(b_buf_, b_mr_, 0, 64);
  ASSERT_EQ(post_recv(b_, 1, &r), 0);
  ASSERT_EQ(post_recv(b_, 2, &r), 0);
  ASSERT_EQ(to_state(b_, IBV_QPS_ERR), 0);
  EXPECT_EQ(b_->state, IBV_QPS_ERR);
  ibv_wc wc;
  ASSERT_EQ(ibv_poll_cq(cq_, 1, &wc), 1);  // one of the two flushes polled, one left
  EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(wc.wr_id, 1u);
  ASSERT_EQ(to_state(a_, IBV_QPS_ERR), 0);
  restart(0xfffffe, 1000);  // a's PSNs wrap during the traffic
  traffic_succeeds(400);
}

// ibv_query_qp's attributes fed back after a RESET restore the same connection: the PSNs
// are where it stood (rq_psn the next expected, sq_psn the next to send, as rxe reports
// them) and the address vector takes the modify it came from.
TEST_F(Recovery, query_qp__attributes_fed_back_restore_the_connection) {
  traffic_succeeds(500);
  ibv_qp_attr qa{}, qb{};
  ibv_qp_init_attr init{};
  const int all = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                  IBV_QP_RQ_PSN | IBV_QP_SQ_PSN | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX |
                  IBV_QP_PORT | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                  IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  ASSERT_EQ(ibv_query_qp(a_, &qa, all, &init), 0);
  ASSERT_EQ(ibv_query_qp(b_, &qb, all, &init), 0);
  EXPECT_EQ(qa.sq_psn, 105u);  // from PSN 100: SEND, WRITE (2 packets), READ (2 responses)
  EXPECT_EQ(qb.rq_psn, qa.sq_psn);
  EXPECT_EQ(qa.rq_psn, 200u);  // b sent nothing
  for (auto [qp, at] : {std::pair{a_, qa}, std::pair{b_, qb}}) {
    ASSERT_EQ(to_state(qp, IBV_QPS_RESET), 0);
    at.qp_state = IBV_QPS_INIT;
    ASSERT_EQ(ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                         IBV_QP_ACCESS_FLAGS), 0);
    at.qp_state = IBV_QPS_RTR;
    ASSERT_EQ(ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                                         IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                         IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
              0);
    at.qp_state = IBV_QPS_RTS;
    ASSERT_EQ(ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
                                         IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                         IBV_QP_MAX_QP_RD_ATOMIC),
              0);
  }
  traffic_succeeds(600);
  ibv_qp_attr after{};
  ASSERT_EQ(ibv_query_qp(a_, &after, IBV_QP_SQ_PSN, &init), 0);
  EXPECT_EQ(after.sq_psn, 110u);
}

}  // namespace
}  // namespace vrnic::abi::test
