// UD through the public verbs: address handles (plain and from a work completion), a datagram
// between two UD QPs of one device with its GRH, multicast attach / detach, device limits.
#include <chrono>
#include <vector>

#include "abi/verbs_test.h"

namespace vrnic::abi::test {
namespace {

constexpr uint32_t kQkey = 0x11111111;

class Ud : public VerbsTest {
 protected:
  void SetUp() override {
    VerbsTest::SetUp();
    cq_ = ibv_create_cq(ctx_, 64, nullptr, nullptr, 0);
    ASSERT_NE(cq_, nullptr);
    buf_.assign(1 << 16, 0);
    mr_ = ibv_reg_mr(pd_, buf_.data(), buf_.size(), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mr_, nullptr);
    ASSERT_EQ(ibv_query_gid(ctx_, 1, 0, &gid_), 0);
  }
  void TearDown() override {
    for (ibv_ah* ah : ahs_) EXPECT_EQ(ibv_destroy_ah(ah), 0);
    for (ibv_qp* qp : qps_) EXPECT_EQ(ibv_destroy_qp(qp), 0);
    if (mr_) {
      EXPECT_EQ(ibv_dereg_mr(mr_), 0);
    }
    if (cq_) {
      EXPECT_EQ(ibv_destroy_cq(cq_), 0);
    }
    VerbsTest::TearDown();
  }

  ibv_qp* ud_qp(ibv_qp_type type = IBV_QPT_UD) {
    ibv_qp_init_attr init{};
    init.send_cq = init.recv_cq = cq_;
    init.qp_type = type;
    init.cap.max_send_wr = init.cap.max_recv_wr = 16;
    init.cap.max_send_sge = init.cap.max_recv_sge = 1;
    ibv_qp* qp = ibv_create_qp(pd_, &init);
    EXPECT_NE(qp, nullptr) << std::strerror(errno);
    if (qp) qps_.push_back(qp);
    return qp;
  }
  // ibv_ud_pingpong's sequence of modify_qp calls.
  void bring_up(ibv_qp* qp) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qkey = kQkey;
    ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
    a = {};
    a.qp_state = IBV_QPS_RTR;
    ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 1;
    ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
  }
  ibv_ah* ah_to(const ibv_gid& gid) {
    ibv_ah_attr attr{};
    attr.is_global = 1;
    attr.port_num = 1;
    attr.grh.dgid = gid;
    attr.grh.hop_limit = 64;
    ibv_ah* ah = ibv_create_ah(pd_, &attr);
    EXPECT_NE(ah, nullptr) << std::strerror(errno);
    if (ah) ahs_.push_back(ah);
    return ah;
  }
  void post_recv(ibv_qp* qp, uint64_t id, size_t off, uint32_t len) {
    ibv_sge s{reinterpret_cast<uint64_t>(buf_.data() + off), len, mr_->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = id;
    wr.sg_list = &s;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_recv(qp, &wr, &bad), 0);
  }
  int post_send(ibv_qp* qp, ibv_ah* ah, uint32_t qpn, size_t off, uint32_t len, uint64_t id,
                ibv_wr_opcode op = IBV_WR_SEND_WITH_IMM) {
    ibv_sge s{reinterpret_cast<uint64_t>(buf_.data() + off), len, mr_->lkey};
    ibv_send_wr wr{};
    wr.wr_id = id;
    wr.opcode = op;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.imm_data = htobe32(0xabcd0000u | uint32_t(id));
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = qpn;
    wr.wr.ud.remote_qkey = kQkey;
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(qp, &wr, &bad);
  }
  std::vector<ibv_wc> wait(size_t n) {
    std::vector<ibv_wc> out;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (out.size() < n && std::chrono::steady_clock::now() < deadline) {
      ibv_wc wc[8];
      const int got = ibv_poll_cq(cq_, 8, wc);
      EXPECT_GE(got, 0);
      for (int i = 0; i < got; ++i) out.push_back(wc[i]);
    }
    return out;
  }
  const ibv_wc* find_recv(const std::vector<ibv_wc>& wcs) {
    for (const ibv_wc& w : wcs)
      if (w.opcode == IBV_WC_RECV) return &w;
    return nullptr;
  }

