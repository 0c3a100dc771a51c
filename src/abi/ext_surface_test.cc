// The extended verbs surface rxe and mlx5 accept: every ibv_create_cq_ex wc_flags combination,
// completion timestamps that convert with hca_core_clock and ibv_query_rt_values_ex, every
// send-ops flag rxe accepts, ATOMIC WRITE through ibv_wr_atomic_write, and the capability
// bits ibv_query_device_ex reports for them and for on-demand paging.
#include <cstring>
#include <vector>

#include "abi/verbs_ext_test_support.h"

namespace vrnic::abi::test {
namespace {

// IB_UVERBS_DEVICE_ATOMIC_WRITE (rdma-core v44 kernel-headers/rdma/ib_user_verbs.h), which
// rxe sets in device_cap_flags_ex; v44's verbs.h names no IBV_ constant for it.
constexpr uint64_t kDeviceAtomicWrite = 1ull << 40;

// rxe's send-ops sets (providers/rxe/rxe.c, RXE_SUP_*_QP_SEND_OPS_FLAGS in v44).
constexpr uint64_t kRxeRcOps =
    IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
    IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
    IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW |
    IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_ATOMIC_WRITE;
constexpr uint64_t kRxeUcOps = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                               IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
                               IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV;
constexpr uint64_t kRxeUdOps = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;

// Whether the ibv_qp_ex entry of each send-ops flag is installed.
bool installed(const ibv_qp_ex* x, uint64_t flag) {
  switch (flag) {
    case IBV_QP_EX_WITH_RDMA_WRITE: return x->wr_rdma_write != nullptr;
    case IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM: return x->wr_rdma_write_imm != nullptr;
    case IBV_QP_EX_WITH_SEND: return x->wr_send != nullptr;
    case IBV_QP_EX_WITH_SEND_WITH_IMM: return x->wr_send_imm != nullptr;
    case IBV_QP_EX_WITH_RDMA_READ: return x->wr_rdma_read != nullptr;
    case IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP: return x->wr_atomic_cmp_swp != nullptr;
    case IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD: return x->wr_atomic_fetch_add != nullptr;
    case IBV_QP_EX_WITH_LOCAL_INV: return x->wr_local_inv != nullptr;
    case IBV_QP_EX_WITH_BIND_MW: return x->wr_bind_mw != nullptr;
    case IBV_QP_EX_WITH_SEND_WITH_INV: return x->wr_send_inv != nullptr;
    case IBV_QP_EX_WITH_ATOMIC_WRITE: return x->wr_atomic_write != nullptr;
    default: return false;
  }
}

// mlx5 accepts any subset of IBV_CREATE_CQ_SUP_WC_FLAGS (rxe the standard ones): all 4096
// are created, with exactly the readers asked for.
TEST_F(Ext, create_cq_ex__every_wc_flags_combination_mlx5_or_rxe_accepts) {
  const uint64_t all = IBV_CREATE_CQ_SUP_WC_FLAGS;
  ASSERT_EQ(all, (uint64_t(1) << 12) - 1);
  for (uint64_t f = 0; f <= all; ++f) {
    ibv_cq_init_attr_ex a{};
    a.cqe = 4;
    a.wc_flags = f;
    ibv_cq_ex* cx = ibv_create_cq_ex(ctx_, &a);
    ASSERT_NE(cx, nullptr) << "wc_flags 0x" << std::hex << f << " errno " << errno;
    const std::pair<uint64_t, bool> readers[] = {
        {IBV_WC_EX_WITH_BYTE_LEN, cx->read_byte_len != nullptr},
        {IBV_WC_EX_WITH_IMM, cx->read_imm_data != nullptr},
        {IBV_WC_EX_WITH_QP_NUM, cx->read_qp_num != nullptr},
        {IBV_WC_EX_WITH_SRC_QP, cx->read_src_qp != nullptr},
        {IBV_WC_EX_WITH_SLID, cx->read_slid != nullptr},
        {IBV_WC_EX_WITH_SL, cx->read_sl != nullptr},
        {IBV_WC_EX_WITH_DLID_PATH_BITS, cx->read_dlid_path_bits != nullptr},
        {IBV_WC_EX_WITH_COMPLETION_TIMESTAMP, cx->read_completion_ts != nullptr},
        {IBV_WC_EX_WITH_CVLAN, cx->read_cvlan != nullptr},
        {IBV_WC_EX_WITH_FLOW_TAG, cx->read_flow_tag != nullptr},
        {IBV_WC_EX_WITH_TM_INFO, cx->read_tm_info != nullptr},
        {IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK,
         cx->read_completion_wallclock_ns != nullptr},
    };
    for (auto [flag, set] : readers) ASSERT_EQ(set, (f & flag) != 0) << std::hex << f << " " << flag;
    ASSERT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cx)), 0);
  }
}

