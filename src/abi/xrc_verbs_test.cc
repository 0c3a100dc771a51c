// XRC through the public verbs: ibv_open_xrcd, ibv_create_srq_ex (IBV_SRQT_XRC),
// ibv_get_srq_num, XRC initiator / target QPs of ibv_create_qp_ex, remote_srqn in
// ibv_post_send and ibv_wr_set_xrc_srqn, and the errno of each mistake.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "abi/verbs_test.h"

namespace vrnic::abi::test {
namespace {

class Xrc : public VerbsTest {
 protected:
  void SetUp() override {
    VerbsTest::SetUp();
    if (HasFatalFailure()) return;
    ibv_xrcd_init_attr xa{};
    xa.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
    xa.fd = -1;
    xa.oflags = O_CREAT;
    xrcd_ = ibv_open_xrcd(ctx_, &xa);
    ASSERT_NE(xrcd_, nullptr) << errno;
    send_cq_ = ibv_create_cq(ctx_, 64, nullptr, nullptr, 0);
    srq_cq_ = ibv_create_cq(ctx_, 64, nullptr, nullptr, 0);
    ASSERT_TRUE(send_cq_ && srq_cq_);
    buf_.assign(8192, 0);
    mr_ = ibv_reg_mr(pd_, buf_.data(), buf_.size(),
                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    ASSERT_NE(mr_, nullptr);
  }
  void TearDown() override {
    for (ibv_qp* q : qps_) EXPECT_EQ(ibv_destroy_qp(q), 0);
    for (ibv_srq* s : srqs_) EXPECT_EQ(ibv_destroy_srq(s), 0);
    if (mr_) EXPECT_EQ(ibv_dereg_mr(mr_), 0);
    if (send_cq_) EXPECT_EQ(ibv_destroy_cq(send_cq_), 0);
    if (srq_cq_) EXPECT_EQ(ibv_destroy_cq(srq_cq_), 0);
    if (xrcd_) EXPECT_EQ(ibv_close_xrcd(xrcd_), 0);
    VerbsTest::TearDown();
  }
  ibv_srq* xrc_srq(ibv_xrcd* in = nullptr) {
    ibv_srq_init_attr_ex a{};
    a.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
                  IBV_SRQ_INIT_ATTR_CQ;
    a.srq_type = IBV_SRQT_XRC;
    a.pd = pd_;
    a.xrcd = in ? in : xrcd_;
    a.cq = srq_cq_;
    a.attr.max_wr = 16;
    a.attr.max_sge = 1;
    ibv_srq* s = ibv_create_srq_ex(ctx_, &a);
    EXPECT_NE(s, nullptr) << errno;
    if (s) srqs_.push_back(s);
    return s;
  }
  ibv_qp* tgt(ibv_xrcd* in = nullptr) {
    ibv_qp_init_attr_ex a{};
    a.qp_type = IBV_QPT_XRC_RECV;
    a.comp_mask = IBV_QP_INIT_ATTR_XRCD;
    a.xrcd = in ? in : xrcd_;
    ibv_qp* q = ibv_create_qp_ex(ctx_, &a);
    EXPECT_NE(q, nullptr) << errno;
    if (q) qps_.push_back(q);
    return q;
  }
  ibv_qp* ini(bool with_ops) {
    ibv_qp_init_attr_ex a{};
    a.qp_type = IBV_QPT_XRC_SEND;
    a.comp_mask = IBV_QP_INIT_ATTR_PD | (with_ops ? IBV_QP_INIT_ATTR_SEND_OPS_FLAGS : 0);
    a.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE;
    a.pd = pd_;
    a.send_cq = send_cq_;
    a.cap.max_send_wr = 8;
    a.cap.max_send_sge = 1;
    ibv_qp* q = ibv_create_qp_ex(ctx_, &a);
    EXPECT_NE(q, nullptr) << errno;
    if (q) qps_.push_back(q);
    return q;
  }
  ibv_xrcd* open_file(int fd, int oflags) {
    ibv_xrcd_init_attr xa{};
    xa.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
    xa.fd = fd;
    xa.oflags = oflags;
    errno = 0;
    return ibv_open_xrcd(ctx_, &xa);
  }
  // A SEND from a new initiator to a new target of `target_in`, naming `srqn`: its status.
  int send_status(ibv_xrcd* target_in, uint32_t srqn) {
    ibv_qp* t = tgt(target_in);
    ibv_qp* i = ini(false);
    if (!t || !i) return -1;
    connect_rc(i, t->qp_num);
    connect_rc(t, i->qp_num);
    ibv_sge sg{reinterpret_cast<uint64_t>(buf_.data()), 16, mr_->lkey};
    ibv_send_wr wr{};
    wr.sg_list = &sg;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.qp_type.xrc.remote_srqn = srqn;
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(i, &wr, &bad) != 0) return -1;
    auto sent = poll(send_cq_, 1);
    return sent.size() == 1 ? sent[0].status : -1;
  }
  std::vector<ibv_wc> poll(ibv_cq* cq, int n) {
    std::vector<ibv_wc> out;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (int(out.size()) < n && std::chrono::steady_clock::now() < deadline) {
      ibv_wc wc[4];
      const int got = ibv_poll_cq(cq, 4, wc);
      for (int i = 0; i < got; ++i) out.push_back(wc[i]);
    }
    return out;
  }
  void post_srq(ibv_srq* s, uint64_t id, size_t off, uint32_t len) {
    ibv_sge sg{reinterpret_cast<uint64_t>(buf_.data() + off), len, mr_->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = id;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_srq_recv(s, &wr, &bad), 0);
  }

