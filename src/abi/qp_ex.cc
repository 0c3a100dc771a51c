// ibv_create_qp_ex and the ibv_wr_* post-send API. The wr_* calls build engine SendWr values
// between ibv_wr_start and ibv_wr_complete; ibv_wr_complete posts them with one doorbell.
// A mistake made while building (a setter with no WR, too many SGEs, inline data too long,
// an opcode the QP was not created for) is remembered and reported by ibv_wr_complete, which
// then posts nothing (the rxe / mlx5 behaviour).
#include <cstddef>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "abi/objects.h"
#include "abi/ops.h"
#include "live/live_nic.h"

using namespace vrnic::abi;
using vrnic::engine::Device;
using vrnic::engine::SendWr;
using vrnic::engine::WrOpcode;

namespace vrnic::abi {

struct WrBuilder {
  std::mutex mu;  // held from ibv_wr_start to ibv_wr_complete / ibv_wr_abort
  uint32_t max_send_sge = 0;
  uint32_t max_inline = 0;
  int err = 0;  // the first building mistake since ibv_wr_start
  std::vector<SendWr> wrs;
  // Where each WR's SGEs start in sges, or its inline bytes in inline_bytes (sg_list is
  // set from these at ibv_wr_complete: both vectors may grow while the batch is built).
  struct Data {
    size_t first = 0;
    bool is_inline = false;
  };
  std::vector<Data> data;
  std::vector<engine::Sge> sges;
  std::vector<uint8_t> inline_bytes;
};

}  // namespace vrnic::abi

