// SRQ, memory windows, on-demand paging and ibv_rereg_mr through the public verbs (and the
// inline wrappers of verbs.h), on two RC QPs of one context connected over the device GID.
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "abi/verbs_test.h"

namespace vrnic::abi::test {
namespace {

constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                        IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

class Pair : public VerbsTest {
 protected:
  void SetUp() override {
    VerbsTest::SetUp();
    if (HasFatalFailure()) return;
    cq_ = ibv_create_cq(ctx_, 256, nullptr, nullptr, 0);
    ASSERT_NE(cq_, nullptr);
    a_buf_.assign(1 << 16, 0);
    b_buf_.assign(1 << 16, 0);
    a_mr_ = ibv_reg_mr(pd_, a_buf_.data(), a_buf_.size(), kAccess);
    b_mr_ = ibv_reg_mr(pd_, b_buf_.data(), b_buf_.size(), kAccess | IBV_ACCESS_MW_BIND);
    ASSERT_TRUE(a_mr_ && b_mr_);
  }
  void TearDown() override {
    for (ibv_qp* q : qps_) EXPECT_EQ(ibv_destroy_qp(q), 0);
    if (srq_) EXPECT_EQ(ibv_destroy_srq(srq_), 0);
    if (a_mr_) EXPECT_EQ(ibv_dereg_mr(a_mr_), 0);
    if (b_mr_) EXPECT_EQ(ibv_dereg_mr(b_mr_), 0);
    if (cq_) EXPECT_EQ(ibv_destroy_cq(cq_), 0);
    VerbsTest::TearDown();
  }
  ibv_qp* make_qp(ibv_srq* srq = nullptr) {
    ibv_qp_init_attr init{};
    init.send_cq = init.recv_cq = cq_;
    init.srq = srq;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = init.cap.max_recv_wr = 32;
    init.cap.max_send_sge = init.cap.max_recv_sge = 2;
    ibv_qp* qp = ibv_create_qp(pd_, &init);
    EXPECT_NE(qp, nullptr) << errno;
    if (qp) qps_.push_back(qp);
    return qp;
  }
  void to_rts(ibv_qp* qp, uint32_t remote_qpn) {
    connect_rc(qp, remote_qpn, {.my_psn = 0, .remote_psn = 0, .min_rnr_timer = 1});
  }
  void connect(ibv_qp* x, ibv_qp* y) {
    to_rts(x, y->qp_num);
    to_rts(y, x->qp_num);
  }
  std::vector<ibv_wc> wait(int n) {
    std::vector<ibv_wc> out;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (int(out.size()) < n && std::chrono::steady_clock::now() < deadline) {
      ibv_wc wc[8];
      const int got = ibv_poll_cq(cq_, 8, wc);
      for (int i = 0; i < got; ++i) out.push_back(wc[i]);
    }
    return out;
  }
  bool async_ready(int ms) {
    pollfd p{ctx_->async_fd, POLLIN, 0};
    return poll(&p, 1, ms) == 1;
  }
  int post(ibv_qp* qp, ibv_send_wr& wr) {
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(qp, &wr, &bad);
  }
  ibv_send_wr rdma(ibv_wr_opcode op, ibv_sge* s, uint64_t remote, uint32_t rkey) {
    ibv_send_wr w{};
    w.wr_id = 7;
    w.opcode = op;
    w.send_flags = IBV_SEND_SIGNALED;
    w.sg_list = s;
    w.num_sge = 1;
    w.wr.rdma.remote_addr = remote;
    w.wr.rdma.rkey = rkey;
    return w;
  }
  uint64_t b_addr(size_t off = 0) { return reinterpret_cast<uint64_t>(b_buf_.data() + off); }
  ibv_sge a_sge(size_t off, uint32_t len) {
    return {reinterpret_cast<uint64_t>(a_buf_.data() + off), len, a_mr_->lkey};
  }

