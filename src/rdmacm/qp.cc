// QPs and SRQs on an id (rdma_create_qp(_ex), rdma_create_srq(_ex)), their transitions from the negotiation, rdma_init_qp_attr.
#include <cerrno>
#include <cstring>

#include "rdmacm/state.h"

namespace vrnic::rdmacm {
namespace {

constexpr int kRemoteAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                              IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

// The attributes of each transition (as rdma_init_qp_attr reports them).
int attrs_for(Id* id, ibv_qp_state to, ibv_qp_attr& a, int& mask) {
  a = {};
  a.qp_state = to;
  const bool ud = id->id.qp_type == IBV_QPT_UD;
  switch (to) {
    case IBV_QPS_INIT:
      a.pkey_index = 0;
      a.port_num = 1;
      mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
      if (ud) {
        a.qkey = kUdpQkey;
        mask |= IBV_QP_QKEY;
      } else {
        a.qp_access_flags = kRemoteAccess;
        mask |= IBV_QP_ACCESS_FLAGS;
      }
      return 0;
    case IBV_QPS_RTR:
      mask = IBV_QP_STATE;
      if (ud) return 0;
      a.path_mtu = id->mine.path_mtu ? static_cast<ibv_mtu>(id->mine.path_mtu) : IBV_MTU_1024;
      a.dest_qp_num = id->peer.qpn;
      a.rq_psn = id->peer.starting_psn;
      a.max_dest_rd_atomic = id->mine.responder_resources;
      a.min_rnr_timer = 12;
      a.ah_attr.is_global = 1;
      a.ah_attr.port_num = 1;
      a.ah_attr.grh.sgid_index = 0;
      a.ah_attr.grh.hop_limit = 64;
      a.ah_attr.grh.traffic_class = id->tos;
      a.ah_attr.grh.dgid = id->id.route.addr.addr.ibaddr.dgid;
      mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
              IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
      return 0;
    case IBV_QPS_RTS:
      mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
      a.sq_psn = ud ? 0 : id->mine.starting_psn;
      if (ud) return 0;
      a.timeout = id->ack_timeout;
      a.retry_cnt = id->mine.retry_count;
      a.rnr_retry = id->peer.rnr_retry_count;  // what the peer's REQ or REP asked for
      a.max_rd_atomic = id->mine.initiator_depth;
      mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
      return 0;
    case IBV_QPS_ERR:
      mask = IBV_QP_STATE;
      return 0;
    default:
      return EINVAL;
  }
}

// Moves the id's QP to `to` with the attributes of that transition.
int modify_qp_to(Id* id, ibv_qp_state to) {
  ibv_qp_attr a;
  int mask = 0;
  if (const int err = attrs_for(id, to, a, mask)) return fail(err);
  const int err = ibv_modify_qp(id->id.qp, &a, mask);
  return err ? fail(err) : 0;
}

// librdmacm's CQs for an id created without any: one completion channel and CQ per
// direction, so rdma_get_send_comp / rdma_get_recv_comp can wait on them.
int make_cqs(Id* id, int send_depth, int recv_depth) {
  ibv_context* ctx = id->id.verbs;
  id->id.recv_cq_channel = ibv_create_comp_channel(ctx);
  id->id.send_cq_channel = ibv_create_comp_channel(ctx);
  if (!id->id.recv_cq_channel || !id->id.send_cq_channel) return -1;
  id->id.recv_cq = ibv_create_cq(ctx, std::max(recv_depth, 1), id, id->id.recv_cq_channel, 0);
  id->id.send_cq = ibv_create_cq(ctx, std::max(send_depth, 1), id, id->id.send_cq_channel, 0);
  if (!id->id.recv_cq || !id->id.send_cq) return -1;
  id->own_cqs = true;
  return 0;
}

void drop_cqs(Id* id) {
  if (!id->own_cqs) return;
  // An XRC target's receive CQ serves its XRC SRQ: it goes with the SRQ (rdma_destroy_srq).
  if (id->id.qp_type == IBV_QPT_XRC_RECV && id->id.srq) return;
  if (id->id.send_cq) ibv_destroy_cq(id->id.send_cq);
  if (id->id.recv_cq) ibv_destroy_cq(id->id.recv_cq);
  if (id->id.send_cq_channel) ibv_destroy_comp_channel(id->id.send_cq_channel);
  if (id->id.recv_cq_channel) ibv_destroy_comp_channel(id->id.recv_cq_channel);
  id->id.send_cq = id->id.recv_cq = nullptr;
  id->id.send_cq_channel = id->id.recv_cq_channel = nullptr;
  id->own_cqs = false;
}

// An XRC SRQ (rdma_create_srq_ex with IBV_SRQT_XRC): in the process's XRC domain and
// completing to the id's receive CQ unless the caller names them (as librdmacm).
int create_xrc_srq(Id* id, ibv_srq_init_attr_ex* attr) {
  rdma_cm_id* cm_id = &id->id;
  if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd) {
    attr->xrcd = Service::get().default_xrcd();
    if (!attr->xrcd) return -1;
  }
  if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq) {
    if (!cm_id->recv_cq && make_cqs(id, 0, static_cast<int>(attr->attr.max_wr)) != 0) {
      drop_cqs(id);
      return -1;
    }
    attr->cq = cm_id->recv_cq;
  }
  attr->comp_mask |= IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
  ibv_srq* srq = ibv_create_srq_ex(cm_id->verbs, attr);
  if (!srq) return -1;
  cm_id->srq = srq;
  cm_id->pd = attr->pd;
  return 0;
}

}  // namespace

