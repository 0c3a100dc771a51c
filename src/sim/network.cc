// The fabric: links, output-queued switches with RED/ECN and PFC, static routes (network.h).
#include "sim/network.h"

#include <algorithm>
#include <cmath>

namespace vrnic::sim {

bool is_ack_or_cnp(const Packet& p) {
  if (p.bytes.empty()) return false;
  const uint8_t op = p.bytes[0];  // BTH opcode (IBA 9.2): RC ACK, RC atomic ACK, CNP
  return op == 0x11 || op == 0x12 || op == 0x81;
}

uint64_t serialize_ns(uint64_t wire_bytes, double rate_bps) {
  return static_cast<uint64_t>(std::llround(static_cast<double>(wire_bytes) * 8e9 / rate_bps));
}

uint32_t ipv4_of_packet(const Packet& p) {
  const auto& d = p.ip.dst;  // IPv4 in the first four bytes (wire/icrc.h)
  return uint32_t{d[0]} << 24 | uint32_t{d[1]} << 16 | uint32_t{d[2]} << 8 | d[3];
}

uint32_t Network::add_host(uint32_t ipv4) {
  nodes_.push_back(Node{false, ipv4, {}, {}, {}});
  return static_cast<uint32_t>(nodes_.size() - 1);
}

uint32_t Network::add_switch(const SwitchParams& p) {
  nodes_.push_back(Node{true, 0, p, {}, {}});
  return static_cast<uint32_t>(nodes_.size() - 1);
}

uint32_t Network::connect(uint32_t a, uint32_t b, double rate_bps, uint64_t delay_ns) {
  const auto pa = static_cast<uint32_t>(ports_.size());
  ports_.emplace_back();
  ports_.emplace_back();
  for (uint32_t i : {pa, pa + 1}) {
    ports_[i].rate_bps = rate_bps;
    ports_[i].delay_ns = delay_ns;
  }
  ports_[pa].node = a;
  ports_[pa].peer = pa + 1;
  ports_[pa + 1].node = b;
  ports_[pa + 1].peer = pa;
  nodes_[a].ports.push_back(pa);
  nodes_[b].ports.push_back(pa + 1);
  return pa;
}

void Network::compute_routes() {
  for (uint32_t h = 0; h < nodes_.size(); ++h) {
    if (nodes_[h].is_switch) continue;
    // BFS from the host: a node first reached through port q routes h out of q's peer.
    std::vector<bool> seen(nodes_.size(), false);
    std::deque<uint32_t> todo{h};
    seen[h] = true;
    while (!todo.empty()) {
      const uint32_t n = todo.front();
      todo.pop_front();
      for (uint32_t q : nodes_[n].ports) {
        const uint32_t far = ports_[ports_[q].peer].node;
        if (seen[far]) continue;
        seen[far] = true;
        nodes_[far].routes[nodes_[h].ipv4] = ports_[q].peer;
        if (nodes_[far].is_switch) todo.push_back(far);
      }
    }
  }
}

std::vector<uint32_t> Network::path(uint32_t src, uint32_t dst) const {
  std::vector<uint32_t> out{host_port(src)};
  for (uint32_t n = ports_[ports_[out.back()].peer].node; n != dst && out.size() < 64;) {
    const auto it = nodes_[n].routes.find(nodes_[dst].ipv4);
    if (it == nodes_[n].routes.end()) return {};
    out.push_back(it->second);
    n = ports_[ports_[it->second].peer].node;
  }
  return out;
}

void Network::enqueue(uint32_t port, Packet&& p) {
  Port& out = ports_[port];
  const Node& n = nodes_[out.node];
  if (n.is_switch && out.queue_bytes + p.wire_bytes() > n.sw.buffer_bytes) {
    ++out.drops;  // drop tail: the frame leaves the switch's buffer, and its ingress count
    release_ingress(n, p);
    return;
  }
  out.queue_bytes += p.wire_bytes();
  out.queue_max = std::max(out.queue_max, out.queue_bytes);
  out.queue[p.prio].push_back(std::move(p));
  try_send(port);
}

// Starts the next frame if the port is idle: the highest priority with a frame that the
// far end has not paused (strict priority; ETS is not modelled).
void Network::try_send(uint32_t port) {
  Port& out = ports_[port];
  if (out.busy) return;
  int prio = kPriorities - 1;
  while (prio >= 0 && (out.queue[prio].empty() || out.paused[prio])) --prio;
  if (prio < 0) return;
  Packet p = std::move(out.queue[prio].front());
  out.queue[prio].pop_front();
  out.queue_bytes -= p.wire_bytes();
  const Node& n = nodes_[out.node];
  if (n.is_switch) leave_switch(out, n, p);
  const uint64_t now = clock_.now_ns();
  const uint64_t ser = serialize_ns(p.wire_bytes(), out.rate_bps);
  out.busy = true;
  ++out.tx_packets;
  out.in_flight.push_back(std::move(p));
  ev_.push(now + ser, EventKind::kTxDone, port);
  ev_.push(now + ser + out.delay_ns, EventKind::kArrive, port);
}

// A frame leaves a switch's egress queue: the queue it leaves behind is sampled, RED marks
// it CE if it is ECN-capable (never an ACK or CNP), and its ingress port's count drops,
// which may end a PFC pause.
void Network::leave_switch(Port& out, const Node& sw, Packet& p) {
  const uint64_t now = clock_.now_ns();
  if (now >= stats_from_) {
    ++out.queue_samples;
    out.queue_sum += out.queue_bytes;
  }
  if ((p.tos & 0x3) != 0 && (p.tos & 0x3) != 0x3 && !is_ack_or_cnp(p) &&
      red_mark(sw.sw.red, out.queue_bytes)) {
    p.tos |= 0x3;  // CE (RFC 3168)
    ++out.marked;
  }
  release_ingress(sw, p);
}

// A frame no longer buffered (sent or dropped) leaves its ingress port's count; at or below
// XON a paused upstream is resumed.
void Network::release_ingress(const Node& sw, const Packet& p) {
  if (p.ingress == kNone) return;
  Port& in = ports_[p.ingress];
  in.ingress_bytes[p.prio] -= p.wire_bytes();
  if (sw.sw.pfc && in.pause_sent[p.prio] && in.ingress_bytes[p.prio] <= sw.sw.xon)
    send_pfc(p.ingress, p.prio, false);
}

// RED as DCQCN uses it: no mark up to Kmin, a probability rising linearly to Pmax at Kmax,
// always above Kmax.
bool Network::red_mark(const RedParams& red, uint64_t q) {
  if (!red.enabled || q <= red.kmin) return false;
  if (q > red.kmax) return true;
  const double p = red.pmax * static_cast<double>(q - red.kmin) /
                   static_cast<double>(red.kmax - red.kmin);
  return rng_.uniform() < p;
}

// A PFC frame (802.1Qbb) from switch port `port` to the far end: it overtakes the queue
// (MAC control frames are not queued behind data) and takes effect after the link's delay.
void Network::send_pfc(uint32_t port, uint8_t prio, bool pause) {
  Port& in = ports_[port];
  in.pause_sent[prio] = pause;
  if (pause) ++in.pauses_sent;  // XOFF frames; the resumes (XON) are not counted
  const uint64_t t = clock_.now_ns() + serialize_ns(kPauseFrameBytes, in.rate_bps) + in.delay_ns;
  ev_.push(t, EventKind::kPause, in.peer, prio, pause ? 1 : 0);
}

void Network::handle(const Event& e) {
  switch (e.kind) {
    case EventKind::kTxDone:
      ports_[e.a].busy = false;
      try_send(e.a);
      break;
    case EventKind::kArrive:
      on_arrive(e.a);
      break;
    case EventKind::kPause:
      ports_[e.a].paused[e.b] = e.c != 0;
      if (e.c == 0) try_send(e.a);
      break;
    default:
      break;
  }
}

void Network::on_arrive(uint32_t from_port) {
  Port& from = ports_[from_port];
  Packet p = std::move(from.in_flight.front());
  from.in_flight.pop_front();
  const uint32_t at = from.peer;
  const uint32_t node = ports_[at].node;
  if (!nodes_[node].is_switch) {
    if (sink_) sink_->deliver(node, std::move(p));
    return;
  }
  switch_receive(at, std::move(p));
}

// A frame in at switch port `port`: counted against the ingress (PAUSE upstream past
// XOFF), routed by destination IP, queued at the egress.
void Network::switch_receive(uint32_t port, Packet&& p) {
  const Node& sw = nodes_[ports_[port].node];
  const auto route = sw.routes.find(ipv4_of_packet(p));
  if (route == sw.routes.end()) {
    ++ports_[port].drops;  // no route: dropped and counted at the ingress
    return;
  }
  Port& in = ports_[port];
  p.ingress = port;
  in.ingress_bytes[p.prio] += p.wire_bytes();
  if (sw.sw.pfc && !in.pause_sent[p.prio] && in.ingress_bytes[p.prio] > sw.sw.xoff)
    send_pfc(port, p.prio, true);
  enqueue(route->second, std::move(p));
}

uint64_t Network::drops() const {
  uint64_t n = 0;
  for (const Port& p : ports_) n += p.drops;
  return n;
}

uint64_t Network::pause_frames() const {
  uint64_t n = 0;
  for (const Port& p : ports_) n += p.pauses_sent;
  return n;
}

uint64_t Network::marked() const {
  uint64_t n = 0;
  for (const Port& p : ports_) n += p.marked;
  return n;
}

}  // namespace vrnic::sim