  ibv_cq* cq_ = nullptr;
  ibv_srq* srq_ = nullptr;
  std::vector<ibv_qp*> qps_;
  std::vector<uint8_t> a_buf_, b_buf_;
  ibv_mr* a_mr_ = nullptr;
  ibv_mr* b_mr_ = nullptr;
};

TEST_F(Pair, srq__shared_by_two_qps_limit_event_and_errors) {
  ibv_device_attr dev{};
  ASSERT_EQ(ibv_query_device(ctx_, &dev), 0);
  EXPECT_GT(dev.max_srq, 0);
  EXPECT_GT(dev.max_srq_wr, 0);
  EXPECT_GT(dev.max_srq_sge, 0);
  ibv_srq_init_attr init{};
  init.srq_context = this;
  init.attr.max_wr = uint32_t(dev.max_srq_wr) + 1;
  init.attr.max_sge = 1;
  errno = 0;
  EXPECT_EQ(ibv_create_srq(pd_, &init), nullptr);
  EXPECT_EQ(errno, EINVAL);
  init.attr.max_wr = 16;
  srq_ = ibv_create_srq(pd_, &init);
  ASSERT_NE(srq_, nullptr);
  EXPECT_EQ(srq_->srq_context, this);
  EXPECT_GE(init.attr.max_wr, 16u);

  ibv_qp* a1 = make_qp();
  ibv_qp* a2 = make_qp();
  ibv_qp* b1 = make_qp(srq_);
  ibv_qp* b2 = make_qp(srq_);
  ASSERT_TRUE(a1 && a2 && b1 && b2);
  EXPECT_EQ(b1->srq, srq_);
  connect(a1, b1);
  connect(a2, b2);
  EXPECT_EQ(ibv_destroy_srq(srq_), EBUSY);

  // A QP on an SRQ has no receive queue of its own.
  ibv_sge rs{b_addr(), 64, b_mr_->lkey};
  ibv_recv_wr rwr{};
  rwr.sg_list = &rs;
  rwr.num_sge = 1;
  ibv_recv_wr* bad_r = nullptr;
  EXPECT_EQ(ibv_post_recv(b1, &rwr, &bad_r), EINVAL);

  ibv_recv_wr wrs[4] = {};
  ibv_sge sges[4];
  for (int i = 0; i < 4; ++i) {
    sges[i] = {b_addr(i * 1024), 1024, b_mr_->lkey};
    wrs[i].wr_id = 100 + i;
    wrs[i].sg_list = &sges[i];
    wrs[i].num_sge = 1;
    wrs[i].next = i < 3 ? &wrs[i + 1] : nullptr;
  }
  ASSERT_EQ(ibv_post_srq_recv(srq_, wrs, &bad_r), 0);
  ibv_srq_attr attr{};
  attr.srq_limit = 3;
  ASSERT_EQ(ibv_modify_srq(srq_, &attr, IBV_SRQ_LIMIT), 0);
  ibv_srq_attr q{};
  ASSERT_EQ(ibv_query_srq(srq_, &q), 0);
  EXPECT_EQ(q.srq_limit, 3u);
  EXPECT_GE(q.max_wr, 16u);
  attr.srq_limit = q.max_wr + 1;
  EXPECT_EQ(ibv_modify_srq(srq_, &attr, IBV_SRQ_LIMIT), EINVAL);

  for (int i = 0; i < 4; ++i) a_buf_[i * 100] = uint8_t(i + 1);
  for (int i = 0; i < 2; ++i) {
    for (ibv_qp* qp : {a1, a2}) {
      ibv_sge s = a_sge((qp == a1 ? 0 : 2 + i) * 100 + (qp == a1 ? i * 100 : 0), 100);
      ibv_send_wr w{};
      w.opcode = IBV_WR_SEND;
      w.send_flags = IBV_SEND_SIGNALED;
      w.sg_list = &s;
      w.num_sge = 1;
      ASSERT_EQ(post(qp, w), 0);
    }
  }
  auto wcs = wait(8);
  ASSERT_EQ(wcs.size(), 8u);
  int recvs = 0;
  for (const ibv_wc& wc : wcs) {
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    if (wc.opcode != IBV_WC_RECV) continue;
    ++recvs;
    EXPECT_TRUE(wc.qp_num == b1->qp_num || wc.qp_num == b2->qp_num);
    EXPECT_EQ(wc.byte_len, 100u);
  }
  EXPECT_EQ(recvs, 4);
  // 4 -> 2 WQEs crossed the limit of 3: exactly one event, naming the SRQ.
  ASSERT_TRUE(async_ready(2000));
  ibv_async_event ev{};
  ASSERT_EQ(ibv_get_async_event(ctx_, &ev), 0);
  EXPECT_EQ(ev.event_type, IBV_EVENT_SRQ_LIMIT_REACHED);
  EXPECT_EQ(ev.element.srq, srq_);
  ibv_ack_async_event(&ev);
  EXPECT_FALSE(async_ready(50));
  ASSERT_EQ(ibv_query_srq(srq_, &q), 0);
  EXPECT_EQ(q.srq_limit, 0u);  // disarmed

  // A QP on the SRQ moved to ERR: LAST_WQE_REACHED for it.
  ibv_qp_attr err{};
  err.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(b1, &err, IBV_QP_STATE), 0);
  ASSERT_TRUE(async_ready(2000));
  ASSERT_EQ(ibv_get_async_event(ctx_, &ev), 0);
  EXPECT_EQ(ev.event_type, IBV_EVENT_QP_LAST_WQE_REACHED);
  EXPECT_EQ(ev.element.qp, b1);
  ibv_ack_async_event(&ev);
  ibv_qp_attr qa{};
  ibv_qp_init_attr qi{};
  ASSERT_EQ(ibv_query_qp(b2, &qa, IBV_QP_STATE, &qi), 0);
  EXPECT_EQ(qi.srq, srq_);
}

TEST_F(Pair, odp__caps_implicit_region_advise_and_unmapped_page) {
  ibv_device_attr_ex ex{};
  ASSERT_EQ(ibv_query_device_ex(ctx_, nullptr, &ex), 0);
  EXPECT_TRUE(ex.odp_caps.general_caps & IBV_ODP_SUPPORT);
  EXPECT_TRUE(ex.odp_caps.general_caps & IBV_ODP_SUPPORT_IMPLICIT);
  const uint32_t rc = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
                      IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC;
  EXPECT_EQ(ex.odp_caps.per_transport_caps.rc_odp_caps & rc, rc);

  const size_t ps = size_t(sysconf(_SC_PAGESIZE));
  auto* region = static_cast<uint8_t*>(
      mmap(nullptr, 2 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(region, MAP_FAILED);
  // The second page stays reserved but inaccessible (PROT_NONE): an unmapped hole could be
  // taken by any mmap of this process (the sanitizer runtimes map pages all the time).
  ASSERT_EQ(mprotect(region + ps, ps, PROT_NONE), 0);
  ibv_mr* implicit = ibv_reg_mr(pd_, nullptr, SIZE_MAX, kAccess | IBV_ACCESS_ON_DEMAND);
  ASSERT_NE(implicit, nullptr) << errno;
  ibv_sge ok{reinterpret_cast<uint64_t>(region), uint32_t(ps), implicit->lkey};
  EXPECT_EQ(ibv_advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH,
                          &ok, 1), 0);
  ibv_sge hole{reinterpret_cast<uint64_t>(region + ps), 64, implicit->lkey};
  EXPECT_EQ(ibv_advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &hole, 1), EFAULT);
  EXPECT_EQ(ibv_advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, 0, &hole, 1), 0);
  ibv_sge plain{b_addr(), 64, b_mr_->lkey};
  EXPECT_EQ(ibv_advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &plain, 1), EINVAL);

  ibv_qp* a = make_qp();
  ibv_qp* b = make_qp();
  connect(a, b);
  for (int i = 0; i < 256; ++i) a_buf_[i] = uint8_t(i);
  ibv_sge s = a_sge(0, 256);
  ibv_send_wr w = rdma(IBV_WR_RDMA_WRITE, &s, reinterpret_cast<uint64_t>(region + 64),
                       implicit->rkey);
  ASSERT_EQ(post(a, w), 0);
  auto wcs = wait(1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(region + 64, a_buf_.data(), 256), 0);
  // Into the inaccessible page: an error completion, the process lives on.
  w = rdma(IBV_WR_RDMA_WRITE, &s, reinterpret_cast<uint64_t>(region + ps), implicit->rkey);
  ASSERT_EQ(post(a, w), 0);
  wcs = wait(1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wcs[0].status);
  while (async_ready(100)) {  // the responder's QP_ACCESS_ERR
    ibv_async_event ev{};
    ASSERT_EQ(ibv_get_async_event(ctx_, &ev), 0);
    ibv_ack_async_event(&ev);
  }
  EXPECT_EQ(ibv_dereg_mr(implicit), 0);
  munmap(region, 2 * ps);
}

