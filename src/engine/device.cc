// Device: object tables (PD, MR, CQ, QP), modify_qp transitions, and the entry points that
// route received packets by destination QPN and run timers.
#include "engine/device.h"

#include <cerrno>

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "engine/completer.h"
#include "engine/core.h"
#include "engine/icrc_peers.h"
#include "engine/requester.h"
#include "engine/responder.h"
#include "engine/odp.h"
#include "engine/srq.h"
#include "wire/opcode.h"

namespace vrnic::engine {

struct Device::Impl {
  Impl(const DeviceConfig& cfg, PacketPort& port, Clock& clock, HostMemory& host,
       EventSink& events)
      : core(cfg, port, clock, host, events) {}

  Core core;
  IcrcPeers icrc_peers;
  std::vector<std::unique_ptr<Pd>> pds;
  std::vector<std::unique_ptr<Cq>> cqs;
  std::unordered_map<uint32_t, std::unique_ptr<Qp>> qps;
  std::vector<std::unique_ptr<Srq>> srqs;
  uint32_t next_pd_handle = 1;
  uint32_t next_qpn = 0x11;  // QPN 0 and 1 are the special QPs (IBA 10.2.5)

  Qp* find_qp(uint32_t qpn) {
    auto it = qps.find(qpn);
    return it == qps.end() ? nullptr : it->second.get();
  }
  bool has_pd(const Pd* pd) const {
    return std::any_of(pds.begin(), pds.end(), [&](auto& p) { return p.get() == pd; });
  }
  bool has_cq(const Cq* cq) const {
    return std::any_of(cqs.begin(), cqs.end(), [&](auto& c) { return c.get() == cq; });
  }
  bool has_srq(const Srq* srq) const {
    return std::any_of(srqs.begin(), srqs.end(), [&](auto& s) { return s.get() == srq; });
  }

  // Sends what the engine call produced: coalesced ACKs, then requester packets; performs
  // the direct copies submitted unless they are held for a batch.
  void finish() {
    for (;;) {
      for (size_t i = 0; i < core.ack_pending.size(); ++i)
        responder_flush_ack(core, *core.ack_pending[i]);
      core.ack_pending.clear();
      for (size_t i = 0; i < core.tx_ready.size(); ++i) requester_progress(core, *core.tx_ready[i]);
      core.tx_ready.clear();
      wake_budget_waiters();
      if (core.direct_hold || core.direct_ops.empty()) break;
      core.direct_flush();  // makes the QPs ready: WQEs behind the copies may go now
    }
    core.tx.flush(core.port);
  }
  // Performs held direct copies and what they let go (before a control verb or a poll).
  void drain_direct() {
    if (core.direct_ops.empty()) return;
    const bool hold = core.direct_hold;
    core.direct_hold = false;
    finish();
    core.direct_hold = hold;
  }

  // QPs held back by the device window send again once it has room (in the order they
  // stopped, so the budget goes round the QPs instead of to the busiest).
  void wake_budget_waiters() {
    if (core.budget_waiters.empty() || core.inflight >= kDeviceWindow) return;
    waking.clear();
    waking.swap(core.budget_waiters);  // both keep their capacity: no allocation per call
    for (Qp* q : waking) {
      q->req.budget_wait = false;
      requester_progress(core, *q);  // may put itself back on budget_waiters
    }
  }
  std::vector<Qp*> waking;  // wake_budget_waiters' scratch

