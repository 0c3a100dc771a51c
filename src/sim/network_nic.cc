// A host NIC's receive buffer in the fabric: frames wait until the NIC has moved them into
// host memory, and the NIC sends PFC PAUSE when they pile up (network.h, NicRxParams).
#include "sim/network.h"

namespace vrnic::sim {

// A frame off the link at host port `port`. With no receive rate set it goes to the host at
// once; else it waits in the buffer (dropped if full), past XOFF pausing its priority.
void Network::host_receive(uint32_t port, Packet&& p) {
  Port& in = ports_[port];
  const uint32_t node = in.node;
  const NicRxParams& nic = nodes_[node].nic;
  if (tap_) tap_->data_frame(node, p);
  if (nic.rate_bps <= 0) {
    if (sink_) sink_->deliver(node, std::move(p));
    return;
  }
  if (in.rx_bytes + p.wire_bytes() > nic.buffer_bytes) {
    ++in.drops;
    return;
  }
  p.prio = qos_of(node).prio_of_tos(p.tos);
  in.rx_bytes += p.wire_bytes();
  in.ingress_bytes[p.prio] += p.wire_bytes();
  if (qos_of(node).pfc_on(p.prio) && !in.pause_sent[p.prio] &&
      in.ingress_bytes[p.prio] > nic.xoff)
    send_pfc(port, p.prio, true);
  in.rx.push_back(std::move(p));
  if (!in.rx_busy) start_rx(port);
}

void Network::start_rx(uint32_t port) {
  Port& in = ports_[port];
  in.rx_busy = true;
  const double rate = nodes_[in.node].nic.rate_bps;
  ev_.push(clock_.now_ns() + serialize_ns(in.rx.front().wire_bytes(), rate), EventKind::kNicRx,
           port);
}

// The oldest frame has reached host memory: it leaves the buffer (at XON its priority is
// resumed) and goes to the host's engine.
void Network::on_nic_rx(uint32_t port) {
  Port& in = ports_[port];
  Packet p = std::move(in.rx.front());
  in.rx.pop_front();
  in.rx_bytes -= p.wire_bytes();
  in.ingress_bytes[p.prio] -= p.wire_bytes();
  if (in.pause_sent[p.prio] && in.ingress_bytes[p.prio] <= nodes_[in.node].nic.xon)
    send_pfc(port, p.prio, false);
  in.rx_busy = false;
  if (!in.rx.empty()) start_rx(port);
  if (sink_) sink_->deliver(in.node, std::move(p));
}

}  // namespace vrnic::sim