// IBV_ACCESS_ON_DEMAND among a QP's access flags (as mlx5 accepts it): the modify to INIT
// succeeds, ibv_query_qp reports the flag, and the QP writes into an on-demand region.
TEST_F(Pair, odp__qp_access_flags_take_on_demand) {
  ibv_qp* a = make_qp();
  ibv_qp* b = make_qp();
  const unsigned access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ON_DEMAND;
  connect_rc(a, b->qp_num, {.my_psn = 0, .remote_psn = 0, .access = access});
  connect_rc(b, a->qp_num, {.my_psn = 0, .remote_psn = 0, .access = access});
  ibv_qp_attr q{};
  ibv_qp_init_attr qi{};
  ASSERT_EQ(ibv_query_qp(b, &q, IBV_QP_ACCESS_FLAGS, &qi), 0);
  EXPECT_EQ(q.qp_access_flags, access);
  std::vector<uint8_t> target(4096, 0);
  ibv_mr* odp = ibv_reg_mr(pd_, target.data(), target.size(), kAccess | IBV_ACCESS_ON_DEMAND);
  ASSERT_NE(odp, nullptr) << errno;
  for (int i = 0; i < 128; ++i) a_buf_[i] = uint8_t(0x40 + i);
  ibv_sge s = a_sge(0, 128);
  ibv_send_wr w = rdma(IBV_WR_RDMA_WRITE, &s, reinterpret_cast<uint64_t>(target.data() + 8),
                       odp->rkey);
  ASSERT_EQ(post(a, w), 0);
  auto wcs = wait(1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(target.data() + 8, a_buf_.data(), 128), 0);
  EXPECT_EQ(ibv_dereg_mr(odp), 0);
}

