// Test fixture shared by the verbs tests: vrnic's device opened through the public API.
#pragma once
#include <infiniband/verbs.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <vector>

namespace vrnic::abi::test {

class VerbsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int n = 0;
    list_ = ibv_get_device_list(&n);
    ASSERT_NE(list_, nullptr);
    ASSERT_EQ(n, 1);
    ASSERT_STREQ(ibv_get_device_name(list_[0]), "vrnic0");  // ours, not rdma-core's
    ctx_ = ibv_open_device(list_[0]);
    ASSERT_NE(ctx_, nullptr) << std::strerror(errno);
    pd_ = ibv_alloc_pd(ctx_);
    ASSERT_NE(pd_, nullptr);
  }
  void TearDown() override {
    if (pd_) {
      EXPECT_EQ(ibv_dealloc_pd(pd_), 0);
    }
    if (ctx_) {
      EXPECT_EQ(ibv_close_device(ctx_), 0);
    }
    if (list_) ibv_free_device_list(list_);
  }

  // How connect_rc brings an RC QP up (the defaults suit most tests).
  struct RcOptions {
    uint32_t my_psn = 7, remote_psn = 7;
    unsigned access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    uint8_t min_rnr_timer = 12;
    uint8_t max_dest_rd_atomic = 4;
  };
  // RESET -> INIT -> RTR -> RTS for an RC QP whose peer QP (remote_qpn) is on this device.
  void connect_rc(ibv_qp* qp, uint32_t remote_qpn, const RcOptions& o) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = 1;
    a.qp_access_flags = o.access;
    ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                        IBV_QP_ACCESS_FLAGS), 0);
    EXPECT_EQ(qp->state, IBV_QPS_INIT);
    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = remote_qpn;
    a.rq_psn = o.remote_psn;
    a.max_dest_rd_atomic = o.max_dest_rd_atomic;
    a.min_rnr_timer = o.min_rnr_timer;
    a.ah_attr.is_global = 1;
    ASSERT_EQ(ibv_query_gid(ctx_, 1, 0, &a.ah_attr.grh.dgid), 0);
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.port_num = 1;
    ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                                        IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER), 0);
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = o.my_psn;
    a.max_rd_atomic = 4;
    ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                        IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                        IBV_QP_MAX_QP_RD_ATOMIC), 0);
    EXPECT_EQ(qp->state, IBV_QPS_RTS);
  }
  void connect_rc(ibv_qp* qp, uint32_t remote_qpn) { connect_rc(qp, remote_qpn, RcOptions{}); }

  ibv_device** list_ = nullptr;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
};

// Two RC QPs of one context, connected to each other (loopback through the device's GID).
class Loopback : public VerbsTest {
 protected:
  static constexpr size_t kSize = 1 << 20;

  void SetUp() override {
    VerbsTest::SetUp();
    if (HasFatalFailure()) return;
    channel_ = ibv_create_comp_channel(ctx_);
    ASSERT_NE(channel_, nullptr);
    cq_ = ibv_create_cq(ctx_, 256, this, channel_, 0);
    ASSERT_NE(cq_, nullptr);
    a_buf_.assign(kSize, 0);
    b_buf_.assign(kSize, 0);
    const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    a_mr_ = ibv_reg_mr(pd_, a_buf_.data(), kSize, access);
    b_mr_ = ibv_reg_mr(pd_, b_buf_.data(), kSize, access);
    ASSERT_NE(a_mr_, nullptr);
    ASSERT_NE(b_mr_, nullptr);
    a_ = make_qp();
    b_ = make_qp();
    ASSERT_NE(a_, nullptr);
    ASSERT_NE(b_, nullptr);
    connect(a_, b_->qp_num, 100, 200);
    connect(b_, a_->qp_num, 200, 100);
  }
  void TearDown() override {
    if (a_) {
      EXPECT_EQ(ibv_destroy_qp(a_), 0);
    }
    if (b_) {
      EXPECT_EQ(ibv_destroy_qp(b_), 0);
    }
    if (a_mr_) {
      EXPECT_EQ(ibv_dereg_mr(a_mr_), 0);
    }
    if (b_mr_) {
      EXPECT_EQ(ibv_dereg_mr(b_mr_), 0);
    }
    if (cq_) {
      EXPECT_EQ(ibv_destroy_cq(cq_), 0);
    }
    if (channel_) {
      EXPECT_EQ(ibv_destroy_comp_channel(channel_), 0);
    }
    VerbsTest::TearDown();
  }

  ibv_qp* make_qp() {
    ibv_qp_init_attr init{};
    init.send_cq = init.recv_cq = cq_;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = init.cap.max_recv_wr = 64;
    init.cap.max_send_sge = init.cap.max_recv_sge = 4;
    init.cap.max_inline_data = 64;
    ibv_qp* qp = ibv_create_qp(pd_, &init);
    if (qp) {
      EXPECT_GE(init.cap.max_send_wr, 64u);
      EXPECT_EQ(qp->state, IBV_QPS_RESET);
      EXPECT_NE(qp->qp_num, 0u);
    }
    return qp;
  }

  void connect(ibv_qp* qp, uint32_t remote_qpn, uint32_t my_psn, uint32_t remote_psn) {
    connect_rc(qp, remote_qpn, {.my_psn = my_psn, .remote_psn = remote_psn});
  }

  // Polls until n completions arrived or 5 s passed.
  std::vector<ibv_wc> wait(int n) {
    std::vector<ibv_wc> out;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (int(out.size()) < n && std::chrono::steady_clock::now() < deadline) {
      ibv_wc wc[8];
      const int got = ibv_poll_cq(cq_, 8, wc);
      EXPECT_GE(got, 0);
      for (int i = 0; i < got; ++i) out.push_back(wc[i]);
    }
    return out;
  }

  ibv_sge sge(std::vector<uint8_t>& buf, ibv_mr* mr, size_t off, size_t len) {
    return ibv_sge{reinterpret_cast<uint64_t>(buf.data() + off), uint32_t(len), mr->lkey};
  }
  // A signaled RDMA WRITE or READ of one SGE to / from the start of b's buffer.
  ibv_send_wr rdma_to_b(ibv_wr_opcode opcode, uint64_t wr_id, ibv_sge* s, uint32_t rkey) {
    ibv_send_wr w{};
    w.wr_id = wr_id;
    w.opcode = opcode;
    w.send_flags = IBV_SEND_SIGNALED;
    w.sg_list = s;
    w.num_sge = 1;
    w.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(b_buf_.data());
    w.wr.rdma.rkey = rkey;
    return w;
  }

  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  std::vector<uint8_t> a_buf_, b_buf_;
  ibv_mr* a_mr_ = nullptr;
  ibv_mr* b_mr_ = nullptr;
  ibv_qp* a_ = nullptr;
  ibv_qp* b_ = nullptr;
};

}  // namespace vrnic::abi::test
