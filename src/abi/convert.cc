// Pure conversions between rdma-core structs and engine value types.
#include "abi/convert.h"

#include "abi/objects.h"

#include <cerrno>
#include <cstddef>
#include <cstring>

namespace vrnic::abi {

// The engine's enums use the IBV_* numeric values (engine/types.h); these pin that down.
static_assert(sizeof(engine::Sge) == sizeof(ibv_sge));
static_assert(offsetof(engine::Sge, addr) == offsetof(ibv_sge, addr));
static_assert(offsetof(engine::Sge, length) == offsetof(ibv_sge, length));
static_assert(offsetof(engine::Sge, lkey) == offsetof(ibv_sge, lkey));
static_assert(int(engine::QpState::kErr) == IBV_QPS_ERR);
static_assert(int(engine::QpType::kUd) == IBV_QPT_UD);
static_assert(int(engine::WrOpcode::kSendWithInv) == IBV_WR_SEND_WITH_INV);
static_assert(int(engine::WrOpcode::kAtomicWrite) == IBV_WR_ATOMIC_WRITE);
static_assert(int(engine::WcOpcode::kAtomicWrite) == IBV_WC_ATOMIC_WRITE);
static_assert(int(engine::WcOpcode::kRecvRdmaWithImm) == IBV_WC_RECV_RDMA_WITH_IMM);
static_assert(int(engine::WcStatus::kGeneralErr) == IBV_WC_GENERAL_ERR);
static_assert(uint32_t(engine::kAttrDestQpn) == IBV_QP_DEST_QPN);
static_assert(uint32_t(engine::kSendInline) == IBV_SEND_INLINE);
static_assert(uint32_t(engine::kWcWithInv) == IBV_WC_WITH_INV);
static_assert(uint32_t(engine::kRelaxedOrdering) == IBV_ACCESS_RELAXED_ORDERING);

namespace {

constexpr uint32_t kKnownAccess = engine::kLocalWrite | engine::kRemoteWrite |
                                  engine::kRemoteRead | engine::kRemoteAtomic |
                                  engine::kMwBind | engine::kZeroBased | engine::kOnDemand |
                                  engine::kHugetlb | engine::kRelaxedOrdering;

engine::Gid to_engine_gid(const ibv_gid& g) {
  engine::Gid out;
  std::memcpy(out.raw.data(), g.raw, sizeof(g.raw));
  return out;
}

}  // namespace

int to_engine_access(unsigned int ibv_access, uint32_t& out) {
  const uint32_t mandatory = ibv_access & ~uint32_t(IBV_ACCESS_OPTIONAL_RANGE);
  if (mandatory & ~kKnownAccess) return EINVAL;
  out = ibv_access & kKnownAccess;
  return 0;
}

engine::QpCap to_engine_qp_cap(const ibv_qp_cap& in) {
  engine::QpCap c;
  c.max_send_wr = in.max_send_wr;
  c.max_recv_wr = in.max_recv_wr;
  c.max_send_sge = in.max_send_sge;
  c.max_recv_sge = in.max_recv_sge;
  c.max_inline_data = in.max_inline_data;
  return c;
}

void to_ibv_qp_cap(const engine::QpCap& in, ibv_qp_cap& out) {
  out.max_send_wr = in.max_send_wr;
  out.max_recv_wr = in.max_recv_wr;
  out.max_send_sge = in.max_send_sge;
  out.max_recv_sge = in.max_recv_sge;
  out.max_inline_data = in.max_inline_data;
}

int to_engine_qp_attr(const ibv_qp_attr& in, int attr_mask, engine::QpAttr& out) {
  const uint32_t m = uint32_t(attr_mask);
  if (m & IBV_QP_STATE) out.qp_state = engine::QpState(in.qp_state);
  if (m & IBV_QP_CUR_STATE) out.cur_qp_state = engine::QpState(in.cur_qp_state);
  if (m & IBV_QP_ACCESS_FLAGS) out.qp_access_flags = in.qp_access_flags;
  if (m & IBV_QP_PKEY_INDEX) out.pkey_index = in.pkey_index;
  if (m & IBV_QP_PORT) out.port_num = in.port_num;
  if (m & IBV_QP_QKEY) out.qkey = in.qkey;
  if (m & IBV_QP_AV) {
    // RoCE: every packet carries a GRH (or IP header) and LIDs mean nothing (IBA annexes A16, A17).
    if (!in.ah_attr.is_global) return EINVAL;
    out.ah.dgid = to_engine_gid(in.ah_attr.grh.dgid);
    out.ah.sgid_index = in.ah_attr.grh.sgid_index;
    out.ah.hop_limit = in.ah_attr.grh.hop_limit;
    out.ah.traffic_class = in.ah_attr.grh.traffic_class;
    out.ah.flow_label = in.ah_attr.grh.flow_label;
    out.ah.sl = in.ah_attr.sl;
    out.ah.port_num = in.ah_attr.port_num;
  }
  if (m & IBV_QP_PATH_MTU) out.path_mtu = uint8_t(in.path_mtu);
  if (m & IBV_QP_TIMEOUT) out.timeout = in.timeout;
  if (m & IBV_QP_RETRY_CNT) out.retry_cnt = in.retry_cnt;
  if (m & IBV_QP_RNR_RETRY) out.rnr_retry = in.rnr_retry;
  if (m & IBV_QP_RQ_PSN) out.rq_psn = in.rq_psn;
  if (m & IBV_QP_MAX_QP_RD_ATOMIC) out.max_rd_atomic = in.max_rd_atomic;
  if (m & IBV_QP_MIN_RNR_TIMER) out.min_rnr_timer = in.min_rnr_timer;
  if (m & IBV_QP_SQ_PSN) out.sq_psn = in.sq_psn;
  if (m & IBV_QP_MAX_DEST_RD_ATOMIC) out.max_dest_rd_atomic = in.max_dest_rd_atomic;
  if (m & IBV_QP_CAP) out.cap = to_engine_qp_cap(in.cap);
  if (m & IBV_QP_DEST_QPN) out.dest_qp_num = in.dest_qp_num;
  return 0;
}

void to_ibv_qp_attr(const engine::QpAttr& in, ibv_qp_attr& out) {
  std::memset(&out, 0, sizeof(out));
  out.qp_state = ibv_qp_state(in.qp_state);
  out.cur_qp_state = ibv_qp_state(in.cur_qp_state);
  out.path_mtu = ibv_mtu(in.path_mtu);
  out.path_mig_state = IBV_MIG_MIGRATED;
  out.qkey = in.qkey;
  out.rq_psn = in.rq_psn;
  out.sq_psn = in.sq_psn;
  out.dest_qp_num = in.dest_qp_num;
  out.qp_access_flags = in.qp_access_flags;
  to_ibv_qp_cap(in.cap, out.cap);
  std::memcpy(out.ah_attr.grh.dgid.raw, in.ah.dgid.raw.data(), 16);
  out.ah_attr.grh.sgid_index = in.ah.sgid_index;
  out.ah_attr.grh.hop_limit = in.ah.hop_limit;
  out.ah_attr.grh.traffic_class = in.ah.traffic_class;
  out.ah_attr.grh.flow_label = in.ah.flow_label;
  out.ah_attr.sl = in.ah.sl;
  out.ah_attr.is_global = 1;
  out.ah_attr.port_num = in.ah.port_num;
  out.pkey_index = in.pkey_index;
  out.en_sqd_async_notify = 0;
  out.sq_draining = in.sq_draining ? 1 : 0;
  out.max_rd_atomic = in.max_rd_atomic;
  out.max_dest_rd_atomic = in.max_dest_rd_atomic;
  out.min_rnr_timer = in.min_rnr_timer;
  out.port_num = in.port_num;
  out.timeout = in.timeout;
  out.retry_cnt = in.retry_cnt;
  out.rnr_retry = in.rnr_retry;
}

int to_engine_send_wr(const ibv_send_wr& in, engine::SendWr& out) {
  // IBV_WR_ATOMIC_WRITE is posted through ibv_wr_atomic_write only: ibv_send_wr has no field
  // for its 8 bytes (rxe would send whatever its WQE held there).
  if (uint32_t(in.opcode) > uint32_t(engine::WrOpcode::kSendWithInv)) return EINVAL;
  out = engine::SendWr{};
  out.wr_id = in.wr_id;
  out.opcode = engine::WrOpcode(in.opcode);
  out.send_flags = in.send_flags;
  out.sg_list = reinterpret_cast<const engine::Sge*>(in.sg_list);
  out.num_sge = in.num_sge < 0 ? 0 : uint32_t(in.num_sge);
  if (in.num_sge < 0) return EINVAL;
  switch (in.opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_RDMA_READ:
      out.remote_addr = in.wr.rdma.remote_addr;
      out.rkey = in.wr.rdma.rkey;
      break;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      out.remote_addr = in.wr.atomic.remote_addr;
      out.rkey = in.wr.atomic.rkey;
      out.compare_add = in.wr.atomic.compare_add;
      out.swap = in.wr.atomic.swap;
      break;
    case IBV_WR_SEND_WITH_INV:
    case IBV_WR_LOCAL_INV:
      out.invalidate_rkey = in.invalidate_rkey;
      break;
    case IBV_WR_BIND_MW: {
      const ibv_mw_bind_info& bi = in.bind_mw.bind_info;
      out.bind.mw = in.bind_mw.mw ? to_mw(in.bind_mw.mw)->mw : nullptr;
      out.bind.new_rkey = in.bind_mw.rkey;
      out.bind.mr = bi.mr ? to_mr(bi.mr)->mr : nullptr;
      out.bind.addr = bi.addr;
      out.bind.length = bi.length;
      out.bind.access = bi.mw_access_flags;
      break;
    }
    default:
      break;
  }
  if (in.opcode == IBV_WR_RDMA_WRITE_WITH_IMM || in.opcode == IBV_WR_SEND_WITH_IMM) {
    out.imm_data = in.imm_data;
  }
  // UD fields (ah, remote_qpn, remote_qkey) share the wr union; post.cc reads them for UD QPs.
  return 0;
}

void to_engine_recv_wr(const ibv_recv_wr& in, engine::RecvWr& out) {
  out.wr_id = in.wr_id;
  out.sg_list = reinterpret_cast<const engine::Sge*>(in.sg_list);
  out.num_sge = in.num_sge < 0 ? 0 : uint32_t(in.num_sge);
}

void to_ibv_wc(const engine::WorkCompletion& in, ibv_wc& out) {
  out.wr_id = in.wr_id;
  out.status = ibv_wc_status(in.status);
  out.opcode = ibv_wc_opcode(in.opcode);
  out.vendor_err = in.vendor_err;
  out.byte_len = in.byte_len;
  out.imm_data = in.imm_data;  // also invalidated_rkey (same union)
  out.qp_num = in.qp_num;
  out.src_qp = in.src_qp;
  out.wc_flags = in.wc_flags;
  out.pkey_index = in.pkey_index;
  out.slid = in.slid;
  out.sl = in.sl;
  out.dlid_path_bits = in.dlid_path_bits;
}

}  // namespace vrnic::abi
