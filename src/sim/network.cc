// The fabric: links, output-queued switches with ETS and RED/ECN, static routes (network.h);
// PFC and its watchdog are in network_pfc.cc.
#include "sim/network.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace vrnic::sim {

uint64_t serialize_ns(uint64_t wire_bytes, double rate_bps) {
  return static_cast<uint64_t>(std::llround(static_cast<double>(wire_bytes) * 8e9 / rate_bps));
}

uint32_t ipv4_of_packet(const Packet& p) {
  const auto& d = p.ip.dst;  // IPv4 in the first four bytes (wire/icrc.h)
  return uint32_t{d[0]} << 24 | uint32_t{d[1]} << 16 | uint32_t{d[2]} << 8 | d[3];
}

uint32_t Network::add_host(uint32_t ipv4, const QosParams& qos, const NicRxParams& nic) {
  Node& n = nodes_.emplace_back();
  n.ipv4 = ipv4;
  n.qos = qos;
  n.nic = nic;
  qos_.clear();
  host_by_ipv4_[ipv4] = static_cast<uint32_t>(nodes_.size() - 1);
  return static_cast<uint32_t>(nodes_.size() - 1);
}

uint32_t Network::add_switch(const SwitchParams& p) {
  Node& n = nodes_.emplace_back();
  n.is_switch = true;
  n.sw = p;
  n.qos = p.qos;
  qos_.clear();
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
  ports_[pa].peer_switch = nodes_[b].is_switch;
  ports_[pa + 1].peer_switch = nodes_[a].is_switch;
  ports_[pa].peer_node = b;
  ports_[pa + 1].peer_node = a;
  nodes_[a].ports.push_back(pa);
  nodes_[b].ports.push_back(pa + 1);
  qos_.clear();
  return pa;
}

// From each host a breadth-first search over the switches gives every node's distance to
// it; a switch's next hops toward the host are its ports to nodes one hop nearer.
void Network::compute_routes() {
  setup_mmu();
  for (uint32_t h = 0; h < nodes_.size(); ++h) {
    if (nodes_[h].is_switch) continue;
    std::vector<uint32_t> dist(nodes_.size(), UINT32_MAX);
    std::deque<uint32_t> todo{h};
    dist[h] = 0;
    while (!todo.empty()) {
      const uint32_t n = todo.front();
      todo.pop_front();
      for (uint32_t q : nodes_[n].ports) {
        const uint32_t far = ports_[ports_[q].peer].node;
        if (dist[far] != UINT32_MAX) continue;
        dist[far] = dist[n] + 1;
        if (nodes_[far].is_switch) todo.push_back(far);
      }
    }
    for (uint32_t n = 0; n < nodes_.size(); ++n) {
      if (!nodes_[n].is_switch || dist[n] == UINT32_MAX) continue;
      nodes_[n].routes.resize(nodes_.size());
      std::vector<uint32_t>& hops = nodes_[n].routes[h];
      hops.clear();
      for (uint32_t q : nodes_[n].ports)
        if (dist[ports_[ports_[q].peer].node] + 1 == dist[n]) hops.push_back(q);
    }
  }
  for (Node& n : nodes_) flatten_routes(n);
}

// The routes as a frame looks them up: one array of ports, and where each destination's ports
// begin (two loads from memory that stays warm, not a vector per destination).
void Network::flatten_routes(Node& n) {
  n.hop_at.assign(1, 0);
  n.hops.clear();
  for (const std::vector<uint32_t>& r : n.routes) {
    n.hops.insert(n.hops.end(), r.begin(), r.end());
    n.hop_at.push_back(static_cast<uint32_t>(n.hops.size()));
  }
}

// The MMU's set-asides, once the links are in: a reserve per port and PFC priority, and each
// port's headroom (by default three times what its link holds in flight one way).
void Network::setup_mmu() {
  for (Node& n : nodes_) {
    if (!n.is_switch || !n.sw.mmu.enabled) continue;
    n.mmu = {};
    int prios = 0;
    for (int q = 0; q < kPriorities; ++q) prios += n.sw.qos.pfc_on(static_cast<uint8_t>(q));
    for (uint32_t port : n.ports) {
      Port& p = ports_[port];
      p.mmu_headroom = n.sw.mmu.headroom_bytes != 0
                           ? n.sw.mmu.headroom_bytes
                           : static_cast<uint64_t>(3 * p.rate_bps * p.delay_ns / 8e9);
      n.mmu.total_headroom += p.mmu_headroom;
      n.mmu.total_reserve += n.sw.mmu.reserve_bytes * std::max(prios, 1);
    }
  }
}