  ibv_cq* cq_ = nullptr;
  ibv_mr* mr_ = nullptr;
  std::vector<uint8_t> buf_;
  ibv_gid gid_{};
  std::vector<ibv_qp*> qps_;
  std::vector<ibv_ah*> ahs_;
};

TEST_F(Ud, create_ah__roce_needs_a_grh) {
  ibv_ah_attr attr{};
  attr.port_num = 1;
  attr.dlid = 1;
  errno = 0;
  EXPECT_EQ(ibv_create_ah(pd_, &attr), nullptr);  // LID-only: no IP destination on RoCE
  EXPECT_EQ(errno, EINVAL);
  attr.is_global = 1;
  attr.grh.dgid = gid_;
  attr.port_num = 2;
  errno = 0;
  EXPECT_EQ(ibv_create_ah(pd_, &attr), nullptr);
  EXPECT_EQ(errno, EINVAL);
  attr.port_num = 1;
  ibv_ah* ah = ibv_create_ah(pd_, &attr);
  ASSERT_NE(ah, nullptr);
  EXPECT_EQ(ah->pd, pd_);
  EXPECT_EQ(ah->context, ctx_);
  EXPECT_EQ(ibv_dealloc_pd(pd_), EBUSY);  // the AH holds the PD
  EXPECT_EQ(ibv_destroy_ah(ah), 0);
}

TEST_F(Ud, datagram__grh_cqe_and_reply_through_ah_from_wc) {
  ibv_qp* a = ud_qp();
  ibv_qp* b = ud_qp();
  ASSERT_TRUE(a && b);
  bring_up(a);
  bring_up(b);
  ibv_ah* to_self = ah_to(gid_);
  ASSERT_NE(to_self, nullptr);
  for (size_t i = 0; i < 512; ++i) buf_[i] = uint8_t(i * 7);
  post_recv(b, 1, 4096, 40 + 512);
  ASSERT_EQ(post_send(a, to_self, b->qp_num, 0, 512, 9), 0);
  auto wcs = wait(2);
  ASSERT_EQ(wcs.size(), 2u);
  const ibv_wc* r = find_recv(wcs);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->status, IBV_WC_SUCCESS);
  EXPECT_EQ(r->qp_num, b->qp_num);
  EXPECT_EQ(r->src_qp, a->qp_num);
  EXPECT_EQ(r->byte_len, 40u + 512u);
  EXPECT_EQ(r->wc_flags & (IBV_WC_GRH | IBV_WC_WITH_IMM), unsigned(IBV_WC_GRH | IBV_WC_WITH_IMM));
  EXPECT_EQ(be32toh(r->imm_data), 0xabcd0009u);
  EXPECT_EQ(0, std::memcmp(buf_.data() + 4096 + 40, buf_.data(), 512));

  // The GRH answers back: its source is our GID, the destination GID index is 0.
  ibv_ah_attr attr;
  auto* grh = reinterpret_cast<ibv_grh*>(buf_.data() + 4096);
  ASSERT_EQ(ibv_init_ah_from_wc(ctx_, 1, const_cast<ibv_wc*>(r), grh, &attr), 0)
      << std::strerror(errno);
  EXPECT_EQ(attr.is_global, 1);
  EXPECT_EQ(attr.port_num, 1);
  EXPECT_EQ(attr.grh.sgid_index, 0);
  EXPECT_EQ(0, std::memcmp(attr.grh.dgid.raw, gid_.raw, 16));
  EXPECT_EQ(attr.grh.hop_limit, 64);

  ibv_ah* back = ibv_create_ah_from_wc(pd_, const_cast<ibv_wc*>(r), grh, 1);
  ASSERT_NE(back, nullptr) << std::strerror(errno);
  ahs_.push_back(back);
  post_recv(a, 2, 8192, 40 + 64);
  ASSERT_EQ(post_send(b, back, r->src_qp, 100, 64, 10, IBV_WR_SEND), 0);
  wcs = wait(2);
  r = find_recv(wcs);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->status, IBV_WC_SUCCESS);
  EXPECT_EQ(r->src_qp, b->qp_num);
  EXPECT_EQ(r->wc_flags & IBV_WC_WITH_IMM, 0u);
  EXPECT_EQ(0, std::memcmp(buf_.data() + 8192 + 40, buf_.data() + 100, 64));

  // Without a GRH flag the AH is local (no is_global); a GRH area of garbage is refused.
  ibv_wc plain = *r;
  plain.wc_flags = 0;
  ASSERT_EQ(ibv_init_ah_from_wc(ctx_, 1, &plain, grh, &attr), 0);
  EXPECT_EQ(attr.is_global, 0);
  std::vector<uint8_t> junk(40, 0);
  errno = 0;
  EXPECT_EQ(ibv_init_ah_from_wc(ctx_, 1, const_cast<ibv_wc*>(r),
                                reinterpret_cast<ibv_grh*>(junk.data()), &attr), -1);
  EXPECT_EQ(errno, EPROTONOSUPPORT);
}