TEST_F(Pair, mw__type1_and_type2_bind_invalidate_send_with_inv) {
  ibv_device_attr dev{};
  ASSERT_EQ(ibv_query_device(ctx_, &dev), 0);
  EXPECT_GT(dev.max_mw, 0);
  EXPECT_TRUE(dev.device_cap_flags & IBV_DEVICE_MEM_WINDOW);
  EXPECT_TRUE(dev.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
  ibv_qp* a = make_qp();
  ibv_qp* b = make_qp();
  connect(a, b);
  for (int i = 0; i < 512; ++i) a_buf_[i] = uint8_t(i * 3);

  // Type 1: ibv_bind_mw updates mw->rkey; the window then answers to it.
  ibv_mw* mw1 = ibv_alloc_mw(pd_, IBV_MW_TYPE_1);
  ASSERT_NE(mw1, nullptr);
  EXPECT_EQ(mw1->type, IBV_MW_TYPE_1);
  const uint32_t old_rkey = mw1->rkey;
  ibv_mw_bind bind{};
  bind.wr_id = 11;
  bind.send_flags = IBV_SEND_SIGNALED;
  bind.bind_info.mr = b_mr_;
  bind.bind_info.addr = b_addr(4096);
  bind.bind_info.length = 4096;
  bind.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
  ASSERT_EQ(ibv_bind_mw(b, mw1, &bind), 0);
  EXPECT_NE(mw1->rkey, old_rkey);
  auto wcs = wait(1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wcs[0].opcode, IBV_WC_BIND_MW);
  EXPECT_EQ(wcs[0].wr_id, 11u);
  ibv_sge s = a_sge(0, 512);
  ibv_send_wr w = rdma(IBV_WR_RDMA_WRITE, &s, b_addr(4096), mw1->rkey);
  ASSERT_EQ(post(a, w), 0);
  wcs = wait(1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(b_buf_.data() + 4096, a_buf_.data(), 512), 0);

  // Type 2 through IBV_WR_BIND_MW on b's QP; the inline ibv_bind_mw refuses type 2.
  ibv_mw* mw2 = ibv_alloc_mw(pd_, IBV_MW_TYPE_2);
  ASSERT_NE(mw2, nullptr);
  EXPECT_EQ(ibv_bind_mw(b, mw2, &bind), EINVAL);
  const uint32_t rkey2 = ibv_inc_rkey(mw2->rkey);
  ibv_send_wr bw{};
  bw.wr_id = 12;
  bw.opcode = IBV_WR_BIND_MW;
  bw.send_flags = IBV_SEND_SIGNALED;
  bw.bind_mw.mw = mw2;
  bw.bind_mw.rkey = rkey2;
  bw.bind_mw.bind_info.mr = b_mr_;
  bw.bind_mw.bind_info.addr = b_addr(8192);
  bw.bind_mw.bind_info.length = 1024;
  bw.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  ASSERT_EQ(post(b, bw), 0);
  wcs = wait(1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wcs[0].opcode, IBV_WC_BIND_MW);
  mw2->rkey = rkey2;  // IBV_WR_BIND_MW leaves that to the program
  w = rdma(IBV_WR_RDMA_WRITE, &s, b_addr(8192), rkey2);
  ASSERT_EQ(post(a, w), 0);
  wcs = wait(1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(b_buf_.data() + 8192, a_buf_.data(), 512), 0);

  // SEND with Invalidate from a: b's receive reports the rkey, the window closes.
  ibv_sge rs{b_addr(16384), 256, b_mr_->lkey};
  ibv_recv_wr rwr{};
  rwr.wr_id = 13;
  rwr.sg_list = &rs;
  rwr.num_sge = 1;
  ibv_recv_wr* bad_r = nullptr;
  ASSERT_EQ(ibv_post_recv(b, &rwr, &bad_r), 0);
  ibv_sge ss = a_sge(0, 16);
  ibv_send_wr sw{};
  sw.wr_id = 14;
  sw.opcode = IBV_WR_SEND_WITH_INV;
  sw.send_flags = IBV_SEND_SIGNALED;
  sw.sg_list = &ss;
  sw.num_sge = 1;
  sw.invalidate_rkey = rkey2;
  ASSERT_EQ(post(a, sw), 0);
  wcs = wait(2);
  ASSERT_EQ(wcs.size(), 2u);
  for (const ibv_wc& wc : wcs) {
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    if (wc.opcode == IBV_WC_RECV) {
      EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_INV);
      EXPECT_EQ(wc.invalidated_rkey, rkey2);
    }
  }
  // Rebind, then LOCAL_INV from b's own send queue.
  const uint32_t rkey3 = ibv_inc_rkey(rkey2);
  bw.bind_mw.rkey = rkey3;
  ASSERT_EQ(post(b, bw), 0);
  ibv_send_wr inv{};
  inv.wr_id = 15;
  inv.opcode = IBV_WR_LOCAL_INV;
  inv.send_flags = IBV_SEND_SIGNALED;
  inv.invalidate_rkey = rkey3;
  ASSERT_EQ(post(b, inv), 0);
  wcs = wait(2);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].opcode, IBV_WC_BIND_MW);
  EXPECT_EQ(wcs[1].opcode, IBV_WC_LOCAL_INV);
  EXPECT_EQ(wcs[1].status, IBV_WC_SUCCESS);
  w = rdma(IBV_WR_RDMA_WRITE, &s, b_addr(8192), rkey3);
  ASSERT_EQ(post(a, w), 0);
  wcs = wait(1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_REM_ACCESS_ERR);
  while (async_ready(100)) {
    ibv_async_event ev{};
    ASSERT_EQ(ibv_get_async_event(ctx_, &ev), 0);
    ibv_ack_async_event(&ev);
  }
  EXPECT_EQ(ibv_dealloc_mw(mw2), 0);
  // dereg of an MR with a bound window is refused until the window goes.
  EXPECT_EQ(ibv_dereg_mr(b_mr_), EINVAL);
  EXPECT_EQ(ibv_dealloc_mw(mw1), 0);
  errno = 0;
  EXPECT_EQ(ibv_alloc_mw(pd_, ibv_mw_type(3)), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

TEST_F(Pair, rereg_mr__input_errors_and_translation_change) {
  std::vector<uint8_t> other(8192, 0);
  errno = 0;
  EXPECT_EQ(ibv_rereg_mr(a_mr_, 8, nullptr, nullptr, 0, 0), IBV_REREG_MR_ERR_INPUT);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ibv_rereg_mr(a_mr_, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, nullptr, 0, 0),
            IBV_REREG_MR_ERR_INPUT);
  EXPECT_EQ(ibv_rereg_mr(a_mr_, IBV_REREG_MR_CHANGE_PD, pd_, nullptr, 0, IBV_ACCESS_LOCAL_WRITE),
            IBV_REREG_MR_ERR_INPUT);
  errno = 0;
  EXPECT_EQ(ibv_rereg_mr(a_mr_, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                         IBV_ACCESS_REMOTE_WRITE),
            IBV_REREG_MR_ERR_CMD);
  EXPECT_EQ(errno, EINVAL);
  const uint32_t lkey = a_mr_->lkey, rkey = a_mr_->rkey;
  ASSERT_EQ(ibv_rereg_mr(a_mr_, IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_ACCESS,
                         nullptr, other.data(), other.size(), kAccess),
            0);
  EXPECT_EQ(a_mr_->addr, other.data());
  EXPECT_EQ(a_mr_->length, other.size());
  EXPECT_EQ(a_mr_->lkey, lkey);
  EXPECT_EQ(a_mr_->rkey, rkey);
  // b writes into a's region with the unchanged rkey: the bytes land in `other`.
  ibv_qp* a = make_qp();
  ibv_qp* b = make_qp();
  connect(a, b);
  for (int i = 0; i < 64; ++i) b_buf_[i] = uint8_t(0x80 + i);
  ibv_sge s{b_addr(), 64, b_mr_->lkey};
  ibv_send_wr w = rdma(IBV_WR_RDMA_WRITE, &s, reinterpret_cast<uint64_t>(other.data() + 100), rkey);
  ASSERT_EQ(post(b, w), 0);
  auto wcs = wait(1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(other.data() + 100, b_buf_.data(), 64), 0);
  EXPECT_EQ(ibv_dereg_mr(a_mr_), 0);
  a_mr_ = nullptr;
}

