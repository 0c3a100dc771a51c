// ibv_wr_* batches: building mistakes, abort, inline data, the last setter wins; ibv_resize_cq.
#include "abi/verbs_ext_test_support.h"

namespace vrnic::abi::test {
namespace {

// Mistakes made while building fail ibv_wr_complete and post nothing; ibv_wr_abort posts
// nothing; inline data is copied when set.
class WrBatch : public Ext {
 protected:
  void SetUp() override {
    Ext::SetUp();
    if (HasFatalFailure()) return;
    a_.assign(8192, 0x11);
    b_.assign(8192, 0);
    const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    ma_ = ibv_reg_mr(pd_, a_.data(), a_.size(), access);
    mb_ = ibv_reg_mr(pd_, b_.data(), b_.size(), access);
    cq_ = make_cq(true);
    ASSERT_TRUE(ma_ && mb_ && cq_);
    qa_ = make_qp(cq_, true);
    qb_ = make_qp(cq_, false);
    ASSERT_TRUE(qa_ && qb_);
    connect(qa_, qb_->qp_num);
    connect(qb_, qa_->qp_num);
    x_ = ibv_qp_to_qp_ex(qa_);
    ASSERT_NE(x_, nullptr);
  }
  void TearDown() override {
    if (qa_) {
      EXPECT_EQ(ibv_destroy_qp(qa_), 0);
    }
    if (qb_) {
      EXPECT_EQ(ibv_destroy_qp(qb_), 0);
    }
    if (cq_) {
      EXPECT_EQ(ibv_destroy_cq(cq_), 0);
    }
    if (ma_) {
      EXPECT_EQ(ibv_dereg_mr(ma_), 0);
    }
    if (mb_) {
      EXPECT_EQ(ibv_dereg_mr(mb_), 0);
    }
    Ext::TearDown();
  }

 public:  // the mistake table's functions take the fixture
  uint64_t B(size_t off) { return reinterpret_cast<uint64_t>(&b_[off]); }
  uint64_t A(size_t off) { return reinterpret_cast<uint64_t>(&a_[off]); }
  // A signaled write of 16 bytes of a to b+off, through the builder.
  void good_write(uint64_t id, size_t off) {
    x_->wr_id = id;
    x_->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write(x_, mb_->rkey, B(off));
    ibv_wr_set_sge(x_, ma_->lkey, A(0), 16);
  }
  // True if the CQ stays empty for 50 ms.
  bool no_cqe() {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
    while (std::chrono::steady_clock::now() < until) {
      ibv_wc wc;
      if (ibv_poll_cq(cq_, 1, &wc) != 0) return false;
    }
    return true;
  }

  std::vector<uint8_t> a_, b_;
  ibv_mr* ma_ = nullptr;
  ibv_mr* mb_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qa_ = nullptr;
  ibv_qp* qb_ = nullptr;
  ibv_qp_ex* x_ = nullptr;
};

TEST_F(WrBatch, building_mistakes__wr_complete_fails_nothing_posted) {
  struct Mistake {
    const char* what;
    void (*make)(WrBatch&);
  } mistakes[] = {
      {"setter before any WR", [](WrBatch& t) { ibv_wr_set_sge(t.x_, t.ma_->lkey, t.A(0), 8); }},
      {"too many SGEs",
       [](WrBatch& t) {
         t.good_write(1, 0);
         std::vector<ibv_sge> l(5, ibv_sge{t.A(0), 8, t.ma_->lkey});  // max_send_sge is 4
         ibv_wr_rdma_write(t.x_, t.mb_->rkey, t.B(100));
         ibv_wr_set_sge_list(t.x_, l.size(), l.data());
       }},
      {"inline data too long",
       [](WrBatch& t) {
         t.good_write(1, 0);
         ibv_wr_rdma_write(t.x_, t.mb_->rkey, t.B(100));
         std::vector<uint8_t> big(4096, 1);
         ibv_wr_set_inline_data(t.x_, big.data(), big.size());
       }},
  };
  for (const Mistake& m : mistakes) {
    SCOPED_TRACE(m.what);
    ibv_wr_start(x_);
    m.make(*this);
    EXPECT_EQ(ibv_wr_complete(x_), EINVAL);
    EXPECT_TRUE(no_cqe());
    EXPECT_EQ(b_[0], 0);
  }
  // The QP is still usable: a good batch after the failed ones goes through.
  ibv_wr_start(x_);
  good_write(7, 0);
  good_write(8, 16);
  ASSERT_EQ(ibv_wr_complete(x_), 0);
  auto c = poll(cq_, 2, true);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].wr_id, 7u);
  EXPECT_EQ(c[1].wr_id, 8u);
  EXPECT_EQ(b_[0], 0x11);
  EXPECT_EQ(b_[31], 0x11);
}