namespace {

constexpr uint64_t kCompMaskSupported = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD |
                                        IBV_QP_INIT_ATTR_CREATE_FLAGS |
                                        IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;

// The send operations each QP type can post: rxe's sets (no TSO), UC with LOCAL_INV too (as
// mlx5), and on XRC initiators RC's but ATOMIC WRITE (rxe has no XRC; mlx5 no ATOMIC WRITE).
constexpr uint64_t kXrcOps = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                             IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
                             IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
                             IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_LOCAL_INV |
                             IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV;
constexpr uint64_t kRcOps = kXrcOps | IBV_QP_EX_WITH_ATOMIC_WRITE;
constexpr uint64_t kUcOps = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                            IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
                            IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV |
                            IBV_QP_EX_WITH_LOCAL_INV;
constexpr uint64_t kUdOps = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;

WrBuilder& builder(ibv_qp_ex* q) { return *to_qp(q)->wr; }

void fail(WrBuilder& b, int err) {
  if (!b.err) b.err = err;
}

// Starts a WR from the qp_ex's wr_id / wr_flags. IBV_SEND_INLINE is not taken from wr_flags:
// with this API, inline data is what ibv_wr_set_inline_data* give.
SendWr& begin(ibv_qp_ex* q, WrOpcode op) {
  WrBuilder& b = builder(q);
  SendWr w;
  w.wr_id = q->wr_id;
  w.opcode = op;
  w.send_flags = q->wr_flags & ~uint32_t(IBV_SEND_INLINE);
  b.wrs.push_back(w);
  b.data.push_back({b.sges.size(), false});
  return b.wrs.back();
}

// The WR a setter applies to: the last one begun, or null (a mistake) if there is none.
SendWr* current(ibv_qp_ex* q) {
  WrBuilder& b = builder(q);
  if (b.wrs.empty()) {
    fail(b, EINVAL);
    return nullptr;
  }
  return &b.wrs.back();
}

void wr_start(ibv_qp_ex* q) {
  WrBuilder& b = builder(q);
  b.mu.lock();
  b.err = 0;
  b.wrs.clear();
  b.data.clear();
  b.sges.clear();
  b.inline_bytes.clear();
}

int wr_complete(ibv_qp_ex* q) {
  WrBuilder& b = builder(q);
  int err = b.err;
  if (!err && !b.wrs.empty()) {
    for (size_t i = 0; i < b.wrs.size(); ++i) {
      SendWr& w = b.wrs[i];
      if (!w.num_sge) continue;
      if (b.data[i].is_inline) {
        // One SGE over the copied bytes: the engine copies inline data while posting.
        b.sges[b.data[i].first].addr =
            reinterpret_cast<uint64_t>(b.inline_bytes.data()) + b.sges[b.data[i].first].addr;
      }
      w.sg_list = &b.sges[b.data[i].first];
    }
    size_t bad = 0;
    Qp* qp = to_qp(q);
    err = to_context(q->qp_base.context)->nic->locked(
        [&](Device& d) { return d.post_send(qp->qp, b.wrs.data(), b.wrs.size(), &bad); });
  }
  b.wrs.clear();
  b.mu.unlock();
  return err;
}

void wr_abort(ibv_qp_ex* q) {
  WrBuilder& b = builder(q);
  b.wrs.clear();
  b.mu.unlock();
}

void wr_send(ibv_qp_ex* q) { begin(q, WrOpcode::kSend); }

void wr_send_imm(ibv_qp_ex* q, __be32 imm) { begin(q, WrOpcode::kSendWithImm).imm_data = imm; }

void wr_send_inv(ibv_qp_ex* q, uint32_t rkey) {
  begin(q, WrOpcode::kSendWithInv).invalidate_rkey = rkey;
}

void wr_rdma_write(ibv_qp_ex* q, uint32_t rkey, uint64_t remote_addr) {
  SendWr& w = begin(q, WrOpcode::kRdmaWrite);
  w.rkey = rkey;
  w.remote_addr = remote_addr;
}

void wr_rdma_write_imm(ibv_qp_ex* q, uint32_t rkey, uint64_t remote_addr, __be32 imm) {
  SendWr& w = begin(q, WrOpcode::kRdmaWriteWithImm);
  w.rkey = rkey;
  w.remote_addr = remote_addr;
  w.imm_data = imm;
}

void wr_rdma_read(ibv_qp_ex* q, uint32_t rkey, uint64_t remote_addr) {
  SendWr& w = begin(q, WrOpcode::kRdmaRead);
  w.rkey = rkey;
  w.remote_addr = remote_addr;
}

void wr_atomic_cmp_swp(ibv_qp_ex* q, uint32_t rkey, uint64_t remote_addr, uint64_t compare,
                       uint64_t swap) {
  SendWr& w = begin(q, WrOpcode::kAtomicCmpSwp);
  w.rkey = rkey;
  w.remote_addr = remote_addr;
  w.compare_add = compare;
  w.swap = swap;
}

void wr_atomic_fetch_add(ibv_qp_ex* q, uint32_t rkey, uint64_t remote_addr, uint64_t add) {
  SendWr& w = begin(q, WrOpcode::kAtomicFetchAdd);
  w.rkey = rkey;
  w.remote_addr = remote_addr;
  w.compare_add = add;
}

// The 8 bytes are taken now (rxe copies them into the WQE): the caller's buffer is free again.
void wr_atomic_write(ibv_qp_ex* q, uint32_t rkey, uint64_t remote_addr, const void* atomic_wr) {
  SendWr& w = begin(q, WrOpcode::kAtomicWrite);
  w.rkey = rkey;
  w.remote_addr = remote_addr;
  if (!atomic_wr) {
    fail(builder(q), EINVAL);
    return;
  }
  std::memcpy(&w.compare_add, atomic_wr, 8);
}

void wr_local_inv(ibv_qp_ex* q, uint32_t rkey) {
  begin(q, WrOpcode::kLocalInv).invalidate_rkey = rkey;
}

void wr_bind_mw(ibv_qp_ex* q, ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info* info) {
  SendWr& w = begin(q, WrOpcode::kBindMw);
  if (!mw || !info) {
    fail(builder(q), EINVAL);
    return;
  }
  w.bind.mw = to_mw(mw)->mw;
  w.bind.new_rkey = rkey;
  w.bind.mr = info->mr ? to_mr(info->mr)->mr : nullptr;
  w.bind.addr = info->addr;
  w.bind.length = info->length;
  w.bind.access = info->mw_access_flags;
}

void wr_set_ud_addr(ibv_qp_ex* q, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey) {
  SendWr* w = current(q);
  if (!w) return;
  if (!ah) {
    fail(builder(q), EINVAL);
    return;
  }
  w->ah = to_ah(ah)->ah;
  w->remote_qpn = remote_qpn;
  w->remote_qkey = remote_qkey;
}

// The data setters replace what an earlier setter gave the same WR.
void set_sges(ibv_qp_ex* q, size_t n, const ibv_sge* list) {
  SendWr* w = current(q);
  if (!w) return;
  WrBuilder& b = builder(q);
  if (n > b.max_send_sge) {
    fail(b, EINVAL);
    return;
  }
  WrBuilder::Data& d = b.data.back();
  b.sges.resize(d.first);  // the last WR's data is at the end of sges
  d.is_inline = false;
  for (size_t i = 0; i < n; ++i) b.sges.push_back({list[i].addr, list[i].length, list[i].lkey});
  w->num_sge = uint32_t(n);
  w->send_flags &= ~uint32_t(IBV_SEND_INLINE);
}

void wr_set_sge(ibv_qp_ex* q, uint32_t lkey, uint64_t addr, uint32_t length) {
  const ibv_sge s{addr, length, lkey};
  set_sges(q, 1, &s);
}

void wr_set_sge_list(ibv_qp_ex* q, size_t n, const ibv_sge* list) { set_sges(q, n, list); }

// Inline data is copied now: the program may reuse its buffers as soon as the call returns.
void wr_set_inline_data_list(ibv_qp_ex* q, size_t n, const ibv_data_buf* bufs) {
  SendWr* w = current(q);
  if (!w) return;
  WrBuilder& b = builder(q);
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) total += bufs[i].length;
  if (total > b.max_inline) {
    fail(b, EINVAL);
    return;
  }
  WrBuilder::Data& d = b.data.back();
  b.sges.resize(d.first);
  d.is_inline = true;
  const size_t at = b.inline_bytes.size();
  for (size_t i = 0; i < n; ++i) {
    const auto* p = static_cast<const uint8_t*>(bufs[i].addr);
    b.inline_bytes.insert(b.inline_bytes.end(), p, p + bufs[i].length);
  }
  b.sges.push_back({at, uint32_t(total), 0});  // addr: an offset until ibv_wr_complete
  w->num_sge = 1;
  w->send_flags |= IBV_SEND_INLINE;
}