  void dispatch(const WirePacket& pkt);
  void apply(Qp& qp, const QpAttr& a, uint32_t mask);
};

Device::Device(const DeviceConfig& config, PacketPort& port, Clock& clock, HostMemory& host,
               EventSink& events)
    : impl_(std::make_unique<Impl>(config, port, clock, host, events)) {}

Device::~Device() = default;

const DeviceConfig& Device::config() const { return impl_->core.config; }
Counters& Device::counters() { return impl_->core.ctr; }

// --- PD / MR --------------------------------------------------------------------------------

Pd* Device::alloc_pd() {
  if (impl_->pds.size() >= impl_->core.config.limits.max_pd) return nullptr;
  auto pd = std::make_unique<Pd>();
  pd->handle = impl_->next_pd_handle++;
  impl_->pds.push_back(std::move(pd));
  return impl_->pds.back().get();
}

Errno Device::dealloc_pd(Pd* pd) {
  auto& v = impl_->pds;
  auto it = std::find_if(v.begin(), v.end(), [&](auto& p) { return p.get() == pd; });
  if (it == v.end()) return EINVAL;
  if (pd->users > 0) return EBUSY;
  v.erase(it);
  return 0;
}

Errno Device::reg_mr(Pd* pd, void* addr, size_t length, uint64_t iova, uint32_t access,
                     MrInfo& out) {
  if (!impl_->has_pd(pd)) return EINVAL;
  // Implicit ODP: (NULL, SIZE_MAX) covers the whole address space with iova = va.
  const bool implicit = (access & kOnDemand) && addr == nullptr && length == SIZE_MAX;
  if (implicit && iova != 0) return EINVAL;
  if (!implicit && (length == 0 || addr == nullptr)) return EINVAL;
  if (length > impl_->core.config.limits.max_mr_size) return EINVAL;
  if (iova + length < iova) return EINVAL;
  // C10-?? remote write or atomic access requires local write access (11.2.8.1).
  if ((access & (kRemoteWrite | kRemoteAtomic)) && !(access & kLocalWrite)) return EINVAL;
  Mr* mr = impl_->core.mem.add(pd, addr, length, iova, access, impl_->core.config.limits.max_mr);
  if (mr == nullptr) return ENOMEM;
  ++pd->users;
  out.mr = mr;
  out.lkey = out.rkey = mr->key;
  impl_->core.publish_mr(*mr);
  return 0;
}

Errno Device::rereg_mr(Mr* mr, uint32_t flags, Pd* pd, void* addr, size_t length, uint64_t iova,
                       uint32_t access, MrInfo& out) {
  constexpr uint32_t kTranslation = 1, kChangePd = 2, kChangeAccess = 4;
  Impl& d = *impl_;
  d.drain_direct();
  if (!d.core.mem.has_mr(mr)) return EINVAL;
  if (flags == 0 || (flags & ~(kTranslation | kChangePd | kChangeAccess))) return EINVAL;
  if ((flags & kChangePd) && !d.has_pd(pd)) return EINVAL;
  if (mr->windows > 0) return EBUSY;  // windows bound to it would change under their users
  const uint32_t new_access = (flags & kChangeAccess) ? access : mr->access;
  if ((new_access & (kRemoteWrite | kRemoteAtomic)) && !(new_access & kLocalWrite)) return EINVAL;
  if (flags & kTranslation) {
    if (addr == nullptr || length == 0 || length > d.core.config.limits.max_mr_size ||
        iova + length < iova)
      return EINVAL;
  } else if ((flags & kChangeAccess) && (new_access & kOnDemand) != (mr->access & kOnDemand)) {
    return EINVAL;  // ODP or not is a property of the translation
  }
  // Everything checked: apply. The keys stay (IBA 10.6.4: a reregistered region keeps its
  // L_Key and R_Key here; requests already in flight see the new attributes). A direct
  // copy through the old translation finishes first.
  d.core.retract_mr(*mr);
  if (flags & kChangePd) {
    --mr->pd->users;
    mr->pd = pd;
    ++pd->users;
  }
  if (flags & kTranslation) {
    mr->host = static_cast<uint8_t*>(addr);
    mr->iova = iova;
    mr->length = length;
  }
  mr->access = new_access;
  out.mr = mr;
  out.lkey = out.rkey = mr->key;
  d.core.publish_mr(*mr);
  return 0;
}

Errno Device::advise_mr(Pd* pd, uint32_t advice, uint32_t flags, const Sge* sges, size_t n) {
  if (!impl_->has_pd(pd)) return EINVAL;
  return odp_advise(impl_->core.mem, pd, advice, flags, sges, n);
}

Errno Device::dereg_mr(Mr* mr) {
  impl_->drain_direct();  // copies submitted before the deregistration finish first
  if (!impl_->core.mem.has_mr(mr)) return EINVAL;
  if (mr->windows > 0) return EINVAL;  // windows still bound to it (as rxe)
  Pd* pd = mr->pd;
  impl_->core.retract_mr(*mr);  // no peer copies through it once this returns
  impl_->core.mem.remove(mr);
  --pd->users;
  return 0;
}

// --- CQ -------------------------------------------------------------------------------------

Cq* Device::create_cq(uint32_t& cqe, void* user_context) {
  const DeviceLimits& l = impl_->core.config.limits;
  if (cqe == 0 || cqe > l.max_cqe || impl_->cqs.size() >= l.max_cq) return nullptr;
  impl_->cqs.push_back(std::make_unique<Cq>(cqe, user_context));
  return impl_->cqs.back().get();
}

Errno Device::destroy_cq(Cq* cq) {
  auto& v = impl_->cqs;
  auto it = std::find_if(v.begin(), v.end(), [&](auto& c) { return c.get() == cq; });
  if (it == v.end()) return EINVAL;
  if (cq->users > 0) return EBUSY;
  v.erase(it);
  return 0;
}

int Device::poll_cq(Cq* cq, WorkCompletion* out, int n) {
  if (cq == nullptr || n <= 0) return 0;
  // Held copies that would complete with a CQE are performed now; unsignaled ones may wait
  // for the rest of the burst, but not longer than kDirectHoldMaxNs (a peer may be waiting
  // for their data while this program polls).
  Core& c = impl_->core;
  if (!c.direct_ops.empty() &&
      (c.direct_signaled > 0 || c.now() - c.direct_first_ns >= kDirectHoldMaxNs))
    impl_->drain_direct();
  return cq->poll(out, n);
}

Errno Device::req_notify_cq(Cq* cq, bool solicited_only) {
  if (cq == nullptr) return EINVAL;
  cq->arm(solicited_only);
  return 0;
}

Errno Device::resize_cq(Cq* cq, uint32_t& cqe) {
  if (!impl_->has_cq(cq)) return EINVAL;
  if (cqe == 0 || cqe > impl_->core.config.limits.max_cqe) return EINVAL;
  return cq->resize(cqe) ? 0 : EINVAL;
}

// --- QP -------------------------------------------------------------------------------------

Qp* Device::create_qp(QpInitAttr& init, Errno& err) {
  Impl& d = *impl_;
  const DeviceLimits& l = d.core.config.limits;
  err = 0;
  bool known = init.type == QpType::kRc || init.type == QpType::kUc || init.type == QpType::kUd;
  if (!known || !d.has_pd(init.pd) || !d.has_cq(init.send_cq) ||
      !d.has_cq(init.recv_cq)) {
    err = EINVAL;
    return nullptr;
  }
  if (init.srq != nullptr && !d.has_srq(init.srq)) {
    err = EINVAL;
    return nullptr;
  }
  QpCap& cap = init.cap;
  if (init.srq != nullptr) cap.max_recv_wr = cap.max_recv_sge = 0;  // ignored with an SRQ
  if (cap.max_send_wr > l.max_qp_wr || cap.max_recv_wr > l.max_qp_wr ||
      cap.max_send_sge > l.max_sge || cap.max_recv_sge > l.max_sge ||
      cap.max_inline_data > l.max_inline_data) {
    err = EINVAL;
    return nullptr;
  }
  if (d.qps.size() >= l.max_qp) {
    err = ENOMEM;
    return nullptr;
  }
  auto qp = std::make_unique<Qp>();
  while (d.qps.count(d.next_qpn) || d.next_qpn < 2) d.next_qpn = (d.next_qpn + 1) & 0xffffff;
  qp->qpn = d.next_qpn;
  d.next_qpn = (d.next_qpn + 1) & 0xffffff;
  qp->type = init.type;
  qp->pd = init.pd;
  qp->send_cq = init.send_cq;
  qp->recv_cq = init.recv_cq;
  qp->sq_sig_all = init.sq_sig_all;
  qp->user_context = init.user_context;
  // Granted capabilities: at least what was asked for (inline data up to the device limit).
  if (cap.max_send_wr == 0) cap.max_send_wr = 1;
  if (cap.max_send_sge == 0) cap.max_send_sge = 1;
  if (cap.max_recv_sge == 0 && init.srq == nullptr) cap.max_recv_sge = 1;
  cap.max_inline_data = l.max_inline_data;
  qp->cap = cap;
  qp->attr.cap = cap;
  qp->attr.qp_state = QpState::kReset;
  if (init.type == QpType::kUd) qp->attr.path_mtu = l.active_mtu;  // a datagram's limit
  qp->src_port = d.core.port.source_port_for(qp->qpn);
  ++init.pd->users;
  ++init.send_cq->users;
  ++init.recv_cq->users;
  if (init.srq != nullptr) {
    qp->srq = init.srq;
    ++init.srq->users;
  }
  Qp* raw = qp.get();
  d.qps.emplace(raw->qpn, std::move(qp));
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
    const Gid& g = a.ah.dgid;
    qp.ip.dst = {};
    if (g.is_ipv4_mapped()) std::memcpy(qp.ip.dst.data(), g.raw.data() + 12, 4);
    else std::memcpy(qp.ip.dst.data(), g.raw.data(), 16);
  }
}

