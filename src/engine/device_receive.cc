// Device: received packets routed by destination QPN and QP state, timers, the direct-copy hold.
#include "engine/device_impl.h"

#include <algorithm>
#include <cerrno>

#include "engine/completer.h"
#include "engine/congestion.h"
#include "engine/gsi.h"
#include "wire/bytes.h"
#include "wire/cm_mad.h"
#include "wire/opcode.h"

namespace vrnic::engine {

namespace {

// Authenticated mode (packet_auth.h): a packet to a QP with keys must carry a right trailer
// under a number not seen before; it is checked before anything else of it is read. Returns
// the packet to parse (the trailer cut off), or an empty span (counted) to drop it.
std::span<const uint8_t> authenticate(Counters& ctr, PacketAuth& auth,
                                      std::span<const uint8_t> data) {
  if (auth.empty() || data.size() < wire::kBthSize + wire::kIcrcSize) return data;
  size_t body = 0;
  const uint32_t dest_qp = wire::get24(data.data() + 5);
  switch (auth.open(dest_qp, data.first(data.size() - wire::kIcrcSize), body)) {
    case AuthVerdict::kPlain: return data;
    // The ICRC was checked over the whole packet; the parser skips the last 4 bytes of
    // what it gets, here the trailer's first ones.
    case AuthVerdict::kOk:
      ++ctr.rx_auth_ok;
      return data.first(body + wire::kIcrcSize);
    case AuthVerdict::kForged: ++ctr.rx_auth_failed; return {};
    case AuthVerdict::kReplayed: ++ctr.rx_auth_replayed; return {};
  }
  return {};
}

// Counts the packet, checks its ICRC (and its trailer, in authenticated mode) and parses it;
// false (counted) if it is dropped.
bool check_and_parse(Counters& ctr, IcrcPeers& icrc_peers, PacketAuth& auth,
                     const WirePacket& pkt, wire::Packet& p) {
  ++ctr.rx_packets;
  ctr.rx_bytes += pkt.data.size();
  switch (icrc_peers.verify(pkt)) {
    case wire::IcrcVerdict::kOk: break;
    case wire::IcrcVerdict::kOkRecoveredIpId: ++ctr.rx_icrc_ip_id_recovered; break;
    case wire::IcrcVerdict::kBad: ++ctr.rx_icrc_errors; return false;
  }
  const std::span<const uint8_t> data = authenticate(ctr, auth, pkt.data);
  if (data.empty()) return false;
  if (wire::parse_packet(data, p) != wire::ParseError::kOk) {
    ++ctr.rx_malformed;
    return false;
  }
  return true;
}

// A datagram QP takes packets from any source; its Q_Key guards it (ud.cc).
void receive_ud(Core& core, Qp& qp, const wire::Packet& p, const WirePacket& pkt) {
  ++core.ctr.rx_send;
  QpState s = qp.state();
  if (s != QpState::kRtr && s != QpState::kRts && s != QpState::kSqd && s != QpState::kSqe) {
    ++core.ctr.rx_bad_state;
    return;
  }
  if ((pkt.tos & kEcnMask) == kEcnCe) cc_on_ce(core, qp, p.deth.src_qp, pkt.ip);
  ud_receive(core, qp, p, pkt.ip);
}

// Counts a connected packet by kind; true for a request (to the responder), false for a
// response or ACK (to the completer).
bool count_kind(Counters& ctr, wire::OpKind kind) {
  switch (kind) {
    case wire::OpKind::kSend: ++ctr.rx_send; return true;
    case wire::OpKind::kWrite: ++ctr.rx_write; return true;
    case wire::OpKind::kReadRequest: ++ctr.rx_read_request; return true;
    case wire::OpKind::kCompareSwap:
    case wire::OpKind::kFetchAdd:
    case wire::OpKind::kAtomicWrite: ++ctr.rx_atomic; return true;
    case wire::OpKind::kReadResponse: ++ctr.rx_read_response; return false;
    case wire::OpKind::kAtomicAck: ++ctr.rx_atomic_ack; return false;
    case wire::OpKind::kAck:
    case wire::OpKind::kCnp: return false;
  }
  return false;
}

// An RC or UC packet: from the connected peer only, to the responder or the completer as
// the QP's state allows.
void receive_connected(Core& core, Qp& qp, const wire::Packet& p, const WirePacket& pkt,
                       wire::OpKind kind) {
  Counters& ctr = core.ctr;
  // IBA 9.6.1: for RC the source must be the path the QP was connected with. A stray
  // sender — say a new process on the address of a dead peer, whose QPNs and PSN ranges may
  // repeat — never reaches memory.
  if (qp.state() != QpState::kReset && qp.state() != QpState::kInit &&
      (pkt.ip.ipv6 != qp.ip.ipv6 || pkt.ip.src != qp.ip.dst)) {
    ++ctr.rx_wrong_source;
    return;
  }
  if ((pkt.tos & kEcnMask) == kEcnCe) cc_on_ce(core, qp, qp.attr.dest_qp_num, pkt.ip);
  const bool request = count_kind(ctr, kind);
  QpState s = qp.state();
  if (request) {
    // The responder works from RTR on (IBA 10.3.1: RTR accepts requests, sends responses).
    // (UC also in SQE: a send queue error leaves the receive side working, IBA 10.3.1.)
    if (s != QpState::kRtr && s != QpState::kRts && s != QpState::kSqd &&
        !(s == QpState::kSqe && qp.type == QpType::kUc)) {
      ++ctr.rx_bad_state;
      return;
    }
    responder_receive(core, qp, p);  // RC, XRC and UC
  } else {
    if (s != QpState::kRts && s != QpState::kSqd) {
      ++ctr.rx_bad_state;
      return;
    }
    completer_receive(core, qp, p);
  }
}

}  // namespace

void Device::Impl::dispatch(const WirePacket& pkt) {
  Counters& ctr = core.ctr;
  wire::Packet p;
  if (!check_and_parse(ctr, icrc_peers, core.auth, pkt, p)) return;
  const wire::OpcodeInfo& info = wire::opcode_info(p.bth.opcode);
  if (info.transport == wire::Transport::kCnp) {
    ++ctr.rx_cnp;
    cc_receive_cnp(core, find_qp(p.bth.dest_qp));  // the reaction point (congestion.h)
    return;
  }
  if (info.transport == wire::Transport::kUd && p.bth.dest_qp == kMulticastQpn) {
    ++ctr.rx_send;
    ud_receive_multicast(core, p, pkt.ip);  // ud.cc
    return;
  }
  if (p.bth.dest_qp == wire::cm::kGsiQpn) {
    gsi_receive(core, p, pkt.ip);  // gsi.cc
    return;
  }
  Qp* qp = find_qp(p.bth.dest_qp);
  if (qp == nullptr) {
    ++ctr.rx_unknown_qp;
    return;
  }
  const wire::Transport want = qp->type == QpType::kUd   ? wire::Transport::kUd
                               : qp->type == QpType::kUc ? wire::Transport::kUc
                               : is_xrc(qp->type)        ? wire::Transport::kXrc
                                                         : wire::Transport::kRc;
  if (info.transport != want) {
    ++ctr.rx_malformed;  // an opcode of another transport than the QP's (IBA 9.6.1)
    return;
  }
  if (want == wire::Transport::kXrc) {
    // Requests go to target QPs, responses to initiators only. From here on the RC code
    // handles the packet: the operation bits are RC's, the XRCETH stays in p.xrc_srqn.
    if (info.has(wire::kHasXrceth) != (qp->type == QpType::kXrcTgt)) {
      ++ctr.rx_malformed;
      return;
    }
    p.bth.opcode = wire::xrc_to_rc(p.bth.opcode);
  }
  if (qp->type == QpType::kUd) return receive_ud(core, *qp, p, pkt);
  receive_connected(core, *qp, p, pkt, info.kind);
}

Device::ReceiveResult Device::receive(std::span<const WirePacket> batch, uint64_t hold_acks_ns,
                                      uint64_t crossed_hold_ns) {
  Core& c = impl_->core;
  const uint64_t tx = c.ctr.tx_packets, atomics = c.ctr.rx_atomic,
                 replayed = c.ctr.duplicate_atomics_replayed;
  c.hold_acks_ns = hold_acks_ns;
  c.hold_crossed_ns = crossed_hold_ns;
  if (hold_acks_ns != 0) c.hold_window_ns = hold_acks_ns;
  for (const WirePacket& pkt : batch) impl_->dispatch(pkt);
  impl_->finish();
  c.hold_acks_ns = 0;
  c.hold_crossed_ns = UINT64_MAX;
  ReceiveResult r;
  r.sent = static_cast<uint32_t>(c.ctr.tx_packets - tx);
  r.acks_held = c.held_acks_until != 0;
  r.atomic_requests = static_cast<uint32_t>(c.ctr.rx_atomic - atomics);
  r.atomics_replayed = static_cast<uint32_t>(c.ctr.duplicate_atomics_replayed - replayed);
  return r;
}

uint64_t Device::held_acks_deadline() const {
  const uint64_t t = impl_->core.held_acks_until;
  return t == 0 ? UINT64_MAX : t;
}

void Device::release_acks() { impl_->release_held_acks(); }

void Device::send_gsi(const wire::IpUdpInfo& to, std::span<const uint8_t, 256> mad) {
  gsi_send(impl_->core, to, mad);
  impl_->finish();
}

uint64_t Device::next_timer_ns() const { return impl_->core.timer_hint; }

namespace {

uint64_t qp_wake(const Qp& qp) {
  uint64_t t = cc_deadline(qp);
  if (qp.req.ack_deadline != 0) t = std::min(t, qp.req.ack_deadline);
  if (qp.req.rnr_deadline != 0) t = std::min(t, qp.req.rnr_deadline);
  return t;
}

void run_qp_timers(Core& c, Qp& qp) {
  completer_on_timer(c, qp);
  cc_on_timer(c, qp);  // the pacer and DCQCN (congestion.h)
}

}  // namespace

// Runs the timers of the QPs whose bound has come (the others have nothing due: their
// timer processing would change nothing, DCQCN's alpha included: dcqcn.cc), in the order of
// the QP table as a walk over every QP would, then arms the exact next deadline.
void Device::on_timer() {
  Impl& d = *impl_;
  Core& c = d.core;
  const uint64_t now = c.now();
  if (c.held_acks_until != 0 && c.held_acks_until <= now) {
    d.note_unanswered();
    d.flush_acks();
  }
  std::vector<Qp*>& due = d.timer_due;
  due.clear();
  c.timers.due(now, due);
  if (due.size() == 1) {
    run_qp_timers(c, *due.front());
  } else if (due.size() > 1) {
    for (auto& [qpn, qp] : d.qps)
      if (std::find(due.begin(), due.end(), qp.get()) != due.end()) run_qp_timers(c, *qp);
  }
  d.finish();
  for (Qp* qp : due) c.timers.set(*qp, qp_wake(*qp));
  uint64_t t = c.fire_due_cq_events();
  if (c.held_acks_until != 0) t = std::min(t, c.held_acks_until);
  c.timer_hint = c.timers.earliest(t, qp_wake);
}

void Device::set_direct_hold(bool hold) { impl_->core.direct_hold = hold; }
void Device::direct_flush() { impl_->drain_direct(); }
bool Device::direct_queued() const { return !impl_->core.direct_ops.empty(); }

void Device::set_tx_hold(bool hold) { impl_->core.tx_hold = hold; }
void Device::flush_tx() { impl_->core.tx.flush(impl_->core.port); }
bool Device::tx_queued() const { return impl_->core.tx.pending() > 0; }

void Device::qp_rates(std::vector<QpRate>& out) const {
  out.clear();
  const uint64_t now = impl_->core.now();
  for (auto& [qpn, qp] : impl_->qps) {
    const Dcqcn* rp = qp->cc.rp.get();
    if (rp == nullptr) continue;
    out.push_back({qpn, rp->limited(), rp->rate_bps(), rp->target_bps(), rp->alpha_at(now)});
  }
}

RateControl* Device::rate_control(uint32_t qpn) const {
  Qp* qp = impl_->find_qp(qpn);
  return qp == nullptr ? nullptr : qp->cc.ctl.get();
}

bool Device::has_pending_tx() const {
  if (!impl_->core.direct_ops.empty()) return true;
  for (auto& [qpn, qp] : impl_->qps)
    if (qp->state() == QpState::kRts && qp->req.cursor < qp->sq.size() &&
        qp->req.rnr_deadline == 0)
      return true;
  return false;
}

}  // namespace vrnic::engine
