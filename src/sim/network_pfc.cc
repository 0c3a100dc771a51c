// PFC (802.1Qbb) in the fabric: ingress accounting against XOFF/XON, PAUSE frames with
// quanta (refreshed while they stand, expiring without an XON) honoured per priority where
// PFC is on, the PFC watchdog, and the DCBX check of every link (network.h).
#include <algorithm>

#include "sim/network.h"

namespace vrnic::sim {

// A frame no longer buffered (sent or dropped) leaves its ingress port's count; at or below
// XON a paused upstream is resumed.
void Network::release_ingress(const Node& sw, const Packet& p) {
  if (p.ingress == kNone) return;
  if (sw.sw.mmu.enabled) return mmu_release(nodes_[ports_[p.ingress].node], p.ingress, p);
  Port& in = ports_[p.ingress];
  in.ingress_bytes[p.prio] -= p.wire_bytes();
  if (sw.sw.pfc && in.pause_sent[p.prio] && in.ingress_bytes[p.prio] <= sw.sw.xon)
    send_pfc(p.ingress, p.prio, false);
}

// A frame in through `port` with the shared-buffer MMU: admitted (reserve, shared pool or
// headroom) or dropped; PAUSE once its queue reaches the dynamic threshold or uses headroom.
bool Network::mmu_ingress(Node& sw, uint32_t port, const Packet& p) {
  Port& in = ports_[port];
  MmuQueue& q = in.mmu[p.prio];
  const MmuParams& m = sw.sw.mmu;
  if (!mmu_admit(m, sw.mmu, q, sw.sw.pfc ? in.mmu_headroom : 0, p.wire_bytes())) {
    ++in.drops;
    return false;
  }
  mmu_add(m, sw.mmu, q, p.wire_bytes());
  if (sw.sw.pfc && sw.sw.qos.pfc_on(p.prio) && !in.pause_sent[p.prio] &&
      mmu_should_pause(m, sw.mmu, q))
    send_pfc(port, p.prio, true);
  return true;
}

void Network::mmu_release(Node& sw, uint32_t port, const Packet& p) {
  Port& in = ports_[port];
  MmuQueue& q = in.mmu[p.prio];
  mmu_remove(sw.sw.mmu, sw.mmu, q, p.wire_bytes());
  if (sw.sw.pfc && in.pause_sent[p.prio] && mmu_should_resume(sw.sw.mmu, sw.mmu, q))
    send_pfc(port, p.prio, false);
}

uint64_t pause_ns(uint16_t quanta, double rate_bps) {
  return serialize_ns(uint64_t{quanta} * 512 / 8, rate_bps);
}

// A PFC frame (802.1Qbb) from `port` (a switch's ingress or a NIC's receive buffer) to the
// far end: it overtakes the queue (MAC control frames are not queued behind data) and takes
// effect after the link's delay. An XOFF carries the device's pause quanta and is sent again
// at half that time while it stands; an XON carries 0.
void Network::send_pfc(uint32_t port, uint8_t prio, bool pause) {
  Port& in = ports_[port];
  const Node& n = nodes_[in.node];
  const uint16_t quanta = pause ? (n.is_switch ? n.sw.pause_quanta : n.nic.pause_quanta) : 0;
  in.pause_sent[prio] = pause;
  ++in.xoff_gen[prio];
  if (pause) {
    ++in.pauses_sent;
    ++in.pauses_by_prio[prio];
  } else {
    ++in.resumes_by_prio[prio];
  }
  if (tap_ && !n.is_switch) tap_->pfc_frame(in.node, true, prio, quanta);
  const uint64_t now = clock_.now_ns();
  ev_.push(now + serialize_ns(kPauseFrameBytes, in.rate_bps) + in.delay_ns, EventKind::kPause,
           in.peer, prio, quanta);
  if (pause)
    ev_.push(now + std::max<uint64_t>(1, pause_ns(quanta, in.rate_bps) / 2),
             EventKind::kPfcRefresh, port, prio, in.xoff_gen[prio]);
}

// The refresh of an XOFF that still stands (no XON or newer XOFF since): sent again.
void Network::on_refresh(uint32_t port, uint8_t prio, uint64_t gen) {
  const Port& in = ports_[port];
  if (in.pause_sent[prio] && in.xoff_gen[prio] == gen) send_pfc(port, prio, true);
}

// A PFC frame reaches `port`: honoured if PFC is on for the priority here (a NIC's or a
// switch's negotiated settings), else ignored and counted. A PAUSE holds the priority for
// its quanta (a refresh extends it); an XON (0 quanta) releases it at once.
void Network::on_pause(uint32_t port, uint8_t prio, uint16_t quanta) {
  Port& out = ports_[port];
  if (tap_ && !nodes_[out.node].is_switch) tap_->pfc_frame(out.node, false, prio, quanta);
  if (!qos_of(out.node).pfc_on(prio)) {
    if (quanta != 0) ++out.pauses_ignored;
    return;
  }
  if (quanta == 0) return set_paused(port, prio, false);
  out.pause_until[prio] = clock_.now_ns() + pause_ns(quanta, out.rate_bps);
  ev_.push(out.pause_until[prio], EventKind::kPauseExpire, port, prio);
  set_paused(port, prio, true);
}

// A PAUSE's time is up unless a later one extended it: the priority may send again.
void Network::on_pause_expire(uint32_t port, uint8_t prio) {
  Port& out = ports_[port];
  if (!out.paused[prio] || clock_.now_ns() < out.pause_until[prio]) return;
  ++out.pauses_expired[prio];
  set_paused(port, prio, false);
}

// A pause that begins or ends (not a refresh); a switch's watchdog starts timing one that
// begins.
void Network::set_paused(uint32_t port, uint8_t prio, bool pause) {
  Port& out = ports_[port];
  if (out.paused[prio] == pause) return;
  out.paused[prio] = pause;
  ++out.pause_gen[prio];
  const Node& n = nodes_[out.node];
  if (pause && n.is_switch && n.sw.watchdog.enabled)
    ev_.push(clock_.now_ns() + n.sw.watchdog.detect_ns, EventKind::kWatchdog, port, prio,
             out.pause_gen[prio]);
  if (!pause) try_send(port);
}

// Detection: still paused, and not resumed since (same generation): a PFC storm. The action
// applies at once; the restoration timer starts.
void Network::on_watchdog(uint32_t port, uint8_t prio, uint64_t gen) {
  Port& out = ports_[port];
  if (!out.paused[prio] || out.pause_gen[prio] != gen || out.stormed[prio]) return;
  out.stormed[prio] = true;
  ++out.storms;
  const Node& n = nodes_[out.node];
  if (n.sw.watchdog.drop) drop_queue(port, prio);
  ev_.push(clock_.now_ns() + n.sw.watchdog.restore_ns, EventKind::kRestore, port, prio);
  try_send(port);
}

// Restoration: the queue obeys PFC again once the pause has ended; while it lasts the storm
// goes on and the timer starts over.
void Network::on_restore(uint32_t port, uint8_t prio) {
  Port& out = ports_[port];
  if (!out.stormed[prio]) return;
  if (out.paused[prio]) {
    ev_.push(clock_.now_ns() + nodes_[out.node].sw.watchdog.restore_ns, EventKind::kRestore,
             port, prio);
    return;
  }
  out.stormed[prio] = false;
}

// The drop action: every frame of the stormed queue leaves the buffer, counted.
void Network::drop_queue(uint32_t port, uint8_t prio) {
  Port& out = ports_[port];
  const Node& n = nodes_[out.node];
  while (!out.queue[prio].empty()) {
    const Packet p = release(out.queue[prio].front());
    out.queue[prio].pop_front();
    out.queue_bytes -= p.wire_bytes();
    ++out.storm_drops;
    release_ingress(n, p);
  }
  out.queued &= static_cast<uint8_t>(~(1u << prio));
}

std::vector<std::string> Network::dcbx_check() const {
  std::vector<std::string> out;
  for (uint32_t i = 0; i < ports_.size(); i += 2) {  // connect() makes ports in pairs
    const uint32_t a = ports_[i].node, b = ports_[i + 1].node;
    for (const std::string& d : dcbx_compare(qos_of(a), qos_of(b)))
      out.push_back(std::string(nodes_[a].is_switch ? "switch " : "host ") + std::to_string(a) +
                    " - " + (nodes_[b].is_switch ? "switch " : "host ") + std::to_string(b) +
                    ": " + d);
  }
  return out;
}

uint64_t Network::pause_frames() const {
  uint64_t n = 0;
  for (const Port& p : ports_) n += p.pauses_sent;
  return n;
}

uint64_t Network::nic_pause_frames() const {
  uint64_t n = 0;
  for (const Port& p : ports_) n += nodes_[p.node].is_switch ? 0 : p.pauses_sent;
  return n;
}

std::array<uint64_t, kPriorities> Network::pause_frames_by_prio() const {
  std::array<uint64_t, kPriorities> n{};
  for (const Port& p : ports_)
    for (int q = 0; q < kPriorities; ++q) n[q] += p.pauses_by_prio[q];
  return n;
}

}  // namespace vrnic::sim