Errno Device::modify_qp(Qp* qp, const QpAttr& attr, uint32_t mask) {
  Impl& d = *impl_;
  if (qp == nullptr) return EINVAL;
  d.drain_direct();
  const DeviceLimits& l = d.core.config.limits;
  Errno e = validate_modify(*qp, attr, mask, l.max_mtu, static_cast<uint8_t>(l.max_qp_rd_atom));
  if (e != 0) return e;
  QpState cur = qp->state();
  QpState next = (mask & kAttrState) ? attr.qp_state : cur;
  if ((mask & kAttrAv) && attr.ah.dgid.is_ipv4_mapped() != d.core.config.gid.is_ipv4_mapped())
    return EINVAL;  // one address family per device
  d.apply(*qp, attr, mask);
  if (next == cur && next != QpState::kReset) {
    d.core.publish_qp(*qp);
    d.finish();
    return 0;
  }
  switch (next) {
    case QpState::kReset: {
      d.core.inflight -= qp->req.counted_inflight;
      if (qp->req.budget_wait)
        d.core.budget_waiters.erase(
            std::remove(d.core.budget_waiters.begin(), d.core.budget_waiters.end(), qp),
            d.core.budget_waiters.end());
      qp->sq.clear();
      qp->rq.clear();
      qp->req = RequesterState{};
      qp->resp.op = ResponderState::Op::kNone;
      qp->resp.have_recv = false;
      qp->resp.ack_pending = false;
      qp->resp.nak_sent = false;
      qp->resp.msn = 0;
      qp->resp.ack_queue.clear();
      qp->attr.qp_state = QpState::kReset;
      break;
    }
    case QpState::kInit:
      qp->attr.qp_state = next;
      break;
    case QpState::kRtr:
      qp->resp.epsn = qp->attr.rq_psn;
      qp->resp.msn = 0;
      qp->resp.nak_sent = false;
      qp->resp.ack_queue.reset(qp->attr.max_dest_rd_atomic ? qp->attr.max_dest_rd_atomic : 1);
      qp->attr.qp_state = next;
      break;
    case QpState::kRts: {
      RequesterState& r = qp->req;
      if (cur == QpState::kRtr) {
        r = RequesterState{};
        r.next_psn = r.next_new_psn = r.una = r.high_psn = qp->attr.sq_psn;
        r.retry_left = qp->attr.retry_cnt;
        r.rnr_left = qp->attr.rnr_retry;
      }
      qp->attr.qp_state = next;
      d.core.mark_tx_ready(*qp);
      break;
    }
    case QpState::kSqd:
      qp->attr.qp_state = next;
      qp->sq_drain_notify = (mask & kAttrEnSqdAsyncNotify) != 0;
      d.core.mark_tx_ready(*qp);  // reports the drain at once if nothing is outstanding
      break;
    case QpState::kErr:
      d.core.enter_error(*qp);
      break;
    default:
      return EINVAL;
  }
  d.core.publish_qp(*qp);
  d.finish();
  return 0;
}

