// Tests of the rdma-core <-> engine struct conversions.
#include "abi/convert.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

namespace vrnic::abi {
namespace {

TEST(ToEngineQpAttr, rtr__copies_only_masked_fields) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_4096;
  a.dest_qp_num = 0x123456;
  a.rq_psn = 0xabcdef;
  a.max_dest_rd_atomic = 4;
  a.min_rnr_timer = 12;
  a.sq_psn = 77;  // not in the mask
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid.raw[15] = 9;
  a.ah_attr.grh.hop_limit = 1;
  a.ah_attr.grh.sgid_index = 0;
  a.ah_attr.port_num = 1;
  const int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                   IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  engine::QpAttr out;
  ASSERT_EQ(to_engine_qp_attr(a, mask, out), 0);
  EXPECT_EQ(out.qp_state, engine::QpState::kRtr);
  EXPECT_EQ(out.path_mtu, 5);
  EXPECT_EQ(out.dest_qp_num, 0x123456u);
  EXPECT_EQ(out.rq_psn, 0xabcdefu);
  EXPECT_EQ(out.max_dest_rd_atomic, 4);
  EXPECT_EQ(out.min_rnr_timer, 12);
  EXPECT_EQ(out.sq_psn, 0u);
  EXPECT_EQ(out.ah.dgid.raw[15], 9);
  EXPECT_EQ(out.ah.hop_limit, 1);
}

TEST(ToEngineQpAttr, av_without_grh__einval) {
  ibv_qp_attr a{};
  a.ah_attr.is_global = 0;
  a.ah_attr.dlid = 5;
  engine::QpAttr out;
  EXPECT_EQ(to_engine_qp_attr(a, IBV_QP_AV, out), EINVAL);
}

TEST(ToIbvQpAttr, round_trip__keeps_values) {
  engine::QpAttr e;
  e.qp_state = engine::QpState::kRts;
  e.sq_psn = 0xfffffe;
  e.timeout = 14;
  e.retry_cnt = 7;
  e.rnr_retry = 7;
  e.max_rd_atomic = 16;
  e.cap.max_inline_data = 256;
  e.ah.dgid.raw[10] = e.ah.dgid.raw[11] = 0xff;
  ibv_qp_attr a;
  to_ibv_qp_attr(e, a);
  EXPECT_EQ(a.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(a.sq_psn, 0xfffffeu);
  EXPECT_EQ(a.timeout, 14);
  EXPECT_EQ(a.retry_cnt, 7);
  EXPECT_EQ(a.rnr_retry, 7);
  EXPECT_EQ(a.max_rd_atomic, 16);
  EXPECT_EQ(a.cap.max_inline_data, 256u);
  EXPECT_EQ(a.ah_attr.is_global, 1);
  EXPECT_EQ(a.ah_attr.grh.dgid.raw[11], 0xff);
}

TEST(ToEngineSendWr, write__rdma_fields_and_sges_alias) {
  ibv_sge sge[2] = {{0x1000, 10, 0x11}, {0x2000, 20, 0x22}};
  ibv_send_wr w{};
  w.wr_id = 42;
  w.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  w.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
  w.sg_list = sge;
  w.num_sge = 2;
  w.imm_data = 0xdeadbeef;
  w.wr.rdma.remote_addr = 0x7000;
  w.wr.rdma.rkey = 0x99;
  engine::SendWr out;
  ASSERT_EQ(to_engine_send_wr(w, out), 0);
  EXPECT_EQ(out.wr_id, 42u);
  EXPECT_EQ(out.opcode, engine::WrOpcode::kRdmaWriteWithImm);
  EXPECT_EQ(out.send_flags, uint32_t(engine::kSendSignaled | engine::kSendInline));
  EXPECT_EQ(out.num_sge, 2u);
  EXPECT_EQ(out.sg_list[1].addr, 0x2000u);
  EXPECT_EQ(out.sg_list[1].length, 20u);
  EXPECT_EQ(out.sg_list[1].lkey, 0x22u);
  EXPECT_EQ(out.imm_data, 0xdeadbeefu);
  EXPECT_EQ(out.remote_addr, 0x7000u);
  EXPECT_EQ(out.rkey, 0x99u);
}

TEST(ToEngineSendWr, atomic__operands) {
  ibv_send_wr w{};
  w.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
  w.wr.atomic.remote_addr = 0x1F270;
  w.wr.atomic.rkey = 7;
  w.wr.atomic.compare_add = 0x7776757473727170;
  w.wr.atomic.swap = 0x036328FE883A1230;
  engine::SendWr out;
  ASSERT_EQ(to_engine_send_wr(w, out), 0);
  EXPECT_EQ(out.opcode, engine::WrOpcode::kAtomicCmpSwp);
  EXPECT_EQ(out.remote_addr, 0x1F270u);
  EXPECT_EQ(out.rkey, 7u);
  EXPECT_EQ(out.compare_add, 0x7776757473727170u);
  EXPECT_EQ(out.swap, 0x036328FE883A1230u);
}

TEST(ToEngineSendWr, unknown_opcode__einval) {
  ibv_send_wr w{};
  w.opcode = IBV_WR_TSO;
  engine::SendWr out;
  EXPECT_EQ(to_engine_send_wr(w, out), EINVAL);
  w.opcode = IBV_WR_SEND;
  w.num_sge = -1;
  EXPECT_EQ(to_engine_send_wr(w, out), EINVAL);
}

TEST(ToIbvWc, recv_with_imm__all_fields) {
  engine::WorkCompletion e;
  e.wr_id = 0x31415926;
  e.status = engine::WcStatus::kRemAccessErr;
  e.opcode = engine::WcOpcode::kRecvRdmaWithImm;
  e.vendor_err = 3;
  e.byte_len = 4096;
  e.imm_data = 0x01020304;
  e.qp_num = 17;
  e.src_qp = 18;
  e.wc_flags = engine::kWcWithImm | engine::kWcGrh;
  ibv_wc w;
  std::memset(&w, 0xff, sizeof(w));
  to_ibv_wc(e, w);
  EXPECT_EQ(w.wr_id, 0x31415926u);
  EXPECT_EQ(w.status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(w.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(w.vendor_err, 3u);
  EXPECT_EQ(w.byte_len, 4096u);
  EXPECT_EQ(w.imm_data, 0x01020304u);
  EXPECT_EQ(w.qp_num, 17u);
  EXPECT_EQ(w.src_qp, 18u);
  EXPECT_EQ(w.wc_flags, unsigned(IBV_WC_WITH_IMM | IBV_WC_GRH));
  EXPECT_EQ(w.pkey_index, 0);
}

TEST(ToEngineAccess, unknown_bits__optional_dropped_mandatory_einval) {
  uint32_t out = 0;
  ASSERT_EQ(to_engine_access(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC |
                                 IBV_ACCESS_RELAXED_ORDERING | (1u << 21),
                             out),
            0);
  EXPECT_EQ(out, uint32_t(engine::kLocalWrite | engine::kRemoteAtomic |
                          engine::kRelaxedOrdering));
  EXPECT_EQ(to_engine_access(1u << 15, out), EINVAL);
}

}  // namespace
}  // namespace vrnic::abi