int qp_to_init(Id* id) {
  if (modify_qp_to(id, IBV_QPS_INIT) != 0) return -1;
  if (id->id.qp_type != IBV_QPT_UD) return 0;
  return (modify_qp_to(id, IBV_QPS_RTR) == 0 && modify_qp_to(id, IBV_QPS_RTS) == 0) ? 0 : -1;
}
int qp_to_rtr(Id* id) { return modify_qp_to(id, IBV_QPS_RTR); }
int qp_to_rts(Id* id) { return modify_qp_to(id, IBV_QPS_RTS); }
int qp_to_error(Id* id) { return modify_qp_to(id, IBV_QPS_ERR); }

}  // namespace vrnic::rdmacm

using namespace vrnic::rdmacm;

RDMACM_EXPORT int rdma_create_qp_ex(rdma_cm_id* cm_id, ibv_qp_init_attr_ex* attr) {
  if (!cm_id || !attr) return fail(EINVAL);
  Id* id = to_id(cm_id);
  if (!cm_id->verbs) return fail(EINVAL);  // not bound to the device yet
  if (cm_id->qp) return fail(EINVAL);
  if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
    attr->pd = cm_id->pd ? cm_id->pd : Service::get().default_pd();
    attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
  }
  if (attr->pd->context != cm_id->verbs) return fail(EINVAL);
  if (attr->qp_type == IBV_QPT_XRC_RECV &&
      (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd)) {
    attr->xrcd = Service::get().default_xrcd();
    if (!attr->xrcd) return -1;
    attr->comp_mask |= IBV_QP_INIT_ATTR_XRCD;
  }
  if ((!attr->send_cq || !attr->recv_cq) && !cm_id->send_cq) {
    if (make_cqs(id, attr->cap.max_send_wr, attr->cap.max_recv_wr) != 0) {
      drop_cqs(id);
      return -1;
    }
  }
  if (!attr->send_cq) attr->send_cq = cm_id->send_cq;
  if (!attr->recv_cq) attr->recv_cq = cm_id->recv_cq;
  if (!attr->srq && cm_id->srq) attr->srq = cm_id->srq;
  ibv_qp* qp = ibv_create_qp_ex(cm_id->verbs, attr);
  if (!qp) {
    drop_cqs(id);
    return -1;
  }
  cm_id->qp = qp;
  cm_id->pd = attr->pd;
  cm_id->qp_type = attr->qp_type;
  if (qp_to_init(id) != 0) {
    const int err = errno;
    ibv_destroy_qp(qp);
    cm_id->qp = nullptr;
    drop_cqs(id);
    return fail(err);
  }
  return 0;
}

