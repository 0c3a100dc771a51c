// Test fixture shared by the verbs tests: vrnic's device opened through the public API.
#pragma once
#include <infiniband/verbs.h>
#include <gtest/gtest.h>

#include <cstring>

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

}  // namespace vrnic::abi::test