  ibv_xrcd* xrcd_ = nullptr;
  ibv_cq* send_cq_ = nullptr;
  ibv_cq* srq_cq_ = nullptr;
  ibv_mr* mr_ = nullptr;
  std::vector<uint8_t> buf_;
  std::vector<ibv_qp*> qps_;
  std::vector<ibv_srq*> srqs_;
};

TEST_F(Xrc, post_send__remote_srqn_and_wr_set_xrc_srqn_reach_the_named_srq) {
  ibv_srq* s = xrc_srq();
  uint32_t srqn = 0;
  ASSERT_EQ(ibv_get_srq_num(s, &srqn), 0);
  EXPECT_NE(srqn, 0u);
  ibv_qp* t = tgt();
  ibv_qp* i = ini(true);
  ASSERT_TRUE(s && t && i);
  EXPECT_EQ(t->qp_type, IBV_QPT_XRC_RECV);
  connect_rc(i, t->qp_num);
  connect_rc(t, i->qp_num);
  post_srq(s, 41, 4096, 100);
  post_srq(s, 42, 4096 + 100, 100);
  std::memcpy(buf_.data(), "xrc message one", 16);
  ibv_sge sg{reinterpret_cast<uint64_t>(buf_.data()), 16, mr_->lkey};
  ibv_send_wr wr{};
  wr.wr_id = 1;
  wr.sg_list = &sg;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.qp_type.xrc.remote_srqn = srqn;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(i, &wr, &bad), 0);
  // The same through the extended API.
  ibv_qp_ex* qx = ibv_qp_to_qp_ex(i);
  ASSERT_NE(qx, nullptr);
  ibv_wr_start(qx);
  qx->wr_id = 2;
  qx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(qx);
  ibv_wr_set_xrc_srqn(qx, srqn);
  ibv_wr_set_sge(qx, mr_->lkey, reinterpret_cast<uint64_t>(buf_.data()), 8);
  ASSERT_EQ(ibv_wr_complete(qx), 0);
  auto sent = poll(send_cq_, 2);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(sent[1].status, IBV_WC_SUCCESS);
  auto got = poll(srq_cq_, 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].wr_id, 41u);
  EXPECT_EQ(got[0].byte_len, 16u);
  EXPECT_EQ(got[0].qp_num, t->qp_num);  // the target QP, not the SRQ
  EXPECT_EQ(got[1].wr_id, 42u);
  EXPECT_EQ(got[1].byte_len, 8u);
  EXPECT_EQ(std::memcmp(buf_.data() + 4096, "xrc message one", 16), 0);
}

TEST_F(Xrc, post_send__unknown_srqn_completes_with_remote_invalid_request) {
  EXPECT_EQ(send_status(nullptr, 0x777777), IBV_WC_REM_INV_REQ_ERR);
}

// Two opens of one file are one domain: an SRQ made through one handle serves a target made
// through the other; a domain of its own (fd -1) does not.
TEST_F(Xrc, open_xrcd__opens_of_one_file_share_the_domain) {
  char path[] = "/tmp/vrnic_xrcd_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  unlink(path);
  ibv_xrcd* a = open_file(fd, O_CREAT);
  ibv_xrcd* b = open_file(fd, 0);
  ASSERT_TRUE(a && b) << errno;
  EXPECT_NE(a, b);  // a handle each, as the kernel gives
  ibv_srq* s = xrc_srq(a);
  uint32_t srqn = 0;
  ASSERT_EQ(ibv_get_srq_num(s, &srqn), 0);
  post_srq(s, 7, 4096, 64);
  EXPECT_EQ(send_status(b, srqn), IBV_WC_SUCCESS);
  auto got = poll(srq_cq_, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].wr_id, 7u);
  EXPECT_EQ(send_status(xrcd_, srqn), IBV_WC_REM_INV_REQ_ERR);  // another domain's SRQ
  EXPECT_EQ(ibv_close_xrcd(a), 0);  // b still holds the domain
  for (ibv_qp* q : qps_) EXPECT_EQ(ibv_destroy_qp(q), 0);
  qps_.clear();
  EXPECT_EQ(ibv_close_xrcd(b), EBUSY);  // the last handle: the SRQ is still in it
  EXPECT_EQ(ibv_destroy_srq(s), 0);
  srqs_.clear();
  EXPECT_EQ(ibv_close_xrcd(b), 0);
  close(fd);
}

