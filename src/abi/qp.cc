// Queue pairs: create, modify, query, destroy (ibv structs <-> engine attributes).
#include <new>

#include "abi/convert.h"
#include "abi/objects.h"
#include "abi/ops.h"
#include "live/live_nic.h"

using namespace vrnic::abi;
using vrnic::engine::Device;

namespace {

vrnic::live::LiveNic* nic_of(ibv_qp* qp) { return to_context(qp->context)->nic; }

}  // namespace

VRNIC_EXPORT ibv_qp* ibv_create_qp(ibv_pd* ibv_pd, ibv_qp_init_attr* attr) {
  if (attr->qp_type == IBV_QPT_XRC_RECV) return fail_null<ibv_qp>(EINVAL);  // no XRCD here
  if (attr->qp_type != IBV_QPT_RC && attr->qp_type != IBV_QPT_UC &&
      attr->qp_type != IBV_QPT_UD && attr->qp_type != IBV_QPT_XRC_SEND) {
    return fail_null<ibv_qp>(EOPNOTSUPP);
  }
  // An XRC initiator has no receive side: its recv_cq is not needed (and not used).
  const bool ini = attr->qp_type == IBV_QPT_XRC_SEND;
  if (!attr->send_cq || (!attr->recv_cq && !ini)) return fail_null<ibv_qp>(EINVAL);
  // On a parent domain with allocators, the QP's memory comes from the program.
  auto* qp = new_object<Qp>(ibv_pd, kResTypeQp);
  if (!qp) return fail_null<ibv_qp>(ENOMEM);

  vrnic::engine::QpInitAttr init;
  init.type = vrnic::engine::QpType(attr->qp_type);
  init.pd = to_pd(ibv_pd)->pd;
  init.send_cq = to_cq(attr->send_cq)->cq;
  init.recv_cq = attr->recv_cq ? to_cq(attr->recv_cq)->cq : nullptr;
  init.srq = attr->srq ? to_srq(attr->srq)->srq : nullptr;
  init.cap = to_engine_qp_cap(attr->cap);
  init.sq_sig_all = attr->sq_sig_all != 0;
  if (int err = make_qp(ibv_pd->context, qp, init, attr->qp_context, attr->qp_type)) {
    delete_object(qp, ibv_pd, kResTypeQp);
    return fail_null<ibv_qp>(err);
  }
  hold_domain(ibv_pd);
  to_ibv_qp_cap(init.cap, attr->cap);
  ibv_qp& q = qp->ibv;
  q.pd = ibv_pd;
  q.send_cq = attr->send_cq;
  q.recv_cq = ini ? nullptr : attr->recv_cq;
  q.srq = ini ? nullptr : attr->srq;
  return &q;
}

int vrnic::abi::make_qp(ibv_context* context, Qp* qp, vrnic::engine::QpInitAttr& init,
                        void* qp_context, ibv_qp_type type) {
  init.user_context = &qp->ibv;  // comes back in async events
  int err = 0;
  uint32_t qpn = 0;
  qp->qp = to_context(context)->nic->locked([&](Device& d) {
    vrnic::engine::Qp* q = d.create_qp(init, err);
    if (q) qpn = d.qp_num(q);
    return q;
  });
  if (!qp->qp) return err ? err : ENOMEM;
  ibv_qp& q = qp->ibv;
  q.context = context;
  q.qp_context = qp_context;
  q.qp_num = qpn;
  q.state = IBV_QPS_RESET;
  q.qp_type = type;
  pthread_mutex_init(&q.mutex, nullptr);
  pthread_cond_init(&q.cond, nullptr);
  return 0;
}

VRNIC_EXPORT int ibv_modify_qp(ibv_qp* ibv, ibv_qp_attr* attr, int attr_mask) {
  // One GID (index 0): a source GID index past it is EINVAL, as the kernel's GID cache says.
  if ((attr_mask & IBV_QP_AV) && attr->ah_attr.is_global && attr->ah_attr.grh.sgid_index != 0) {
    return EINVAL;
  }
  vrnic::engine::QpAttr a;
  if (int err = to_engine_qp_attr(*attr, attr_mask, a)) return err;
  Qp* qp = to_qp(ibv);
  const int err = nic_of(ibv)->locked(
      [&](Device& d) { return d.modify_qp(qp->qp, a, uint32_t(attr_mask)); });
  if (err) return err;
  if (attr_mask & IBV_QP_STATE) ibv->state = attr->qp_state;
  return 0;
}

VRNIC_EXPORT int ibv_query_qp(ibv_qp* ibv, ibv_qp_attr* attr, int attr_mask,
                              ibv_qp_init_attr* init_attr) {
  vrnic::engine::QpAttr a;
  vrnic::engine::QpInitAttr init;
  Qp* qp = to_qp(ibv);
  const int err = nic_of(ibv)->locked([&](Device& d) { return d.query_qp(qp->qp, a, init); });
  if (err) return err;
  to_ibv_qp_attr(a, *attr);
  ibv->state = attr->qp_state;  // the engine may have moved it (e.g. to ERR)
  if (init_attr) {
    *init_attr = ibv_qp_init_attr{};
    init_attr->qp_context = ibv->qp_context;
    init_attr->send_cq = ibv->send_cq;
    init_attr->recv_cq = ibv->recv_cq;
    init_attr->srq = ibv->srq;
    to_ibv_qp_cap(init.cap, init_attr->cap);
    init_attr->qp_type = ibv->qp_type;
    init_attr->sq_sig_all = init.sq_sig_all ? 1 : 0;
  }
  return 0;
}

VRNIC_EXPORT int ibv_destroy_qp(ibv_qp* ibv) {
  Qp* qp = to_qp(ibv);
  const int err = nic_of(ibv)->locked([&](Device& d) { return d.destroy_qp(qp->qp); });
  if (err) return err;
  // No event for it can come any more; wait for the acks of those the program read.
  drop_async_events(to_context(ibv->context), ibv);
  pthread_mutex_lock(&ibv->mutex);
  while (ibv->events_completed != qp->async_events_delivered) {
    pthread_cond_wait(&ibv->cond, &ibv->mutex);
  }
  pthread_mutex_unlock(&ibv->mutex);
  pthread_mutex_destroy(&ibv->mutex);
  pthread_cond_destroy(&ibv->cond);
  free_qp_ex(qp);
  ibv_pd* pd = ibv->pd;  // null for an XRC target (it belongs to an XRC domain)
  delete_object(qp, pd, kResTypeQp);
  if (pd) release_domain(pd);
  return 0;
}

// Packets are placed in PSN order, but the bytes inside one packet are copied by memcpy, which
// may write them in any order: no in-order guarantee to report.
VRNIC_EXPORT int ibv_query_qp_data_in_order(ibv_qp* qp, ibv_wr_opcode op, uint32_t flags) {
  return 0;
}