void wr_set_inline_data(ibv_qp_ex* q, void* addr, size_t length) {
  const ibv_data_buf buf{addr, length};
  wr_set_inline_data_list(q, 1, &buf);
}

void wr_set_xrc_srqn(ibv_qp_ex* q, uint32_t remote_srqn) {
  SendWr* w = current(q);
  if (w) w->xrc_remote_srqn = remote_srqn;
}

uint64_t supported_ops(ibv_qp_type t) {
  switch (t) {
    case IBV_QPT_RC: return kRcOps;
    case IBV_QPT_XRC_SEND: return kXrcOps;
    case IBV_QPT_UC: return kUcOps;
    case IBV_QPT_UD: return kUdOps;
    default: return 0;
  }
}

void install_ops(ibv_qp_ex& ex, uint64_t ops) {
  if (ops & IBV_QP_EX_WITH_RDMA_WRITE) ex.wr_rdma_write = wr_rdma_write;
  if (ops & IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM) ex.wr_rdma_write_imm = wr_rdma_write_imm;
  if (ops & IBV_QP_EX_WITH_SEND) ex.wr_send = wr_send;
  if (ops & IBV_QP_EX_WITH_SEND_WITH_IMM) ex.wr_send_imm = wr_send_imm;
  if (ops & IBV_QP_EX_WITH_RDMA_READ) ex.wr_rdma_read = wr_rdma_read;
  if (ops & IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP) ex.wr_atomic_cmp_swp = wr_atomic_cmp_swp;
  if (ops & IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD) ex.wr_atomic_fetch_add = wr_atomic_fetch_add;
  if (ops & IBV_QP_EX_WITH_LOCAL_INV) ex.wr_local_inv = wr_local_inv;
  if (ops & IBV_QP_EX_WITH_BIND_MW) ex.wr_bind_mw = wr_bind_mw;
  if (ops & IBV_QP_EX_WITH_SEND_WITH_INV) ex.wr_send_inv = wr_send_inv;
  if (ops & IBV_QP_EX_WITH_ATOMIC_WRITE) ex.wr_atomic_write = wr_atomic_write;
  ex.wr_set_ud_addr = wr_set_ud_addr;
  ex.wr_set_xrc_srqn = wr_set_xrc_srqn;
  ex.wr_set_sge = wr_set_sge;
  ex.wr_set_sge_list = wr_set_sge_list;
  ex.wr_set_inline_data = wr_set_inline_data;
  ex.wr_set_inline_data_list = wr_set_inline_data_list;
  ex.wr_start = wr_start;
  ex.wr_complete = wr_complete;
  ex.wr_abort = wr_abort;
}

}  // namespace