TEST_F(WrBatch, abort__posts_nothing) {
  ibv_wr_start(x_);
  good_write(1, 0);
  ibv_wr_abort(x_);
  EXPECT_TRUE(no_cqe());
  EXPECT_EQ(b_[0], 0);
  ibv_wr_start(x_);  // the lock was released by ibv_wr_abort
  EXPECT_EQ(ibv_wr_complete(x_), 0);  // an empty batch
}

TEST_F(WrBatch, inline_data__copied_when_set) {
  uint8_t data[32];
  std::memset(data, 0x42, sizeof(data));
  ibv_wr_start(x_);
  x_->wr_id = 5;
  x_->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_rdma_write(x_, mb_->rkey, B(64));
  ibv_wr_set_inline_data(x_, data, sizeof(data));
  std::memset(data, 0x99, sizeof(data));  // the program may reuse the buffer at once
  ASSERT_EQ(ibv_wr_complete(x_), 0);
  auto c = poll(cq_, 1, true);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(b_[64], 0x42);
  EXPECT_EQ(b_[95], 0x42);
  EXPECT_EQ(b_[96], 0);
}

TEST_F(WrBatch, later_setter_replaces_data__last_wr_only) {
  a_[0] = 0x77;
  a_[100] = 0x88;
  ibv_wr_start(x_);
  x_->wr_id = 1;
  x_->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_rdma_write(x_, mb_->rkey, B(0));
  ibv_wr_set_sge(x_, ma_->lkey, A(0), 1);
  ibv_wr_set_sge(x_, ma_->lkey, A(100), 1);  // replaces the first SGE
  ASSERT_EQ(ibv_wr_complete(x_), 0);
  ASSERT_EQ(poll(cq_, 1, true).size(), 1u);
  EXPECT_EQ(b_[0], 0x88);
}

// ibv_resize_cq keeps the CQEs it holds, in order; it cannot shrink below them.
TEST_F(WrBatch, resize_cq__keeps_cqes_and_refuses_below_them) {
  // qa_ in ERR: each WR posted completes at once, in the post call, with WR_FLUSH_ERR, so the
  // CQ holds exactly the CQEs the test made (no waiting on the wire, no race with it).
  ibv_qp_attr err{};
  err.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(qa_, &err, IBV_QP_STATE), 0);
  ibv_wr_start(x_);
  for (uint64_t i = 0; i < 6; ++i) good_write(10 + i, i * 16);
  ASSERT_EQ(ibv_wr_complete(x_), 0);
  EXPECT_EQ(ibv_resize_cq(cq_, 5), EINVAL);  // holds 6
  EXPECT_EQ(ibv_resize_cq(cq_, 0), EINVAL);
  EXPECT_EQ(ibv_resize_cq(cq_, -1), EINVAL);
  ibv_device_attr da{};
  ASSERT_EQ(ibv_query_device(ctx_, &da), 0);
  EXPECT_EQ(ibv_resize_cq(cq_, da.max_cqe + 1), EINVAL);
  ASSERT_EQ(ibv_resize_cq(cq_, 6), 0);
  EXPECT_EQ(cq_->cqe, 6);
  ASSERT_EQ(ibv_resize_cq(cq_, 1000), 0);
  EXPECT_EQ(cq_->cqe, 1000);
  auto c = poll(cq_, 6, false);
  ASSERT_EQ(c.size(), 6u);
  for (uint64_t i = 0; i < 6; ++i) {
    EXPECT_EQ(c[i].wr_id, 10 + i);
    EXPECT_EQ(c[i].status, IBV_WC_WR_FLUSH_ERR);
  }
  // Shrunk to 2 entries, the CQ overruns on the third CQE (IBV_EVENT_CQ_ERR).
  ASSERT_EQ(ibv_resize_cq(cq_, 2), 0);
  ibv_wr_start(x_);
  for (uint64_t i = 0; i < 3; ++i) good_write(20 + i, i * 16);
  ASSERT_EQ(ibv_wr_complete(x_), 0);
  pollfd p{ctx_->async_fd, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1);
  ibv_async_event ev{};
  ASSERT_EQ(ibv_get_async_event(ctx_, &ev), 0);
  EXPECT_EQ(ev.event_type, IBV_EVENT_CQ_ERR);
  EXPECT_EQ(ev.element.cq, cq_);
  ibv_ack_async_event(&ev);
}

}  // namespace
}  // namespace vrnic::abi::test
