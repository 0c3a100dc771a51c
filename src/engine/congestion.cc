// Congestion control in the device: ECT(0) marking, CNPs out (notification point), and the
// reaction point (DCQCN) fed with CNPs, sent bytes and time.
#include "engine/congestion.h"

#include <algorithm>

#include "engine/requester.h"
#include "wire/opcode.h"

namespace vrnic::engine {

namespace {

// Bytes on an Ethernet link around the UDP payload: Ethernet header and FCS, IP, UDP.
constexpr size_t kOverheadV4 = 14 + 4 + 20 + 8, kOverheadV6 = 14 + 4 + 40 + 8;

// The QP's controller from DeviceConfig::rate_control, made on first use (connected QPs
// only); null without a factory.
RateControl* controller(Core& c, Qp& qp) {
  if (c.config.rate_control == nullptr || qp.type == QpType::kUd) return nullptr;
  if (!qp.cc.ctl) qp.cc.ctl = c.config.rate_control->make(qp.qpn);
  return qp.cc.ctl.get();
}

}  // namespace

uint8_t data_tos(const Core& c, uint8_t traffic_class) {
  const DcqcnParams& p = c.config.cc;
  const uint8_t dscp = traffic_class != 0 ? traffic_class >> 2 : p.data_dscp;
  return static_cast<uint8_t>(dscp << 2 | (p.enabled ? kEcnEct0 : 0));
}

void cc_receive_cnp(Core& c, Qp* qp) {
  // RoCEv2 Annex A17.9.3: a CNP names the QP whose traffic was marked. Only connected QPs
  // keep a rate (a UD QP's packets go to many destinations).
  if (qp == nullptr || !c.config.cc.enabled || qp->type == QpType::kUd || !qp->sending()) {
    ++c.ctr.rp_cnp_ignored;
    return;
  }
  ++c.ctr.rp_cnp_handled;
  // Each CNP at its own time: a batch's CNPs are cut once per rate-reduce period, not once.
  const uint64_t now = c.precise_now();
  if (RateControl* ctl = controller(c, *qp)) {
    ctl->on_cnp(now);
    c.note_qp_deadline(*qp, ctl->next_event_ns());
    return;
  }
  CongestionState& cc = qp->cc;
  if (!cc.rp) cc.rp = std::make_unique<Dcqcn>(c.config.cc);
  cc.rp->on_cnp(now);
  c.note_qp_deadline(*qp, cc.rp->next_event_ns());
}

void cc_on_ce(Core& c, Qp& qp, uint32_t src_qpn, const wire::IpUdpInfo& from) {
  ++c.ctr.np_ecn_marked_roce_packets;
  const DcqcnParams& p = c.config.cc;
  if (!p.enabled) return;
  CongestionState& cc = qp.cc;
  // The batch's marks at their own times, so that min_time_between_cnps spaces the CNPs as
  // the marks came, not one per receive batch.
  const uint64_t now = c.precise_now();
  if (cc.cnp_sent && now - cc.last_cnp_ns < p.min_time_between_cnps_ns) return;
  cc.cnp_sent = true;
  cc.last_cnp_ns = now;
  wire::Packet cnp;
  cnp.bth.opcode = wire::kCnp;
  cnp.bth.dest_qp = src_qpn;
  cnp.bth.pkey = 0xffff;
  cnp.bth.becn = true;     // as ConnectX NICs send it
  cnp.bth.mig_req = false;
  wire::IpUdpInfo ip = c.local_ip;
  ip.src_port = qp.src_port;
  ip.ipv6 = from.ipv6;
  ip.dst = from.src;
  c.tx.start(cnp, 0, ip, static_cast<uint8_t>(p.cnp_dscp << 2), qp.qpn);  // not ECN-capable
  c.tx.commit(c.port, c.ctr);
  ++c.ctr.np_cnp_sent;
}

bool cc_pacer_holds(Core& c, Qp& qp) {
  CongestionState& cc = qp.cc;
  if (!cc.rp && !cc.ctl) return false;
  const uint64_t at = cc.ctl ? cc.ctl->next_send_ns() : cc.rp->next_send_ns();
  if (at <= c.now()) return false;
  cc.pace_deadline = at;
  c.note_qp_deadline(qp, at);
  return true;
}

bool cc_window_holds(const Qp& qp, uint32_t in_flight_packets) {
  const RateControl* ctl = qp.cc.ctl.get();
  return ctl != nullptr && in_flight_packets > 0 &&
         uint64_t{in_flight_packets} * qp.mtu() >= ctl->window_bytes();
}

namespace {
uint32_t ack_interval_of(const RateControl* ctl) {
  const uint32_t n = ctl != nullptr ? ctl->ack_interval() : 0;
  return n != 0 ? n : kAckReqInterval;
}
}  // namespace

uint32_t cc_ack_interval(Core& c, Qp& qp) { return ack_interval_of(controller(c, qp)); }

bool cc_acks_every_packet(const Qp& qp, uint32_t bytes, uint64_t ack_timeout_ns) {
  const Dcqcn* rp = qp.cc.rp.get();
  const RateControl* ctl = qp.cc.ctl.get();
  const double rate = ctl ? ctl->rate_bps() : rp && rp->limited() ? rp->rate_bps() : 0;
  if (rate <= 0 || ack_timeout_ns == 0) return false;
  const double interval_ns = ack_interval_of(ctl) * static_cast<double>(bytes) * 8e9 / rate;
  return interval_ns * 4 >= static_cast<double>(ack_timeout_ns);
}

void cc_on_sent(Core& c, Qp& qp, size_t bytes) {
  if (RateControl* ctl = controller(c, qp)) {
    ctl->on_sent(bytes + (qp.ip.ipv6 ? kOverheadV6 : kOverheadV4), c.now());
    c.note_qp_deadline(qp, ctl->next_event_ns());
    return;
  }
  CongestionState& cc = qp.cc;
  if (!cc.rp) {
    if (!c.config.cc.enabled || !c.config.cc.pace_at_line_rate) return;
    cc.rp = std::make_unique<Dcqcn>(c.config.cc);  // the serialiser's pace, no limiter yet
  }
  cc.rp->on_sent(bytes + (qp.ip.ipv6 ? kOverheadV6 : kOverheadV4), c.now());
  c.note_qp_deadline(qp, cc.rp->next_event_ns());
}

void cc_on_timer(Core& c, Qp& qp) {
  CongestionState& cc = qp.cc;
  const uint64_t now = c.now();
  if (cc.pace_deadline != 0 && now >= cc.pace_deadline) {
    cc.pace_deadline = 0;
    c.mark_tx_ready(qp);
  }
  if (cc.rp) cc.rp->advance(now);
  if (cc.ctl) cc.ctl->advance(now);
}

uint64_t cc_deadline(const Qp& qp) {
  const CongestionState& cc = qp.cc;
  uint64_t next = cc.rp ? cc.rp->next_event_ns() : UINT64_MAX;
  if (cc.ctl) next = std::min(next, cc.ctl->next_event_ns());
  if (cc.pace_deadline != 0) next = std::min(next, cc.pace_deadline);
  return next;
}

}  // namespace vrnic::engine