// verbs_context.create_qp_ex. (rdma-core's inline ibv_create_qp_ex calls ibv_create_qp itself
// when comp_mask is just IBV_QP_INIT_ATTR_PD; such a QP has no ibv_qp_ex view, as in rdma-core.)
ibv_qp* vrnic::abi::op_create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex* attr) {
  if (attr->comp_mask & ~kCompMaskSupported) return fail_null<ibv_qp>(EOPNOTSUPP);
  if ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags) {
    return fail_null<ibv_qp>(EOPNOTSUPP);  // scatter-FCS, CVLAN stripping, ... : none
  }
  uint64_t ops = 0;
  if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
    ops = attr->send_ops_flags;
    if (ops & ~supported_ops(attr->qp_type)) return fail_null<ibv_qp>(EOPNOTSUPP);
  }
  if (attr->qp_type == IBV_QPT_XRC_RECV) return create_xrc_tgt_qp(context, attr);  // xrc.cc
  if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) return fail_null<ibv_qp>(EINVAL);
  if (attr->pd->context != context) return fail_null<ibv_qp>(EINVAL);
  auto* b = new (std::nothrow) WrBuilder;
  if (!b) return fail_null<ibv_qp>(ENOMEM);

  ibv_qp_init_attr init{};
  init.qp_context = attr->qp_context;
  init.send_cq = attr->send_cq;
  init.recv_cq = attr->recv_cq;
  init.srq = attr->srq;
  init.cap = attr->cap;
  init.qp_type = attr->qp_type;
  init.sq_sig_all = attr->sq_sig_all;
  ibv_qp* ibv = ibv_create_qp(attr->pd, &init);
  if (!ibv) {
    delete b;
    return nullptr;  // errno set by ibv_create_qp
  }
  attr->cap = init.cap;
  b->max_send_sge = init.cap.max_send_sge;
  b->max_inline = init.cap.max_inline_data;
  Qp* qp = to_qp(ibv);
  qp->wr = b;
  ibv_qp_ex& ex = qp->ex;
  // Everything past qp_base: no wr_* entry but those installed below.
  std::memset(reinterpret_cast<char*>(&ex) + offsetof(ibv_qp_ex, comp_mask), 0,
              sizeof(ibv_qp_ex) - offsetof(ibv_qp_ex, comp_mask));
  install_ops(ex, ops);
  return ibv;
}

void vrnic::abi::free_qp_ex(Qp* qp) {
  delete qp->wr;
  qp->wr = nullptr;
}

VRNIC_EXPORT ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* ibv) {
  Qp* qp = to_qp(ibv);
  return qp->wr ? &qp->ex : nullptr;
}
