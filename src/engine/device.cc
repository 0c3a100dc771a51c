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
#include "wire/opcode.h"

namespace vrnic::engine {

struct Device::Impl {
  Impl(const DeviceConfig& cfg, PacketPort& port, Clock& clock, EventSink& events)
      : core(cfg, port, clock, events) {}

  Core core;
  IcrcPeers icrc_peers;
  std::vector<std::unique_ptr<Pd>> pds;
  std::vector<std::unique_ptr<Cq>> cqs;
  std::unordered_map<uint32_t, std::unique_ptr<Qp>> qps;
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

  // Sends what the engine call produced: coalesced ACKs, then requester packets.
  void finish() {
    for (size_t i = 0; i < core.ack_pending.size(); ++i) responder_flush_ack(core, *core.ack_pending[i]);
    core.ack_pending.clear();
    for (size_t i = 0; i < core.tx_ready.size(); ++i) requester_progress(core, *core.tx_ready[i]);
    core.tx_ready.clear();
    core.tx.flush(core.port);
  }

  void dispatch(const WirePacket& pkt);
  void apply(Qp& qp, const QpAttr& a, uint32_t mask);
};

Device::Device(const DeviceConfig& config, PacketPort& port, Clock& clock, EventSink& events)
    : impl_(std::make_unique<Impl>(config, port, clock, events)) {}

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
  if (length == 0 || addr == nullptr) return EINVAL;
  if (length > impl_->core.config.limits.max_mr_size) return EINVAL;
  if (iova + length < iova) return EINVAL;
  // C10-?? remote write or atomic access requires local write access (11.2.8.1).
  if ((access & (kRemoteWrite | kRemoteAtomic)) && !(access & kLocalWrite)) return EINVAL;
  if (access & (kMwBind | kOnDemand)) return EOPNOTSUPP;
  Mr* mr = impl_->core.mem.add(pd, addr, length, iova, access, impl_->core.config.limits.max_mr);
  if (mr == nullptr) return ENOMEM;
  ++pd->users;
  out.mr = mr;
  out.lkey = out.rkey = mr->key;
  return 0;
}

Errno Device::dereg_mr(Mr* mr) {
  if (mr == nullptr || impl_->core.mem.find(mr->key) != mr) return EINVAL;
  Pd* pd = mr->pd;
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
  return cq->poll(out, n);
}

Errno Device::req_notify_cq(Cq* cq, bool solicited_only) {
  if (cq == nullptr) return EINVAL;
  cq->arm(solicited_only);
  return 0;
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
  if (init.srq != nullptr) {
    err = EOPNOTSUPP;
    return nullptr;
  }
  QpCap& cap = init.cap;
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
  if (cap.max_recv_sge == 0) cap.max_recv_sge = 1;
  cap.max_inline_data = l.max_inline_data;
  qp->cap = cap;
  qp->attr.cap = cap;
  qp->attr.qp_state = QpState::kReset;
  if (init.type == QpType::kUd) qp->attr.path_mtu = l.active_mtu;  // a datagram's limit
  qp->src_port = d.core.port.source_port_for(qp->qpn);
  ++init.pd->users;
  ++init.send_cq->users;
  ++init.recv_cq->users;
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
  const DeviceLimits& l = d.core.config.limits;
  Errno e = validate_modify(*qp, attr, mask, l.max_mtu, static_cast<uint8_t>(l.max_qp_rd_atom));
  if (e != 0) return e;
  QpState cur = qp->state();
  QpState next = (mask & kAttrState) ? attr.qp_state : cur;
  if ((mask & kAttrAv) && attr.ah.dgid.is_ipv4_mapped() != d.core.config.gid.is_ipv4_mapped())
    return EINVAL;  // one address family per device
  d.apply(*qp, attr, mask);
  if (next == cur && next != QpState::kReset) {
    d.finish();
    return 0;
  }
  switch (next) {
    case QpState::kReset: {
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
  init.srq = nullptr;
  init.cap = qp->cap;
  init.sq_sig_all = qp->sq_sig_all;
  init.user_context = qp->user_context;
  return 0;
}

Errno Device::destroy_qp(Qp* qp) {
  Impl& d = *impl_;
  if (qp == nullptr || d.find_qp(qp->qpn) != qp) return EINVAL;
  auto drop = [&](std::vector<Qp*>& v) { v.erase(std::remove(v.begin(), v.end(), qp), v.end()); };
  drop(d.core.ack_pending);
  drop(d.core.tx_ready);
  ud_forget_qp(d.core, *qp);
  --qp->pd->users;
  --qp->send_cq->users;
  --qp->recv_cq->users;
  d.qps.erase(qp->qpn);
  return 0;
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

uint64_t Device::next_timer_ns() const {
  uint64_t t = UINT64_MAX;
  for (auto& [qpn, qp] : impl_->qps) {
    if (qp->req.ack_deadline != 0) t = std::min(t, qp->req.ack_deadline);
    if (qp->req.rnr_deadline != 0) t = std::min(t, qp->req.rnr_deadline);
  }
  return t;
}

void Device::on_timer() {
  Impl& d = *impl_;
  for (auto& [qpn, qp] : d.qps) completer_on_timer(d.core, *qp);
  d.finish();
}

bool Device::has_pending_tx() const {
  for (auto& [qpn, qp] : impl_->qps)
    if (qp->state() == QpState::kRts && qp->req.cursor < qp->sq.size() &&
        qp->req.rnr_deadline == 0)
      return true;
  return false;
}

}  // namespace vrnic::engine