// ECMP: the 5-tuple (addresses, UDP ports; the engine puts flow entropy in the source port)
// and the switch (so that successive tiers do not pick alike) hashed with splitmix64's mix.
uint32_t Network::ecmp_port(uint32_t node, std::span<const uint32_t> ports,
                            const Packet& p) const {
  if (ports.size() == 1) return ports.front();
  uint64_t z = uint64_t{ipv4_of_packet(p)} << 32 |
               (uint32_t{p.ip.src[0]} << 24 | uint32_t{p.ip.src[1]} << 16 |
                uint32_t{p.ip.src[2]} << 8 | p.ip.src[3]);
  z ^= (uint64_t{p.ip.src_port} << 16 | p.ip.dst_port) * 0x9e3779b97f4a7c15ull + node;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  const size_t n = ports.size();  // a power of two in a fat tree: a mask, not a division
  return ports[(n & (n - 1)) == 0 ? z & (n - 1) : z % n];
}

void Network::set_route(uint32_t node, uint32_t ipv4, uint32_t port) {
  nodes_[node].routes.resize(nodes_.size());
  nodes_[node].routes[host_by_ipv4_.at(ipv4)] = {port};
  flatten_routes(nodes_[node]);
}

std::vector<uint32_t> Network::path(uint32_t src, uint32_t dst) const {
  std::vector<uint32_t> out{host_port(src)};
  for (uint32_t n = ports_[ports_[out.back()].peer].node; n != dst && out.size() < 64;) {
    const auto& routes = nodes_[n].routes;
    if (dst >= routes.size() || routes[dst].empty()) return {};
    out.push_back(routes[dst].front());  // one of the equal-cost paths
    n = ports_[ports_[out.back()].peer].node;
  }
  return out;
}

const QosParams& Network::find_qos(uint32_t node) const {
  if (qos_.empty()) qos_.resize(nodes_.size());
  if (!qos_[node]) qos_[node] = &settings_of(node);
  return *qos_[node];
}

const QosParams& Network::settings_of(uint32_t node) const {
  const Node& n = nodes_[node];
  if (n.is_switch) return n.sw.qos;
  // A NIC runs what DCBX agreed with the switch at the far end of its link.
  const uint32_t far = ports_[ports_[n.ports.front()].peer].node;
  return nodes_[far].is_switch ? negotiated(n.qos, nodes_[far].sw.qos) : n.qos;
}

// A packet into a port's egress queue (a host's NIC classifies it by DSCP first). A stormed
// queue whose watchdog action is drop, or a full buffer, drops it.
void Network::enqueue(uint32_t port, Packet&& p) {
  const uint32_t node = ports_[port].node;
  if (!nodes_[node].is_switch) {
    p.prio = qos_of(node).prio_of_tos(p.tos);
    const auto dst = host_by_ipv4_.find(ipv4_of_packet(p));
    p.dst_node = dst == host_by_ipv4_.end() ? kNone : dst->second;
    route_path(nodes_[node], port, p);
  }
  p.wire = static_cast<uint32_t>(p.count_wire_bytes());
  enqueue_held(port, hold(std::move(p)));
}

void Network::enqueue_held(uint32_t port, uint32_t frame) {
  Port& out = ports_[port];
  const Node& n = nodes_[out.node];
  const Packet& p = pool_[frame];
  const bool storm_drop = out.stormed[p.prio] && n.is_switch && n.sw.watchdog.drop;
  const bool full = n.is_switch && !n.sw.mmu.enabled &&  // the MMU admits at ingress
                    out.queue_bytes + p.wire_bytes() > n.sw.buffer_bytes;
  if (storm_drop || full) {
    ++(storm_drop ? out.storm_drops : out.drops);
    release_ingress(n, p);  // the frame leaves the switch's buffer, and its ingress count
    release(frame);
    return;
  }
  out.queue_bytes += p.wire_bytes();
  out.queue_max = std::max(out.queue_max, out.queue_bytes);
  out.queue[p.prio].push_back(frame);
  out.queued |= static_cast<uint8_t>(1u << p.prio);
  try_send(port);
}