TEST_F(Xrc, errors__as_the_kernel_and_mlx5_give_them) {
  ibv_xrcd_init_attr xa{};
  errno = 0;
  EXPECT_EQ(ibv_open_xrcd(ctx_, &xa), nullptr);  // FD and OFLAGS are required
  EXPECT_EQ(errno, EINVAL);
  xa.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS | IBV_XRCD_INIT_ATTR_RESERVED;
  errno = 0;
  EXPECT_EQ(ibv_open_xrcd(ctx_, &xa), nullptr);  // an unknown comp_mask bit
  EXPECT_EQ(errno, EOPNOTSUPP);
  ibv_xrcd* own = open_file(-1, 0);  // fd -1: a new domain, O_CREAT or not (as uverbs)
  ASSERT_NE(own, nullptr);
  EXPECT_EQ(ibv_close_xrcd(own), 0);
  EXPECT_EQ(open_file(-1, O_APPEND), nullptr);  // a flag other than O_CREAT / O_EXCL
  EXPECT_EQ(errno, EINVAL);
  const int fd = open("/dev/null", O_RDONLY);
  EXPECT_EQ(open_file(fd, 0), nullptr);  // no domain for this file yet and no O_CREAT
  EXPECT_EQ(errno, EAGAIN);
  ibv_xrcd* f = open_file(fd, O_CREAT);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(open_file(fd, O_CREAT | O_EXCL), nullptr);  // it exists now
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ibv_close_xrcd(f), 0);
  close(fd);
  EXPECT_EQ(open_file(fd, O_CREAT), nullptr);  // not an open file descriptor
  EXPECT_EQ(errno, EBADF);

  ibv_srq_init_attr_ex sa{};
  sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
  sa.srq_type = IBV_SRQT_XRC;
  sa.pd = pd_;
  sa.attr.max_wr = 4;
  sa.attr.max_sge = 1;
  errno = 0;
  EXPECT_EQ(ibv_create_srq_ex(ctx_, &sa), nullptr);  // an XRC SRQ needs an XRCD and a CQ
  EXPECT_EQ(errno, EINVAL);
  ibv_srq_init_attr basic{};
  basic.attr.max_wr = 4;
  basic.attr.max_sge = 1;
  ibv_srq* b = ibv_create_srq(pd_, &basic);
  ASSERT_NE(b, nullptr);
  uint32_t num = 0;
  EXPECT_EQ(ibv_get_srq_num(b, &num), EINVAL);  // a basic SRQ has no number
  EXPECT_EQ(ibv_destroy_srq(b), 0);

  ibv_qp_init_attr qa{};
  qa.qp_type = IBV_QPT_XRC_RECV;
  qa.send_cq = qa.recv_cq = send_cq_;
  errno = 0;
  EXPECT_EQ(ibv_create_qp(pd_, &qa), nullptr);  // a target needs an XRCD: ibv_create_qp has none
  EXPECT_EQ(errno, EINVAL);
  ibv_qp* t = tgt();
  EXPECT_EQ(ibv_close_xrcd(xrcd_), EBUSY);  // the target QP is in it
  ibv_sge sg{reinterpret_cast<uint64_t>(buf_.data()), 8, mr_->lkey};
  ibv_recv_wr rw{};
  rw.sg_list = &sg;
  rw.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_recv(t, &rw, &bad), EINVAL);  // receives go to the XRC SRQs
  ibv_qp* i = ini(false);
  EXPECT_EQ(ibv_post_recv(i, &rw, &bad), EINVAL);  // an initiator has no receive queue
  EXPECT_EQ(i->recv_cq, nullptr);
  ibv_srq* s = xrc_srq();
  EXPECT_EQ(ibv_destroy_cq(srq_cq_), EBUSY);  // the XRC SRQ completes into it
  ASSERT_NE(s, nullptr);
}

}  // namespace
}  // namespace vrnic::abi::test
