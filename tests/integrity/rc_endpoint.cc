// RC connection setup with the attributes perftest uses (timeout 14, retry 7, rnr_retry 7).
#include "rc_endpoint.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

namespace vrnic_test {

void die(const std::string& what) {
  fprintf(stderr, "FAIL: %s (errno %d: %s)\n", what.c_str(), errno, strerror(errno));
  exit(1);
}

Device Device::open() {
  Device d;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  CHECK_OR_DIE(list && n > 0, "no RDMA device");
  d.ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  CHECK_OR_DIE(d.ctx, "ibv_open_device");
  d.pd = ibv_alloc_pd(d.ctx);
  CHECK_OR_DIE(d.pd, "ibv_alloc_pd");
  CHECK_OR_DIE(ibv_query_port(d.ctx, 1, &d.port) == 0, "ibv_query_port");
  CHECK_OR_DIE(ibv_query_gid(d.ctx, 1, 0, &d.gid) == 0, "ibv_query_gid");
  return d;
}

ibv_mr* Device::reg(void* p, size_t n, int access) const {
  ibv_mr* mr = ibv_reg_mr(pd, p, n, access);
  CHECK_OR_DIE(mr, "ibv_reg_mr");
  return mr;
}

RcEndpoint::RcEndpoint(const Device& dev, uint32_t max_inline) : dev_(dev) {
  cq_ = ibv_create_cq(dev.ctx, 256, nullptr, nullptr, 0);
  CHECK_OR_DIE(cq_, "ibv_create_cq");
  ibv_qp_init_attr init{};
  init.send_cq = cq_;
  init.recv_cq = cq_;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = 128;
  init.cap.max_recv_wr = 128;
  init.cap.max_send_sge = 4;
  init.cap.max_recv_sge = 4;
  init.cap.max_inline_data = max_inline;
  qp_ = ibv_create_qp(dev.pd, &init);
  CHECK_OR_DIE(qp_, "ibv_create_qp");
  max_inline_ = init.cap.max_inline_data;
  std::random_device rd;
  psn_ = rd() & 0xffffff;
}

RcEndpoint::~RcEndpoint() {
  if (qp_) ibv_destroy_qp(qp_);
  if (cq_) ibv_destroy_cq(cq_);
}

QpInfo RcEndpoint::local_info() const {
  QpInfo i;
  i.qpn = qp_->qp_num;
  i.psn = psn_;
  memcpy(i.gid, dev_.gid.raw, 16);
  return i;
}

void RcEndpoint::connect(const QpInfo& r) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                      IBV_ACCESS_REMOTE_ATOMIC;
  CHECK_OR_DIE(ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                          IBV_QP_ACCESS_FLAGS) == 0,
               "modify to INIT");
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = dev_.port.active_mtu;
  a.dest_qp_num = r.qpn;
  a.rq_psn = r.psn;
  a.max_dest_rd_atomic = 16;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  memcpy(a.ah_attr.grh.dgid.raw, r.gid, 16);
  a.ah_attr.grh.sgid_index = 0;
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = 1;
  CHECK_OR_DIE(ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                                          IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0,
               "modify to RTR");
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.sq_psn = psn_;
  a.max_rd_atomic = 16;
  CHECK_OR_DIE(ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                          IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                          IBV_QP_MAX_QP_RD_ATOMIC) == 0,
               "modify to RTS");
}

void RcEndpoint::reset() {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RESET;
  CHECK_OR_DIE(ibv_modify_qp(qp_, &a, IBV_QP_STATE) == 0, "modify to RESET");
  std::random_device rd;
  psn_ = rd() & 0xffffff;
}

ibv_wc RcEndpoint::wait_one(int timeout_s) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  ibv_wc wc{};
  for (;;) {
    int n = ibv_poll_cq(cq_, 1, &wc);
    CHECK_OR_DIE(n >= 0, "ibv_poll_cq");
    if (n == 1) return wc;
    if (std::chrono::steady_clock::now() > deadline) die("timed out waiting for a completion");
  }
}

}  // namespace vrnic_test
