// Memory windows: ibv_alloc_mw / ibv_dealloc_mw / ibv_bind_mw through ibv_context.ops (the
// inline wrappers in verbs.h call these). IBV_WR_BIND_MW and IBV_WR_LOCAL_INV go through
// ibv_post_send (convert.cc).
#include <new>

#include "abi/objects.h"
#include "abi/ops.h"
#include "live/live_nic.h"

using namespace vrnic::abi;
using vrnic::engine::Device;

ibv_mw* vrnic::abi::op_alloc_mw(ibv_pd* ibv_pd, ibv_mw_type type) {
  if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) return fail_null<ibv_mw>(EINVAL);
  auto* mw = new (std::nothrow) Mw{};
  if (!mw) return fail_null<ibv_mw>(ENOMEM);
  Pd* pd = to_pd(ibv_pd);
  uint32_t rkey = 0;
  int err = 0;
  mw->mw = to_context(ibv_pd->context)->nic->locked(
      [&](Device& d) { return d.alloc_mw(pd->pd, uint8_t(type), rkey, err); });
  if (!mw->mw) {
    delete mw;
    return fail_null<ibv_mw>(err ? err : ENOMEM);
  }
  hold_domain(ibv_pd);
  mw->ibv.context = ibv_pd->context;
  mw->ibv.pd = ibv_pd;
  mw->ibv.rkey = rkey;
  mw->ibv.handle = 0;
  mw->ibv.type = type;
  return &mw->ibv;
}

int vrnic::abi::op_dealloc_mw(ibv_mw* ibv) {
  Mw* mw = to_mw(ibv);
  const int err =
      to_context(ibv->context)->nic->locked([&](Device& d) { return d.dealloc_mw(mw->mw); });
  if (err) return err;
  release_domain(ibv->pd);
  delete mw;
  return 0;
}

// Type 1 bind (ibv_bind_mw): queued on the QP's send queue like a WR; the window answers to
// the next rkey (ibv_inc_rkey: a new 8-bit key part) once the bind has run.
int vrnic::abi::op_bind_mw(ibv_qp* ibv_qp, ibv_mw* ibv_mw, ibv_mw_bind* mw_bind) {
  if (!ibv_qp || !ibv_mw || !mw_bind) return EINVAL;
  const ibv_mw_bind_info& bi = mw_bind->bind_info;
  vrnic::engine::MwBindInfo info;
  info.mw = to_mw(ibv_mw)->mw;
  info.new_rkey = ibv_inc_rkey(ibv_mw->rkey);
  info.mr = bi.mr ? to_mr(bi.mr)->mr : nullptr;
  info.addr = bi.addr;
  info.length = bi.length;
  info.access = bi.mw_access_flags;
  Qp* qp = to_qp(ibv_qp);
  const int err = to_context(ibv_qp->context)->nic->locked([&](Device& d) {
    return d.bind_mw(qp->qp, mw_bind->wr_id, mw_bind->send_flags, info);
  });
  if (err) return err;
  ibv_mw->rkey = info.new_rkey;
  return 0;
}