TEST_F(Ud, wrong_qkey__dropped_and_counted_in_the_port_attribute) {
  ibv_qp* a = ud_qp();
  ibv_qp* b = ud_qp();
  ASSERT_TRUE(a && b);
  bring_up(a);
  bring_up(b);
  ibv_port_attr before{};
  ASSERT_EQ(ibv_query_port(ctx_, 1, &before), 0);
  ibv_ah* ah = ah_to(gid_);
  post_recv(b, 1, 4096, 40 + 64);
  ibv_sge s{reinterpret_cast<uint64_t>(buf_.data()), 64, mr_->lkey};
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.wr.ud.ah = ah;
  wr.wr.ud.remote_qpn = b->qp_num;
  wr.wr.ud.remote_qkey = kQkey + 1;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a, &wr, &bad), 0);
  auto wcs = wait(1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].opcode, IBV_WC_SEND);
  ibv_port_attr after{};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  do {
    ASSERT_EQ(ibv_query_port(ctx_, 1, &after), 0);
    ibv_wc wc;
    ASSERT_EQ(ibv_poll_cq(cq_, 1, &wc), 0);  // nothing arrives on b
  } while (after.qkey_viol_cntr == before.qkey_viol_cntr &&
           std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(after.qkey_viol_cntr, before.qkey_viol_cntr + 1);
}