// A receive posted with an lkey that ibv_rereg_mr then moved to another PD, or whose range
// the new translation no longer covers: the SEND into it fails at the responder with a local
// protection error on the receive and a Remote Operational Error NAK (IBA 9.7.5.2.4), so the
// requester gets IBV_WC_REM_OP_ERR rather than a flush.
TEST_F(Pair, rereg_mr__receive_into_a_moved_region_is_rem_op_err) {
  std::vector<uint8_t> other(8192, 0);
  ibv_pd* pd2 = ibv_alloc_pd(ctx_);
  ASSERT_NE(pd2, nullptr);
  for (int round = 0; round < 2; ++round) {
    ibv_qp* a = make_qp();
    ibv_qp* b = make_qp();
    connect(a, b);
    ibv_sge r{b_addr(), 64, b_mr_->lkey};
    ibv_recv_wr rw{};
    rw.wr_id = 11;
    rw.sg_list = &r;
    rw.num_sge = 1;
    ibv_recv_wr* bad_r = nullptr;
    ASSERT_EQ(ibv_post_recv(b, &rw, &bad_r), 0);
    if (round == 0)
      ASSERT_EQ(ibv_rereg_mr(b_mr_, IBV_REREG_MR_CHANGE_PD, pd2, nullptr, 0, 0), 0);
    else
      ASSERT_EQ(ibv_rereg_mr(b_mr_, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, other.data(),
                             other.size(), 0),
                0);
    ibv_sge s = a_sge(0, 64);
    ibv_send_wr w = rdma(IBV_WR_SEND, &s, 0, 0);
    ASSERT_EQ(post(a, w), 0);
    auto wcs = wait(2);
    ASSERT_EQ(wcs.size(), 2u) << "round " << round;
    for (const ibv_wc& wc : wcs) {
      const ibv_wc_status want = wc.qp_num == a->qp_num ? IBV_WC_REM_OP_ERR : IBV_WC_LOC_PROT_ERR;
      EXPECT_EQ(wc.status, want) << "round " << round << " qp " << wc.qp_num;
    }
    EXPECT_NE(wcs[0].qp_num, wcs[1].qp_num);
    EXPECT_EQ(b_buf_[0], 0);
    EXPECT_EQ(other[0], 0);
    if (round == 0) {
      ASSERT_EQ(ibv_rereg_mr(b_mr_, IBV_REREG_MR_CHANGE_PD, pd_, nullptr, 0, 0), 0);
    }
  }
  EXPECT_EQ(ibv_dealloc_pd(pd2), 0);
}

}  // namespace
}  // namespace vrnic::abi::test