Errno Device::query_qp(const Qp* qp, QpAttr& attr, QpInitAttr& init) const {
  if (qp == nullptr) return EINVAL;
  attr = qp->attr;
  attr.cur_qp_state = qp->state();
  attr.cap = qp->cap;
  attr.sq_draining = false;
  if (qp->state() == QpState::kRts || qp->state() == QpState::kSqd)
    attr.sq_psn = qp->req.next_new_psn;
  init.type = qp->type;
  init.pd = qp->pd;
  init.send_cq = qp->send_cq;
  init.recv_cq = qp->recv_cq;
  init.srq = qp->srq;
  init.cap = qp->cap;
  init.sq_sig_all = qp->sq_sig_all;
  init.user_context = qp->user_context;
  return 0;
}

Errno Device::destroy_qp(Qp* qp) {
  Impl& d = *impl_;
  if (qp == nullptr || d.find_qp(qp->qpn) != qp) return EINVAL;
  d.drain_direct();
  auto drop = [&](std::vector<Qp*>& v) { v.erase(std::remove(v.begin(), v.end(), qp), v.end()); };
  drop(d.core.ack_pending);
  drop(d.core.tx_ready);
  drop(d.core.budget_waiters);
  d.core.inflight -= qp->req.counted_inflight;
  ud_forget_qp(d.core, *qp);
  d.core.retract_qp(*qp);
  --qp->pd->users;
  --qp->send_cq->users;
  --qp->recv_cq->users;
  if (qp->srq != nullptr) --qp->srq->users;
  d.qps.erase(qp->qpn);
  return 0;
}