// Starts the next frame if the port is idle: ETS picks among the priorities the far end has
// not paused (a stormed queue with the forward action ignores its pause).
void Network::try_send(uint32_t port) {
  Port& out = ports_[port];
  if (out.busy || out.queue_bytes == 0) return;  // queue_bytes: every priority's frames
  const QosParams& qos = qos_of(out.node);
  const auto head = [this, &out](int q) -> uint64_t {
    if (!(out.queued >> q & 1) || (out.paused[q] && !out.stormed[q])) return 0;
    return pool_[out.queue[q].front()].wire_bytes();
  };
  // One busy queue under strict priority (most picks): it goes unless paused; no class
  // keeps credit, so nothing else to decide.
  const bool one = qos.all_strict() && out.queued != 0 && (out.queued & (out.queued - 1)) == 0;
  const int q1 = std::countr_zero(out.queued);
  const int prio = one ? (out.paused[q1] && !out.stormed[q1] ? -1 : q1)
                       : pick_priority(qos, out.ets, head);
  if (prio < 0) return;
  const uint32_t frame = out.queue[prio].front();
  out.queue[prio].pop_front();
  if (out.queue[prio].empty()) out.queued &= static_cast<uint8_t>(~(1u << prio));
  Packet& p = pool_[frame];
  out.queue_bytes -= p.wire_bytes();
  const Node& n = nodes_[out.node];
  if (n.is_switch) leave_switch(out, n, p);
  if (!n.is_switch && tap_) tap_->data_frame(out.node, p);
  const uint64_t now = clock_.now_ns();
  if (now >= stats_from_) out.tc_bytes[qos.prio_to_tc[prio]] += p.wire_bytes();
  const uint64_t ser = out.serialize(p.wire_bytes());
  out.tx_bytes += p.wire_bytes();
  out.busy = true;
  ++out.tx_packets;
  const uint32_t next = out.queue[prio].empty() ? kNone : out.queue[prio].front();
  ev_.push(now + ser, EventKind::kTxDone, port, next);
  // A switch at the far end routes the frame now, while it is in cache: the arrival's
  // prefetch then names the egress port too (routes are fixed, the choice the same).
  uint32_t egress = kNone;
  if (out.peer_switch) {
    const bool known = p.routed < Packet::kPathHops && p.path[p.routed] != Packet::kUnrouted;
    egress = known ? p.path[p.routed] : egress_port(out.peer_node, p);
    p.routed += p.routed < UINT8_MAX;
  }
  ev_.push(now + ser + out.delay_ns, EventKind::kArrive, port, frame,
           uint64_t{static_cast<uint32_t>(prio)} << 32 | egress);
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
  // RED marks ECN-capable packets (RFC 3168), never an ACK or a CNP.
  if ((p.tos & 0x3) != 0 && (p.tos & 0x3) != 0x3 && !wire::is_control(p.kind) &&
      red_mark(sw.sw.red, out.queue_bytes, out.rate_bps)) {
    p.tos |= 0x3;  // CE (RFC 3168)
    ++out.marked;
  }
  // HPCC's INT (the HPCC simulator's switch at dequeue): time, bytes sent before this
  // packet, the queue it leaves behind, the link rate.
  if (sw.sw.int_telemetry && p.telemetry && !wire::is_control(p.kind))
    p.telemetry->push({now, out.tx_bytes, out.queue_bytes, out.rate_bps});
  release_ingress(sw, p);
}

// RED as DCQCN uses it: no mark up to Kmin, a probability rising linearly to Pmax at Kmax,
// always above Kmax.
bool Network::red_mark(const RedParams& red, uint64_t q, double rate_bps) {
  if (!red.enabled) return false;
  uint64_t kmin = red.kmin, kmax = red.kmax;
  if (red.per_rate_bps > 0) {
    kmin = static_cast<uint64_t>(static_cast<double>(kmin) * rate_bps / red.per_rate_bps);
    kmax = static_cast<uint64_t>(static_cast<double>(kmax) * rate_bps / red.per_rate_bps);
  }
  if (q <= kmin) return false;
  if (q > kmax) return true;
  const double p = red.pmax * static_cast<double>(q - kmin) / static_cast<double>(kmax - kmin);
  return rng_.uniform() < p;
}

void Network::handle(const Event& e) {
  switch (e.kind) {
    case EventKind::kTxDone:
      ports_[e.a].busy = false;
      try_send(e.a);
      break;
    case EventKind::kArrive:
      on_arrive(e.a, e.b, static_cast<uint32_t>(e.c));  // c: the egress port (try_send)
      break;
    case EventKind::kPause:
      on_pause(e.a, static_cast<uint8_t>(e.b), static_cast<uint16_t>(e.c));
      break;
    case EventKind::kPauseExpire:
      on_pause_expire(e.a, static_cast<uint8_t>(e.b));
      break;
    case EventKind::kPfcRefresh:
      on_refresh(e.a, static_cast<uint8_t>(e.b), e.c);
      break;
    case EventKind::kNicRx:
      on_nic_rx(e.a);
      break;
    case EventKind::kWatchdog:
      on_watchdog(e.a, static_cast<uint8_t>(e.b), e.c);
      break;
    case EventKind::kRestore:
      on_restore(e.a, static_cast<uint8_t>(e.b));
      break;
    default:
      break;
  }
}

// A link delivers in the order it sends (one delay, frames serialised one after another), so
// the event's frame is the oldest on the link.
void Network::on_arrive(uint32_t from_port, uint32_t frame, uint32_t egress) {
  const Port& from = ports_[from_port];
  if (!from.peer_switch) return host_receive(from.peer, release(frame));
  switch_receive(from.peer, frame, egress);
}