namespace vrnic::abi::test {
namespace {

// ibv_create_srq_ex is inline: a basic SRQ goes through ibv_create_srq, anything else through
// the create_srq_ex op (xrc.cc): an XRC SRQ without its XRCD and CQ is EINVAL, tag matching
// EOPNOTSUPP.
TEST_F(Pair, srq_ex__basic_through_ibv_create_srq_xrc_needs_xrcd_tm_unsupported) {
  ibv_srq_init_attr_ex ex{};
  ex.comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE;
  ex.srq_type = IBV_SRQT_BASIC;
  ex.pd = pd_;
  ex.attr.max_wr = 8;
  ex.attr.max_sge = 1;
  ibv_srq* s = ibv_create_srq_ex(ctx_, &ex);
  ASSERT_NE(s, nullptr) << errno;
  ibv_srq_attr q{};
  EXPECT_EQ(ibv_query_srq(s, &q), 0);
  EXPECT_GE(q.max_wr, 8u);
  EXPECT_EQ(ibv_destroy_srq(s), 0);
  ex.srq_type = IBV_SRQT_XRC;
  errno = 0;
  EXPECT_EQ(ibv_create_srq_ex(ctx_, &ex), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ex.srq_type = IBV_SRQT_TM;
  ex.comp_mask |= IBV_SRQ_INIT_ATTR_TM;
  errno = 0;
  EXPECT_EQ(ibv_create_srq_ex(ctx_, &ex), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
}

}  // namespace
}  // namespace vrnic::abi::test