// --- SRQ (srq.cc holds the queue itself) -----------------------------------------------------

Srq* Device::create_srq(Pd* pd, SrqAttr& attr, void* user_context, Errno& err) {
  Impl& d = *impl_;
  err = d.has_pd(pd) ? srq_check_init(d.core.config.limits, attr) : EINVAL;
  if (err == 0 && d.srqs.size() >= d.core.config.limits.max_srq) err = ENOMEM;
  if (err != 0) return nullptr;
  auto srq = std::make_unique<Srq>();
  srq->pd = pd;
  srq->user_context = user_context;
  srq->max_wr = attr.max_wr;
  srq->max_sge = attr.max_sge;
  ++pd->users;
  d.srqs.push_back(std::move(srq));
  return d.srqs.back().get();
}

Errno Device::modify_srq(Srq* srq, const SrqAttr& attr, uint32_t mask) {
  if (!impl_->has_srq(srq)) return EINVAL;
  return srq_modify(impl_->core.config.limits, *srq, attr, mask);
}

Errno Device::query_srq(const Srq* srq, SrqAttr& attr) const {
  if (!impl_->has_srq(srq)) return EINVAL;
  attr.max_wr = srq->max_wr;
  attr.max_sge = srq->max_sge;
  attr.srq_limit = srq->limit;
  return 0;
}

Errno Device::destroy_srq(Srq* srq) {
  auto& v = impl_->srqs;
  auto it = std::find_if(v.begin(), v.end(), [&](auto& s) { return s.get() == srq; });
  if (it == v.end()) return EINVAL;
  if (srq->users > 0) return EBUSY;
  --srq->pd->users;
  v.erase(it);
  return 0;
}

Errno Device::post_srq_recv(Srq* srq, const RecvWr* wrs, size_t n, size_t* bad) {
  if (!impl_->has_srq(srq)) return EINVAL;
  for (size_t i = 0; i < n; ++i) {
    if (Errno e = srq_post(*srq, wrs[i])) {
      if (bad) *bad = i;
      return e;
    }
  }
  return 0;
}

// --- memory windows (mw.cc executes binds and invalidations) ---------------------------------