uint32_t Network::egress_port(uint32_t node, const Packet& p) const {
  const Node& sw = nodes_[node];
  const uint32_t d = p.dst_node;
  if (size_t{d} + 1 >= sw.hop_at.size() || sw.hop_at[d] == sw.hop_at[d + 1]) return kNone;
  const std::span<const uint32_t> hops(sw.hops.data() + sw.hop_at[d],
                                       sw.hop_at[d + 1] - sw.hop_at[d]);
  return ecmp_port(node, hops, p);
}

// A flow's path is fixed (static routes; ECMP hashes the addresses and ports): the sending
// NIC finds it in its host's cache of recent flows or walks it once, and the switches read
// no routes.
void Network::route_path(Node& host, uint32_t host_port, Packet& p) {
  const Port& nic = ports_[host_port];
  if (!nic.peer_switch) return;
  const uint32_t src = uint32_t{p.ip.src[0]} << 24 | uint32_t{p.ip.src[1]} << 16 |
                       uint32_t{p.ip.src[2]} << 8 | p.ip.src[3];
  const uint64_t addrs = uint64_t{src} << 32 | ipv4_of_packet(p);
  const uint32_t ports = uint32_t{p.ip.src_port} << 16 | p.ip.dst_port;
  if (host.paths.empty()) host.paths.resize(size_t{1} << kPathCacheBits);
  const size_t i = ((addrs ^ uint64_t{ports} << 7) * 0x9e3779b97f4a7c15ull) >> (64 - kPathCacheBits);
  Node::CachedPath& c = host.paths[i];
  if (!c.used || c.addrs != addrs || c.ports != ports) c = {addrs, ports, true, walk_path(nic.peer_node, p)};
  p.path = c.path;
}

// The egress port at each switch from `first_switch` on: kNone where there is no route,
// kUnrouted past a host or beyond kPathHops switches.
std::array<uint32_t, Packet::kPathHops> Network::walk_path(uint32_t first_switch,
                                                            const Packet& p) const {
  std::array<uint32_t, Packet::kPathHops> path = Packet::unrouted_path();
  uint32_t sw = first_switch;
  for (size_t i = 0; i < path.size(); ++i) {
    path[i] = egress_port(sw, p);
    if (path[i] == kNone || !ports_[path[i]].peer_switch) break;
    sw = ports_[path[i]].peer_node;
  }
  return path;
}

// A frame in at switch port `port`, routed by destination IP to `egress` (egress_port):
// counted against the ingress (PAUSE upstream past XOFF), queued at the egress.
void Network::switch_receive(uint32_t port, uint32_t frame, uint32_t egress) {
  Node& sw = nodes_[ports_[port].node];
  Packet& p = pool_[frame];
  if (dropped_by_rule(sw, p)) {
    ++ports_[port].drops;
    release(frame);
    return;
  }
  if (egress == kNone) {
    ++ports_[port].drops;  // no route: dropped and counted at the ingress
    release(frame);
    return;
  }
  Port& in = ports_[port];
  p.ingress = port;
  p.prio = sw.sw.qos.prio_of_tos(p.tos);  // the switch trusts DSCP, through its own map
  if (sw.sw.mmu.enabled) {
    if (!mmu_ingress(sw, port, p)) {
      release(frame);
      return;
    }
  } else {
    in.ingress_bytes[p.prio] += p.wire_bytes();
    if (sw.sw.pfc && sw.sw.qos.pfc_on(p.prio) && !in.pause_sent[p.prio] &&
        in.ingress_bytes[p.prio] > sw.sw.xoff)
      send_pfc(port, p.prio, true);
  }
  enqueue_held(egress, frame);
}

uint64_t Network::drops() const {
  uint64_t n = 0;
  for (const Port& p : ports_) n += p.drops + p.storm_drops;
  return n;
}

bool Network::dropped_by_rule(Node& sw, const Packet& p) {
  if (sw.sw.drop.empty() || p.bytes.empty()) return false;
  sw.drop_seen.resize(sw.sw.drop.size());
  for (size_t i = 0; i < sw.sw.drop.size(); ++i)
    if (p.bytes[0] == sw.sw.drop[i].opcode && ++sw.drop_seen[i] == sw.sw.drop[i].nth) return true;
  return false;
}

uint64_t Network::storms() const {
  uint64_t n = 0;
  for (const Port& p : ports_) n += p.storms;
  return n;
}

uint64_t Network::marked() const {
  uint64_t n = 0;
  for (const Port& p : ports_) n += p.marked;
  return n;
}

}  // namespace vrnic::sim
