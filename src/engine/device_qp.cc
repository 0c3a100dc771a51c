// Device: QP create / modify / query / destroy and the posting verbs (send, receive, bind MW).
#include "engine/device_impl.h"

#include <cerrno>
#include <cstring>

#include "engine/completer.h"
#include "engine/qp_transition.h"
#include "wire/gid.h"

namespace vrnic::engine {

// --- QP -------------------------------------------------------------------------------------

// A QP with a QPN drawn from the device's CSPRNG (names.h): 24 bits, never 0 or 1 (the
// special QPs, IBA 10.2.5) nor the multicast QPN, not in use, not destroyed lately. So no
// QPN tells anything of the next (ReDMArk's QPN guessing). ENOMEM at the device's QP limit.
std::unique_ptr<Qp> Device::Impl::new_qp(Errno& err) {
  if (qps.size() >= core.config.limits.max_qp) {
    err = ENOMEM;
    return nullptr;
  }
  auto qp = std::make_unique<Qp>();
  uint32_t qpn;
  do qpn = core.names.next24();
  while (qpn < 2 || qpn == kMulticastQpn || qp_by_qpn.contains(qpn) || recent_qpns.contains(qpn));
  qp->qpn = qpn;
  return qp;
}

namespace {

// EINVAL for a capability beyond the device's limits; else writes back what is granted: at
// least what was asked for, inline data up to the device limit, no receive side with an SRQ
// or on an XRC initiator.
Errno grant_caps(const DeviceLimits& l, QpInitAttr& init) {
  QpCap& cap = init.cap;
  if (init.srq != nullptr) cap.max_recv_wr = cap.max_recv_sge = 0;  // ignored with an SRQ
  if (cap.max_send_wr > l.max_qp_wr || cap.max_recv_wr > l.max_qp_wr ||
      cap.max_send_sge > l.max_sge || cap.max_recv_sge > l.max_sge ||
      cap.max_inline_data > l.max_inline_data)
    return EINVAL;
  if (cap.max_send_wr == 0) cap.max_send_wr = 1;
  if (cap.max_send_sge == 0) cap.max_send_sge = 1;
  if (cap.max_recv_sge == 0 && init.srq == nullptr && init.type != QpType::kXrcIni)
    cap.max_recv_sge = 1;
  cap.max_inline_data = l.max_inline_data;
  return 0;
}

}  // namespace

Qp* Device::create_qp(QpInitAttr& init, Errno& err) {
  Impl& d = *impl_;
  const DeviceLimits& l = d.core.config.limits;
  err = 0;
  if (init.type == QpType::kXrcTgt) return create_xrc_tgt(init, err);
  if (init.type == QpType::kXrcIni) {
    // The initiator sends only: no receive queue, no receive CQ, no SRQ (as mlx5).
    init.recv_cq = init.send_cq;
    init.srq = nullptr;
    init.cap.max_recv_wr = init.cap.max_recv_sge = 0;
  }
  bool known = init.type == QpType::kRc || init.type == QpType::kUc ||
               init.type == QpType::kUd || init.type == QpType::kXrcIni;
  if (!known || !d.has_pd(init.pd) || !d.has_cq(init.send_cq) ||
      !d.has_cq(init.recv_cq)) {
    err = EINVAL;
    return nullptr;
  }
  if (init.srq != nullptr && (!d.has_srq(init.srq) || init.srq->xrcd != nullptr)) {
    err = EINVAL;  // an XRC SRQ serves XRC target QPs only
    return nullptr;
  }
  if ((err = grant_caps(l, init)) != 0) return nullptr;
  std::unique_ptr<Qp> qp = d.new_qp(err);
  if (!qp) return nullptr;
  qp->type = init.type;
  qp->pd = init.pd;
  qp->send_cq = init.send_cq;
  qp->recv_cq = init.recv_cq;
  qp->sq_sig_all = init.sq_sig_all;
  qp->user_context = init.user_context;
  qp->cap = init.cap;
  qp->attr.cap = init.cap;
  if (init.type == QpType::kUd) qp->attr.path_mtu = l.active_mtu;  // a datagram's limit
  qp->src_port = d.core.port.source_port_for(qp->qpn);
  if (init.type == QpType::kXrcIni) qp->recv_cq = init.recv_cq = nullptr;
  ++init.pd->users;
  ++init.send_cq->users;
  if (init.recv_cq != nullptr) ++init.recv_cq->users;
  if (init.srq != nullptr) {
    qp->srq = init.srq;
    ++init.srq->users;
  }
  Qp* raw = qp.get();
  d.core.timers.add(*raw);
  d.add_qp(std::move(qp));
  return raw;
}

// An XRC target QP (IBV_QPT_XRC_RECV): in an XRC domain, no PD, CQs or work queues of its
// own; the XRC SRQ each request names supplies them (xrc.cc).
Qp* Device::create_xrc_tgt(QpInitAttr& init, Errno& err) {
  Impl& d = *impl_;
  if (!d.has_xrcd(init.xrcd)) {
    err = EINVAL;
    return nullptr;
  }
  std::unique_ptr<Qp> qp = d.new_qp(err);
  if (!qp) return nullptr;
  qp->type = QpType::kXrcTgt;
  qp->xrcd = init.xrcd;
  qp->user_context = init.user_context;
  init.cap = QpCap{};
  init.pd = nullptr;
  init.send_cq = init.recv_cq = nullptr;
  init.srq = nullptr;
  qp->src_port = d.core.port.source_port_for(qp->qpn);
  ++init.xrcd->users;
  Qp* raw = qp.get();
  d.core.timers.add(*raw);
  d.add_qp(std::move(qp));
  return raw;
}

uint32_t Device::qp_num(const Qp* qp) const { return qp ? qp->qpn : 0; }

void Device::Impl::apply(Qp& qp, const QpAttr& a, uint32_t mask) {
  QpAttr& q = qp.attr;
  if (mask & kAttrAccessFlags) q.qp_access_flags = a.qp_access_flags;
  if (mask & kAttrPkeyIndex) q.pkey_index = a.pkey_index;
  if (mask & kAttrPort) q.port_num = a.port_num;
  if (mask & kAttrQkey) q.qkey = a.qkey;
  if (mask & kAttrAv) q.ah = a.ah;
  if (mask & kAttrPathMtu) q.path_mtu = a.path_mtu;
  if (mask & kAttrTimeout) q.timeout = a.timeout;
  if (mask & kAttrRetryCnt) q.retry_cnt = a.retry_cnt;
  if (mask & kAttrRnrRetry) q.rnr_retry = a.rnr_retry;
  if (mask & kAttrRqPsn) q.rq_psn = a.rq_psn;
  if (mask & kAttrMaxQpRdAtomic) q.max_rd_atomic = a.max_rd_atomic;
  if (mask & kAttrMinRnrTimer) q.min_rnr_timer = a.min_rnr_timer;
  if (mask & kAttrSqPsn) q.sq_psn = a.sq_psn;
  if (mask & kAttrMaxDestRdAtomic) q.max_dest_rd_atomic = a.max_dest_rd_atomic;
  if (mask & kAttrDestQpn) q.dest_qp_num = a.dest_qp_num;
  if (mask & kAttrAv) {
    // The connection's addresses: source from the device GID, destination from the AV.
    qp.ip = core.local_ip;
    qp.ip.src_port = qp.src_port;
    bool ipv6 = false;
    qp.ip.dst = wire::ip_of_gid(a.ah.dgid.raw, ipv6);
  }
}

Errno Device::modify_qp(Qp* qp, const QpAttr& attr, uint32_t mask) {
  Impl& d = *impl_;
  if (qp == nullptr) return EINVAL;
  d.drain_direct();
  d.release_held_acks();  // what the QP received is acknowledged before it changes state
  const DeviceLimits& l = d.core.config.limits;
  Errno e = validate_modify(qp->type, qp->state(), attr, mask, l.max_mtu,
                            static_cast<uint8_t>(l.max_qp_rd_atom));
  if (e != 0) return e;
  if ((mask & kAttrAv) && attr.ah.dgid.is_ipv4_mapped() != d.core.config.gid.is_ipv4_mapped())
    return EINVAL;  // one address family per device
  d.apply(*qp, attr, mask);
  const QpState was = qp->state();
  const QpState next = (mask & kAttrState) ? attr.qp_state : qp->state();
  e = qp_transition(d.core, *qp, next, QpCause::kModify, mask);  // qp_transition.cc
  // Back to RESET: the connection is over, and its keys (authenticated mode) with it.
  if (was != QpState::kReset && qp->state() == QpState::kReset) d.core.auth.erase(qp->qpn);
  d.core.publish_qp(*qp);
  d.finish();
  return e;
}

Errno Device::set_qp_auth(uint32_t qpn, const AuthKeys& keys) {
  Impl& d = *impl_;
  Qp* qp = d.find_qp(qpn);
  if (qp == nullptr || qp->type != QpType::kRc) return EINVAL;  // RC connections only
  d.core.auth.set(qpn, keys);
  return 0;
}

Errno Device::query_qp(const Qp* qp, QpAttr& attr, QpInitAttr& init) const {
  if (qp == nullptr) return EINVAL;
  attr = qp->attr;
  attr.cur_qp_state = qp->state();
  attr.cap = qp->cap;
  attr.sq_draining = false;
  // The PSNs where the connection stands, as rxe's rxe_qp_to_attr reports them: fed back to
  // RTR / RTS after a RESET, they continue the same connection.
  if (qp->req.started) attr.sq_psn = qp->req.next_new_psn;
  if (qp->resp.started) attr.rq_psn = qp->resp.epsn;
  init.type = qp->type;
  const bool tgt = qp->type == QpType::kXrcTgt;  // what it borrows from an SRQ is not its own
  init.pd = tgt ? nullptr : qp->pd;
  init.send_cq = qp->send_cq;
  init.recv_cq = tgt ? nullptr : qp->recv_cq;
  init.srq = tgt ? nullptr : qp->srq;
  init.xrcd = qp->xrcd;
  init.cap = qp->cap;
  init.sq_sig_all = qp->sq_sig_all;
  init.user_context = qp->user_context;
  return 0;
}

Errno Device::destroy_qp(Qp* qp) {
  Impl& d = *impl_;
  if (qp == nullptr || d.find_qp(qp->qpn) != qp) return EINVAL;
  d.drain_direct();
  d.release_held_acks();  // an ACK held for the program's answer still acknowledges
  auto drop = [&](std::vector<Qp*>& v) { v.erase(std::remove(v.begin(), v.end(), qp), v.end()); };
  drop(d.core.ack_pending);
  drop(d.core.tx_ready);
  drop(d.core.budget_waiters);
  d.core.inflight -= qp->req.counted_inflight;
  ud_forget_qp(d.core, *qp);
  d.core.retract_qp(*qp);
  if (qp->type == QpType::kXrcTgt) {
    --qp->xrcd->users;
  } else {
    --qp->pd->users;
    --qp->send_cq->users;
    if (qp->recv_cq != nullptr) --qp->recv_cq->users;
    if (qp->srq != nullptr) --qp->srq->users;
  }
  d.recent_qpns.add(qp->qpn);
  d.core.auth.erase(qp->qpn);
  d.core.timers.remove(*qp);
  d.qp_by_qpn.erase(qp->qpn);
  d.qps.erase(qp->qpn);
  return 0;
}


Errno Device::bind_mw(Qp* qp, uint64_t wr_id, uint32_t send_flags, const MwBindInfo& bind) {
  Impl& d = *impl_;
  if (qp == nullptr || d.find_qp(qp->qpn) != qp) return EINVAL;
  if (!d.core.mem.has_mw(bind.mw) || bind.mw->type != 1) return EINVAL;
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = WrOpcode::kBindMw;
  wr.send_flags = send_flags;
  wr.bind = bind;
  Errno e = requester_post(d.core, *qp, wr, true);
  if (e == 0) {
    if (qp->state() == QpState::kErr) d.core.flush_queues(*qp);
    else d.core.mark_tx_ready(*qp);
  }
  d.finish();
  return e;
}

// --- fast path ------------------------------------------------------------------------------

Errno Device::post_send(Qp* qp, const SendWr* wrs, size_t n, size_t* bad) {
  Impl& d = *impl_;
  if (qp == nullptr) return EINVAL;
  if (qp->type == QpType::kXrcTgt && n > 0) {  // a target has no send queue
    if (bad) *bad = 0;
    return EINVAL;
  }
  d.note_post(*qp);
  Errno e = 0;
  for (size_t i = 0; i < n; ++i) {
    e = requester_post(d.core, *qp, wrs[i]);
    if (e != 0) {
      if (bad) *bad = i;
      break;
    }
  }
  if (qp->state() == QpState::kErr) d.core.flush_queues(*qp);  // flushed at once (IBA 11.4.1.1)
  else d.core.mark_tx_ready(*qp);
  d.finish();
  return e;
}

Errno Device::post_recv(Qp* qp, const RecvWr* wrs, size_t n, size_t* bad) {
  Impl& d = *impl_;
  if (qp == nullptr) return EINVAL;
  if ((qp->srq != nullptr || is_xrc(qp->type)) && n > 0) {
    // Its receives are posted to the SRQ (as rxe); XRC QPs have no receive queue (as mlx5).
    if (bad) *bad = 0;
    return EINVAL;
  }
  for (size_t i = 0; i < n; ++i) {
    Errno e = responder_post_recv(d.core, *qp, wrs[i]);
    if (e != 0) {
      if (bad) *bad = i;
      d.finish();
      return e;
    }
  }
  d.finish();
  return 0;
}

}  // namespace vrnic::engine