RDMACM_EXPORT int rdma_create_qp(rdma_cm_id* cm_id, ibv_pd* pd, ibv_qp_init_attr* attr) {
  if (!attr) return fail(EINVAL);
  ibv_qp_init_attr_ex ex{};
  std::memcpy(&ex, attr, sizeof *attr);
  ex.comp_mask = pd ? IBV_QP_INIT_ATTR_PD : 0;
  ex.pd = pd;
  const int r = rdma_create_qp_ex(cm_id, &ex);
  if (r == 0) {
    attr->cap = ex.cap;
    attr->send_cq = ex.send_cq;
    attr->recv_cq = ex.recv_cq;
  }
  return r;
}

RDMACM_EXPORT void rdma_destroy_qp(rdma_cm_id* cm_id) {
  if (!cm_id || !cm_id->qp) return;
  ibv_destroy_qp(cm_id->qp);
  cm_id->qp = nullptr;
  drop_cqs(to_id(cm_id));
}

RDMACM_EXPORT int rdma_create_srq_ex(rdma_cm_id* cm_id, ibv_srq_init_attr_ex* attr) {
  if (!cm_id || !attr || !cm_id->verbs) return fail(EINVAL);
  if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
    attr->pd = cm_id->pd ? cm_id->pd : Service::get().default_pd();
    attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
  }
  if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type == IBV_SRQT_XRC)
    return create_xrc_srq(to_id(cm_id), attr);
  ibv_srq_init_attr plain{};
  plain.srq_context = attr->srq_context;
  plain.attr = attr->attr;
  ibv_srq* srq = ibv_create_srq(attr->pd, &plain);
  if (!srq) return -1;
  attr->attr = plain.attr;
  cm_id->srq = srq;
  cm_id->pd = attr->pd;
  return 0;
}

RDMACM_EXPORT int rdma_create_srq(rdma_cm_id* cm_id, ibv_pd* pd, ibv_srq_init_attr* attr) {
  if (!attr) return fail(EINVAL);
  ibv_srq_init_attr_ex ex{};
  ex.srq_context = attr->srq_context;
  ex.attr = attr->attr;
  ex.comp_mask = pd ? IBV_SRQ_INIT_ATTR_PD : 0;
  ex.pd = pd;
  if (cm_id && cm_id->qp_type == IBV_QPT_XRC_RECV) {  // an XRC id's SRQ is an XRC SRQ
    ex.comp_mask |= IBV_SRQ_INIT_ATTR_TYPE;
    ex.srq_type = IBV_SRQT_XRC;
  }
  const int r = rdma_create_srq_ex(cm_id, &ex);
  if (r == 0) attr->attr = ex.attr;
  return r;
}

RDMACM_EXPORT void rdma_destroy_srq(rdma_cm_id* cm_id) {
  if (!cm_id || !cm_id->srq) return;
  ibv_destroy_srq(cm_id->srq);
  cm_id->srq = nullptr;
  if (!cm_id->qp) drop_cqs(to_id(cm_id));  // an XRC target's CQs, kept for the SRQ
}

// The attributes the program's own ibv_modify_qp needs for a transition, from the CM's
// negotiation (as the kernel CM reports them).
RDMACM_EXPORT int rdma_init_qp_attr(rdma_cm_id* cm_id, ibv_qp_attr* attr, int* mask) {
  if (!cm_id || !attr || !mask) return fail(EINVAL);
  std::lock_guard<std::mutex> g(Service::get().mu);
  Id* id = to_id(cm_id);
  const ibv_qp_state to = attr->qp_state;
  if ((to == IBV_QPS_RTR || to == IBV_QPS_RTS) && id->id.qp_type != IBV_QPT_UD &&
      id->peer.qpn == 0) {
    return fail(EINVAL);  // nothing negotiated yet
  }
  const int err = attrs_for(id, to, *attr, *mask);
  return err ? fail(err) : 0;
}