Mw* Device::alloc_mw(Pd* pd, uint8_t type, uint32_t& rkey, Errno& err) {
  Impl& d = *impl_;
  err = 0;
  if (!d.has_pd(pd) || (type != 1 && type != 2)) {
    err = EINVAL;
    return nullptr;
  }
  Mw* mw = d.core.mem.add_mw(pd, type, d.core.config.limits.max_mw);
  if (mw == nullptr) {
    err = ENOMEM;
    return nullptr;
  }
  ++pd->users;
  rkey = mw->rkey;
  return mw;
}

Errno Device::dealloc_mw(Mw* mw) {
  if (!impl_->core.mem.has_mw(mw)) return EINVAL;
  Pd* pd = mw->pd;
  impl_->core.mem.remove_mw(mw);  // a bound window is unbound first
  --pd->users;
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

// --- address handles and multicast (ud.cc) -------------------------------------------------

Ah* Device::create_ah(Pd* pd, const AddressVector& av, Errno& err) {
  if (!impl_->has_pd(pd)) {
    err = EINVAL;
    return nullptr;
  }
  return ud_create_ah(impl_->core, pd, av, err);
}

Errno Device::destroy_ah(Ah* ah) { return ud_destroy_ah(impl_->core, ah); }

Errno Device::attach_mcast(Qp* qp, const Gid& gid, uint16_t) {
  if (qp == nullptr || impl_->find_qp(qp->qpn) != qp) return EINVAL;
  return ud_attach_mcast(impl_->core, *qp, gid);
}

Errno Device::detach_mcast(Qp* qp, const Gid& gid, uint16_t) {
  if (qp == nullptr || impl_->find_qp(qp->qpn) != qp) return EINVAL;
  return ud_detach_mcast(impl_->core, *qp, gid);
}

// --- fast path ------------------------------------------------------------------------------

Errno Device::post_send(Qp* qp, const SendWr* wrs, size_t n, size_t* bad) {
  Impl& d = *impl_;
  if (qp == nullptr) return EINVAL;
  Errno e = 0;
  for (size_t i = 0; i < n; ++i) {
    e = requester_post(d.core, *qp, wrs[i]);
    if (e != 0) {
      if (bad) *bad = i;
      break;
    }
  }
  if (qp->state() == QpState::kErr) d.core.flush_queues(*qp);  // C10-?? flushed at once
  else d.core.mark_tx_ready(*qp);
  d.finish();
  return e;
}

Errno Device::post_recv(Qp* qp, const RecvWr* wrs, size_t n, size_t* bad) {
  Impl& d = *impl_;
  if (qp == nullptr) return EINVAL;
  if (qp->srq != nullptr && n > 0) {  // its receives are posted to the SRQ (as rxe)
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

void Device::Impl::dispatch(const WirePacket& pkt) {
  Counters& ctr = core.ctr;
  ++ctr.rx_packets;
  ctr.rx_bytes += pkt.data.size();
  switch (icrc_peers.verify(pkt)) {
    case wire::IcrcVerdict::kOk: break;
    case wire::IcrcVerdict::kOkRecoveredIpId: ++ctr.rx_icrc_ip_id_recovered; break;
    case wire::IcrcVerdict::kBad: ++ctr.rx_icrc_errors; return;
  }
  wire::Packet p;
  if (wire::parse_packet(pkt.data, p) != wire::ParseError::kOk) {
    ++ctr.rx_malformed;
    return;
  }
  const wire::OpcodeInfo& info = wire::opcode_info(p.bth.opcode);
  if (info.transport == wire::Transport::kCnp) {
    ++ctr.rx_cnp;  // congestion control reacts here in a later issue
    return;
  }
  if (info.transport == wire::Transport::kUd && p.bth.dest_qp == kMulticastQpn) {
    ++ctr.rx_send;
    ud_receive_multicast(core, p, pkt.ip);  // ud.cc
    return;
  }
  Qp* qp = find_qp(p.bth.dest_qp);
  if (qp == nullptr) {
    ++ctr.rx_unknown_qp;
    return;
  }
  const wire::Transport want = qp->type == QpType::kUd   ? wire::Transport::kUd
                               : qp->type == QpType::kUc ? wire::Transport::kUc
                                                         : wire::Transport::kRc;
  if (info.transport != want) {
    ++ctr.rx_malformed;  // an opcode of another transport than the QP's (9.6.1.? check)
    return;
  }
  if (qp->type == QpType::kUd) {
    // A datagram QP takes packets from any source; its Q_Key guards it (ud.cc).
    ++ctr.rx_send;
    QpState s = qp->state();
    if (s != QpState::kRtr && s != QpState::kRts && s != QpState::kSqd && s != QpState::kSqe) {
      ++ctr.rx_bad_state;
      return;
    }
    ud_receive(core, *qp, p, pkt.ip);
    return;
  }
  // A connected QP takes packets from its peer's address only (IBA 9.6.1: for RC the source
  // must be the path the QP was connected with). A stray sender — say a new process on the
  // address of a dead peer, whose QPNs and PSN ranges may repeat — never reaches memory.
  if (qp->state() != QpState::kReset && qp->state() != QpState::kInit &&
      (pkt.ip.ipv6 != qp->ip.ipv6 || pkt.ip.src != qp->ip.dst)) {
    ++ctr.rx_wrong_source;
    return;
  }
  bool request = false;
  switch (info.kind) {
    case wire::OpKind::kSend: ++ctr.rx_send; request = true; break;
    case wire::OpKind::kWrite: ++ctr.rx_write; request = true; break;
    case wire::OpKind::kReadRequest: ++ctr.rx_read_request; request = true; break;
    case wire::OpKind::kCompareSwap:
    case wire::OpKind::kFetchAdd: ++ctr.rx_atomic; request = true; break;
    case wire::OpKind::kReadResponse: ++ctr.rx_read_response; break;
    case wire::OpKind::kAtomicAck: ++ctr.rx_atomic_ack; break;
    case wire::OpKind::kAck: break;
    case wire::OpKind::kCnp: return;
  }
  QpState s = qp->state();
  if (request) {
    // The responder works from RTR on (IBA 10.3.1: RTR accepts requests, sends responses).
    // (UC also in SQE: a send queue error leaves the receive side working, IBA 10.3.1.)
    if (s != QpState::kRtr && s != QpState::kRts && s != QpState::kSqd &&
        !(s == QpState::kSqe && qp->type == QpType::kUc)) {
      ++ctr.rx_bad_state;
      return;
    }
    if (qp->type == QpType::kUc) uc_receive(core, *qp, p);  // ud.cc
    else responder_receive(core, *qp, p);
  } else {
    if (s != QpState::kRts && s != QpState::kSqd) {
      ++ctr.rx_bad_state;
      return;
    }
    completer_receive(core, *qp, p);
  }
}

void Device::receive(std::span<const WirePacket> batch) {
  for (const WirePacket& pkt : batch) impl_->dispatch(pkt);
  impl_->finish();
}

uint64_t Device::next_timer_ns() const { return impl_->core.timer_hint; }

void Device::on_timer() {
  Impl& d = *impl_;
  for (auto& [qpn, qp] : d.qps) completer_on_timer(d.core, *qp);
  d.finish();
  // The exact next deadline, now that the due timers have run (and re-armed).
  uint64_t t = UINT64_MAX;
  for (auto& [qpn, qp] : d.qps) {
    if (qp->req.ack_deadline != 0) t = std::min(t, qp->req.ack_deadline);
    if (qp->req.rnr_deadline != 0) t = std::min(t, qp->req.rnr_deadline);
  }
  d.core.timer_hint = t;
}

void Device::set_direct_hold(bool hold) { impl_->core.direct_hold = hold; }
void Device::direct_flush() { impl_->drain_direct(); }
bool Device::direct_queued() const { return !impl_->core.direct_ops.empty(); }

bool Device::has_pending_tx() const {
  if (!impl_->core.direct_ops.empty()) return true;
  for (auto& [qpn, qp] : impl_->qps)
    if (qp->state() == QpState::kRts && qp->req.cursor < qp->sq.size() &&
        qp->req.rnr_deadline == 0)
      return true;
  return false;
}

}  // namespace vrnic::engine