// UC through the verbs: two UC QPs of one device, a SEND and a WRITE_WITH_IMM.
TEST_F(Ud, uc__send_and_write_with_imm) {
  ibv_qp* q[2] = {ud_qp(IBV_QPT_UC), ud_qp(IBV_QPT_UC)};
  ASSERT_TRUE(q[0] && q[1]);
  std::vector<uint8_t> target(8192, 0);
  ibv_mr* tmr = ibv_reg_mr(pd_, target.data(), target.size(),
                           IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ASSERT_NE(tmr, nullptr);
  for (int i = 0; i < 2; ++i) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    ASSERT_EQ(ibv_modify_qp(q[i], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                          IBV_QP_ACCESS_FLAGS), 0);
    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = q[1 - i]->qp_num;
    a.rq_psn = 0;
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh.dgid = gid_;
    ASSERT_EQ(ibv_modify_qp(q[i], &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                                          IBV_QP_DEST_QPN | IBV_QP_RQ_PSN), 0);
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 0;
    a.timeout = 14;  // an RC attribute: refused on UC
    EXPECT_EQ(ibv_modify_qp(q[i], &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT), EINVAL);
    ASSERT_EQ(ibv_modify_qp(q[i], &a, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
  }
  for (size_t i = 0; i < 8192; ++i) buf_[i] = uint8_t(i * 13 + 1);
  post_recv(q[1], 1, 16384, 4096);
  post_recv(q[1], 2, 20480, 16);
  ibv_sge s1{reinterpret_cast<uint64_t>(buf_.data()), 2500, mr_->lkey};
  ibv_sge s2{reinterpret_cast<uint64_t>(buf_.data() + 2500), 3000, mr_->lkey};
  ibv_send_wr w2{};
  w2.wr_id = 2;
  w2.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  w2.send_flags = IBV_SEND_SIGNALED;
  w2.sg_list = &s2;
  w2.num_sge = 1;
  w2.imm_data = htobe32(77);
  w2.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(target.data());
  w2.wr.rdma.rkey = tmr->rkey;
  ibv_send_wr w1{};
  w1.wr_id = 1;
  w1.opcode = IBV_WR_SEND;
  w1.send_flags = IBV_SEND_SIGNALED;
  w1.sg_list = &s1;
  w1.num_sge = 1;
  w1.next = &w2;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(q[0], &w1, &bad), 0);
  auto wcs = wait(4);
  ASSERT_EQ(wcs.size(), 4u);
  int recvs = 0;
  for (const ibv_wc& w : wcs) {
    EXPECT_EQ(w.status, IBV_WC_SUCCESS);
    if (w.opcode == IBV_WC_RECV) {
      ++recvs;
      EXPECT_EQ(w.byte_len, 2500u);
      EXPECT_EQ(w.src_qp, q[0]->qp_num);
    } else if (w.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
      ++recvs;
      EXPECT_EQ(w.byte_len, 3000u);
      EXPECT_EQ(be32toh(w.imm_data), 77u);
      EXPECT_TRUE(w.wc_flags & IBV_WC_WITH_IMM);
    }
  }
  EXPECT_EQ(recvs, 2);
  EXPECT_EQ(0, std::memcmp(buf_.data() + 16384, buf_.data(), 2500));
  EXPECT_EQ(0, std::memcmp(target.data(), buf_.data() + 2500, 3000));
  // READ and atomics are not UC operations.
  ibv_send_wr rd = w2;
  rd.opcode = IBV_WR_RDMA_READ;
  rd.next = nullptr;
  EXPECT_EQ(ibv_post_send(q[0], &rd, &bad), EINVAL);
  EXPECT_EQ(bad, &rd);
  for (ibv_qp* qp : qps_) EXPECT_EQ(ibv_destroy_qp(qp), 0);
  qps_.clear();
  EXPECT_EQ(ibv_dereg_mr(tmr), 0);
}

TEST_F(Ud, post_send__errors) {
  ibv_qp* a = ud_qp();
  ASSERT_NE(a, nullptr);
  bring_up(a);
  ibv_ah* ah = ah_to(gid_);
  EXPECT_EQ(post_send(a, ah, 0x11, 0, 4097, 1), EINVAL);  // longer than the 4096 port MTU
  EXPECT_EQ(post_send(a, ah, 0x11, 0, 8, 1, IBV_WR_RDMA_WRITE), EINVAL);
  EXPECT_EQ(post_send(a, nullptr, 0x11, 0, 8, 1), EINVAL);
}

TEST_F(Ud, multicast__attach_detach_and_delivery_on_the_device) {
  ibv_qp* a = ud_qp();
  ibv_qp* b = ud_qp();
  ibv_qp* rc = ud_qp(IBV_QPT_RC);
  ASSERT_TRUE(a && b && rc);
  bring_up(a);
  bring_up(b);
  ibv_gid group{};
  group.raw[10] = group.raw[11] = 0xff;
  group.raw[12] = 239;
  group.raw[13] = 7;
  group.raw[15] = 1;
  EXPECT_EQ(ibv_attach_mcast(rc, &group, 0), EINVAL);
  EXPECT_EQ(ibv_attach_mcast(b, &gid_, 0), EINVAL);  // a unicast GID
  ASSERT_EQ(ibv_attach_mcast(b, &group, 0), 0);
  ibv_ah* to_group = ah_to(group);
  post_recv(b, 1, 4096, 40 + 128);
  ASSERT_EQ(post_send(a, to_group, 0xffffff, 0, 128, 3), 0);
  auto wcs = wait(2);
  const ibv_wc* r = find_recv(wcs);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->status, IBV_WC_SUCCESS);
  EXPECT_EQ(r->src_qp, a->qp_num);
  EXPECT_EQ(r->byte_len, 40u + 128u);
  // A reply address cannot be made from a multicast destination.
  ibv_ah_attr attr;
  errno = 0;
  EXPECT_EQ(ibv_init_ah_from_wc(ctx_, 1, const_cast<ibv_wc*>(r),
                                reinterpret_cast<ibv_grh*>(buf_.data() + 4096), &attr), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ibv_detach_mcast(b, &group, 0), 0);
  EXPECT_EQ(ibv_detach_mcast(b, &group, 0), EINVAL);
}

TEST_F(Ud, query__device_limits_and_qp_attributes) {
  ibv_device_attr dev{};
  ASSERT_EQ(ibv_query_device(ctx_, &dev), 0);
  EXPECT_GT(dev.max_ah, 0);
  EXPECT_GT(dev.max_mcast_grp, 0);
  EXPECT_GT(dev.max_mcast_qp_attach, 0);
  EXPECT_EQ(dev.max_total_mcast_qp_attach, dev.max_mcast_grp * dev.max_mcast_qp_attach);
  ibv_qp* a = ud_qp();
  ASSERT_NE(a, nullptr);
  bring_up(a);
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(ibv_query_qp(a, &attr, IBV_QP_QKEY | IBV_QP_STATE, &init), 0);
  EXPECT_EQ(attr.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(attr.qkey, kQkey);
  EXPECT_EQ(init.qp_type, IBV_QPT_UD);
  ibv_qp* uc = ud_qp(IBV_QPT_UC);
  ASSERT_NE(uc, nullptr);
  ibv_qp_attr bad{};
  bad.qp_state = IBV_QPS_INIT;
  bad.port_num = 1;
  bad.qkey = 1;  // UC takes access flags, not a Q_Key
  EXPECT_EQ(ibv_modify_qp(uc, &bad, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY),
            EINVAL);
}

}  // namespace
}  // namespace vrnic::abi::test