// A completion's timestamp converts to ns with hca_core_clock (kHz) and lies between two
// ibv_query_rt_values_ex readings, which are laid out as mlx5's (tv_sec 0, the counter in
// tv_nsec); its wall-clock time lies between the CLOCK_REALTIME readings around it; CVLAN,
// flow tag and tag-matching info read as for a CQE nothing of theirs touched.
TEST_F(Ext, completion_timestamp__converts_with_hca_core_clock_and_rt_values) {
  ibv_device_attr_ex dev{};
  ASSERT_EQ(ibv_query_device_ex(ctx_, nullptr, &dev), 0);
  ASSERT_NE(dev.hca_core_clock, 0u);
  ibv_cq* cq = make_cq(true, 16, IBV_CREATE_CQ_SUP_WC_FLAGS);
  ASSERT_NE(cq, nullptr);
  ibv_qp* qa = make_qp(cq, false);
  ibv_qp* qb = make_qp(cq, false);
  ASSERT_TRUE(qa && qb);
  connect(qa, qb->qp_num);
  connect(qb, qa->qp_num);
  std::vector<uint8_t> buf(256, 7);
  ibv_mr* mr = ibv_reg_mr(pd_, buf.data(), buf.size(),
                          IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ASSERT_NE(mr, nullptr);
  ibv_values_ex v0{}, v1{};
  v0.comp_mask = v1.comp_mask = IBV_VALUES_MASK_RAW_CLOCK;
  const uint64_t wall0 = now_ns(CLOCK_REALTIME);
  ASSERT_EQ(ibv_query_rt_values_ex(ctx_, &v0), 0);
  EXPECT_EQ(v0.comp_mask, uint32_t(IBV_VALUES_MASK_RAW_CLOCK));
  EXPECT_EQ(v0.raw_clock.tv_sec, 0);
  ibv_sge s{reinterpret_cast<uint64_t>(buf.data()), 64, mr->lkey};
  ibv_send_wr w{}, *bad = nullptr;
  w.opcode = IBV_WR_RDMA_WRITE;
  w.send_flags = IBV_SEND_SIGNALED;
  w.sg_list = &s;
  w.num_sge = 1;
  w.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(buf.data() + 128);
  w.wr.rdma.rkey = mr->rkey;
  ASSERT_EQ(ibv_post_send(qa, &w, &bad), 0);
  ibv_cq_ex* cx = ibv_cq_to_cq_ex(cq);
  ibv_poll_cq_attr pa{};
  int ret;
  while ((ret = ibv_start_poll(cx, &pa)) == ENOENT) {}
  ASSERT_EQ(ret, 0);
  EXPECT_EQ(cx->status, IBV_WC_SUCCESS);
  const uint64_t ts = ibv_wc_read_completion_ts(cx);
  const uint64_t wall = ibv_wc_read_completion_wallclock_ns(cx);
  EXPECT_EQ(ibv_wc_read_cvlan(cx), 0);
  EXPECT_EQ(ibv_wc_read_flow_tag(cx), 0u);
  ibv_wc_tm_info tm;
  std::memset(&tm, 0xff, sizeof tm);
  ibv_wc_read_tm_info(cx, &tm);
  EXPECT_EQ(tm.tag, 0u);
  EXPECT_EQ(tm.priv, 0u);
  ibv_end_poll(cx);
  ASSERT_EQ(ibv_query_rt_values_ex(ctx_, &v1), 0);
  const uint64_t wall1 = now_ns(CLOCK_REALTIME);
  const uint64_t raw0 = uint64_t(v0.raw_clock.tv_nsec), raw1 = uint64_t(v1.raw_clock.tv_nsec);
  EXPECT_LE(raw0, ts);
  EXPECT_LE(ts, raw1);
  // ns = ticks * 10^6 / hca_core_clock[kHz]: the span to the second reading in ns.
  const double ns = double(raw1 - ts) * 1e6 / double(dev.hca_core_clock);
  EXPECT_GE(ns, 0.0);
  EXPECT_LT(ns, 5e9);
  EXPECT_LE(wall0, wall);
  EXPECT_LE(wall, wall1);
  EXPECT_EQ(ibv_destroy_qp(qa), 0);
  EXPECT_EQ(ibv_destroy_qp(qb), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
}

// Every send-ops flag rxe accepts, each alone and all of its QP type's together, installs its
// ibv_wr_* entry and no other.
TEST_F(Ext, create_qp_ex__every_send_ops_flag_rxe_accepts) {
  ibv_cq* cq = make_cq(false);
  ASSERT_NE(cq, nullptr);
  for (auto [type, ops] : {std::pair{IBV_QPT_RC, kRxeRcOps}, std::pair{IBV_QPT_UC, kRxeUcOps},
                           std::pair{IBV_QPT_UD, kRxeUdOps}}) {
    std::vector<uint64_t> sets{ops};
    for (uint64_t bit = 1; bit <= ops; bit <<= 1)
      if (ops & bit) sets.push_back(bit);
    for (uint64_t set : sets) {
      ibv_qp_init_attr_ex init{};
      init.send_cq = init.recv_cq = cq;
      init.qp_type = type;
      init.cap.max_send_wr = init.cap.max_recv_wr = 4;
      init.cap.max_send_sge = init.cap.max_recv_sge = 1;
      init.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
      init.pd = pd_;
      init.send_ops_flags = set;
      ibv_qp* qp = ibv_create_qp_ex(ctx_, &init);
      ASSERT_NE(qp, nullptr) << "type " << type << " ops 0x" << std::hex << set;
      ibv_qp_ex* x = ibv_qp_to_qp_ex(qp);
      ASSERT_NE(x, nullptr);
      for (uint64_t bit = 1; bit <= kRxeRcOps; bit <<= 1)
        if (kRxeRcOps & bit) EXPECT_EQ(installed(x, bit), (set & bit) != 0) << std::hex << bit;
      EXPECT_EQ(ibv_destroy_qp(qp), 0);
    }
  }
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
}

// ibv_wr_atomic_write: the 8 bytes are taken when the call is made, land at the responder as
// one access, and complete as IBV_WC_ATOMIC_WRITE with byte_len 8. ibv_post_send has no field
// for the bytes: IBV_WR_ATOMIC_WRITE through it is EINVAL.
TEST_F(Ext, wr_atomic_write__eight_bytes_land_and_complete) {
  ibv_device_attr_ex dev{};
  ASSERT_EQ(ibv_query_device_ex(ctx_, nullptr, &dev), 0);
  EXPECT_EQ(dev.device_cap_flags_ex & kDeviceAtomicWrite, kDeviceAtomicWrite);
  ibv_cq* cq = make_cq(false);
  ibv_qp* qa = make_qp(cq, true, IBV_QP_EX_WITH_ATOMIC_WRITE | IBV_QP_EX_WITH_RDMA_WRITE);
  ibv_qp* qb = make_qp(cq, false);
  ASSERT_TRUE(cq && qa && qb);
  connect(qa, qb->qp_num);
  connect(qb, qa->qp_num);
  alignas(8) uint8_t target[64];
  std::memset(target, 0xcc, sizeof target);
  ibv_mr* mr = ibv_reg_mr(pd_, target, sizeof target,
                          IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ASSERT_NE(mr, nullptr);
  ibv_qp_ex* x = ibv_qp_to_qp_ex(qa);
  uint8_t value[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  ibv_wr_start(x);
  x->wr_id = 44;
  x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_atomic_write(x, mr->rkey, reinterpret_cast<uint64_t>(target + 16), value);
  value[0] = 0x99;  // after the call: not what is sent
  ASSERT_EQ(ibv_wr_complete(x), 0);
  auto wcs = poll(cq, 1, false);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wcs[0].opcode, IBV_WC_ATOMIC_WRITE);
  EXPECT_EQ(wcs[0].byte_len, 8u);
  EXPECT_EQ(wcs[0].wr_id, 44u);
  const uint8_t want[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_EQ(std::memcmp(target + 16, want, 8), 0);
  EXPECT_EQ(target[15], 0xcc);
  EXPECT_EQ(target[24], 0xcc);
  ibv_send_wr w{}, *bad = nullptr;
  w.opcode = IBV_WR_ATOMIC_WRITE;
  w.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(target);
  w.wr.rdma.rkey = mr->rkey;
  EXPECT_EQ(ibv_post_send(qa, &w, &bad), EINVAL);
  EXPECT_EQ(bad, &w);
  EXPECT_EQ(ibv_destroy_qp(qa), 0);
  EXPECT_EQ(ibv_destroy_qp(qb), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
}

// ODP capabilities as the engine honours them per transport (odp_transport_test.cc proves
// each bit): RC all, UC no READ / atomics, UD SENDs and receives, XRC no plain receive queue.
TEST_F(Ext, query_device_ex__odp_caps_per_transport) {
  ibv_device_attr_ex ex{};
  ASSERT_EQ(ibv_query_device_ex(ctx_, nullptr, &ex), 0);
  const uint32_t s = IBV_ODP_SUPPORT_SEND, r = IBV_ODP_SUPPORT_RECV, w = IBV_ODP_SUPPORT_WRITE,
                 rd = IBV_ODP_SUPPORT_READ, at = IBV_ODP_SUPPORT_ATOMIC,
                 srq = IBV_ODP_SUPPORT_SRQ_RECV;
  EXPECT_EQ(ex.odp_caps.general_caps, uint64_t(IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT));
  EXPECT_EQ(ex.odp_caps.per_transport_caps.rc_odp_caps, s | r | w | rd | at | srq);
  EXPECT_EQ(ex.odp_caps.per_transport_caps.uc_odp_caps, s | r | w | srq);
  EXPECT_EQ(ex.odp_caps.per_transport_caps.ud_odp_caps, s | r | srq);
  EXPECT_EQ(ex.xrc_odp_caps, s | w | rd | at | srq);
}

}  // namespace
}  // namespace vrnic::abi::test
