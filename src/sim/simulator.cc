// The simulation run: topology and flows from the scenario, the event loop (simulator.h).
#include "sim/simulator.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace vrnic::sim {

using namespace engine;

namespace {
constexpr uint64_t kHeaderBytes = 12 + 4;  // BTH and ICRC around a data packet's payload
constexpr uint64_t kRethBytes = 16, kAckBytes = 12 + 4 + 4;  // RETH; BTH + AETH + ICRC
}  // namespace

Simulator::Simulator(const Scenario& sc) : sc_(sc), net_(ev_, clock_, sc.seed) {
  for (size_t i = 0; i < sc_.traffic.size(); ++i)
    for (const FlowSpec& f : poisson_flows(sc_.traffic[i], sc_.host_count(), sc_.host_rate_bps,
                                           sc_.seed + i))
      sc_.flows.push_back(f);
  net_.set_sink(this);
  net_.set_stats_from(sc_.stats_from_ns);
  build_topology();
  build_flows();
}

Simulator::~Simulator() = default;

// The flows and their start events, the first WRITEs posted the NIC's processing delay
// after a flow's start.
void Simulator::build_flows() {
  bin_ns_ = std::max<uint64_t>(1000, sc_.duration_ns / 1000);
  for (uint32_t i = 0; i < sc_.flows.size(); ++i) {
    Flow f;
    f.spec = sc_.flows[i];
    f.chunks = (f.spec.bytes + kChunkBytes - 1) / kChunkBytes;
    f.ideal_ns = ideal_fct(f.spec);
    if (f.spec.bytes >= sc_.long_flow_bytes) f.bins.assign(sc_.duration_ns / bin_ns_ + 1, 0);
    ev_.push(f.spec.start_ns + sc_.nic.processing_delay_ns, EventKind::kFlowStart, i);
    flows_.push_back(std::move(f));
  }
}

// A flow's QP pair, connected when it starts (in no virtual time) and destroyed when it ends,
// so that each engine holds only the QPs of its flows under way.
void Simulator::open_flow(uint32_t i) {
  Flow& f = flows_[i];
  Host& src = *hosts_[f.spec.src];
  Host& dst = *hosts_[f.spec.dst];
  f.qp = src.create_qp(sc_.nic.wqes_in_flight);
  f.rqp = dst.create_qp(1);
  const uint32_t sq = src.dev().qp_num(f.qp), rq = dst.dev().qp_num(f.rqp);
  const PathParams path{sc_.nic.mtu, sc_.nic.ack_timeout,
                        static_cast<uint8_t>(f.spec.dscp < 0 ? 0 : f.spec.dscp << 2)};
  if (src.connect(f.qp, rq, ipv4_of_host(f.spec.dst), path) ||
      dst.connect(f.rqp, sq, ipv4_of_host(f.spec.src), path))
    throw std::runtime_error("sim: connecting a flow's QPs failed");
  if (!f.bins.empty()) flow_by_rqp_[uint64_t{f.spec.dst} << 32 | rq] = i;
  if (f.spec.set_initial) dst.set_atomic_word(f.spec.initial);
}

void Simulator::close_flow(Flow& f, bool failed) {
  f.failed = failed;
  f.finished = true;
  ++finished_;
  if (!f.bins.empty())
    flow_by_rqp_.erase(uint64_t{f.spec.dst} << 32 | hosts_[f.spec.dst]->dev().qp_num(f.rqp));
  hosts_[f.spec.src]->dev().destroy_qp(f.qp);
  hosts_[f.spec.dst]->dev().destroy_qp(f.rqp);
  f.qp = f.rqp = nullptr;
}

// What the NIC model adds to a flow on an empty network: the first post's doorbell and DMA
// reads, and the responder's pipeline (and an atomic's read-modify-write) before the answer.
uint64_t Simulator::nic_cost(const FlowSpec& f) const {
  const NicParams& n = sc_.nic;
  if (!n.pcie) return 0;
  return f.faa ? n.doorbell_ns + n.dma_read_ns + n.rx_pipeline_ns + n.atomic_rmw_ns
               : n.doorbell_ns + 2 * n.dma_read_ns + n.rx_pipeline_ns;
}

// The FCT on an empty network: the processing delay, the NIC model's costs, the first
// packet's store-and-forward through every hop, the rest at the path's slowest rate, and
// the last ACK's way back.
uint64_t Simulator::ideal_fct(const FlowSpec& f) const {
  const uint64_t mtu = sc_.nic.mtu;
  uint64_t packets = 0, wire = 0;
  for (uint64_t off = 0; off < f.bytes; off += kChunkBytes) {
    const uint64_t chunk = std::min<uint64_t>(kChunkBytes, f.bytes - off);
    const uint64_t n = (chunk + mtu - 1) / mtu;
    packets += n;
    wire += chunk + n * (kHeaderBytes + kFrameOverhead) + kRethBytes;
  }
  const uint64_t first = std::min(mtu, f.bytes) + kHeaderBytes + kRethBytes + kFrameOverhead;
  double t = static_cast<double>(sc_.nic.processing_delay_ns + nic_cost(f)), min_rate = 1e30;
  for (uint32_t p : net_.path(host_node_[f.src], host_node_[f.dst])) {
    const Port& port = net_.port(p);
    t += port.delay_ns + first * 8e9 / port.rate_bps;
    min_rate = std::min(min_rate, port.rate_bps);
  }
  t += (wire - first) * 8e9 / min_rate;
  for (uint32_t p : net_.path(host_node_[f.dst], host_node_[f.src])) {
    const Port& port = net_.port(p);
    t += port.delay_ns + (kAckBytes + kFrameOverhead) * 8e9 / port.rate_bps;
  }
  return static_cast<uint64_t>(t);
}

// A packet into a host's engine; what the engine sends in answer leaves the NIC after the
// receive pipeline and the host-memory accesses it made (an atomic's read-modify-write, or
// the ACK queue entry a duplicate atomic is answered from).
void Simulator::deliver(uint32_t node, Packet&& p) {
  const uint32_t h = host_of_node_.at(node);
  count_delivered(h, p);
  if (!p.bytes.empty() && (p.bytes[0] == 0x13 || p.bytes[0] == 0x14))  // RC CmpSwap, FetchAdd
    atomic_in_[h].push_back(clock_.now_ns());
  Host& host = *hosts_[h];
  const WirePacket w{p.ip, p.tos, p.bytes};
  if (!sc_.nic.pcie) {
    host.dev().receive(std::span<const WirePacket>(&w, 1));
    return service(h, false);
  }
  const engine::Counters& c = host.dev().counters();
  const uint64_t replayed = c.duplicate_atomics_replayed, executed = c.rx_atomic;
  host.dev().receive(std::span<const WirePacket>(&w, 1));
  uint64_t cost = sc_.nic.rx_pipeline_ns;
  if (c.duplicate_atomics_replayed > replayed) {
    cost += sc_.nic.dma_read_ns;
  } else if (c.rx_atomic > executed) {
    cost += sc_.nic.atomic_rmw_ns;
  }
  host.hold(cost);
  service(h, false);
}

// Bytes of RDMA WRITE packets (opcodes 0x06..0x0B) reaching a long flow's receiver, by bin.
void Simulator::count_delivered(uint32_t host, const Packet& p) {
  if (flow_by_rqp_.empty()) return;
  if (p.bytes.size() < 12 || p.bytes[0] < 0x06 || p.bytes[0] > 0x0b) return;
  const uint32_t qpn = uint32_t{p.bytes[5]} << 16 | uint32_t{p.bytes[6]} << 8 | p.bytes[7];
  const auto it = flow_by_rqp_.find(uint64_t{host} << 32 | qpn);
  if (it == flow_by_rqp_.end()) return;
  Flow& f = flows_[it->second];
  const uint64_t bin = clock_.now_ns() / bin_ns_;
  if (bin < f.bins.size()) f.bins[bin] += p.bytes.size();
}

void Simulator::post_more(Flow& f) {
  Host& src = *hosts_[f.spec.src];
  const auto id = static_cast<uint64_t>(&f - flows_.data());
  if (f.spec.faa) {
    if (f.posted == 0 && src.post_faa(f.qp, *hosts_[f.spec.dst], id, f.spec.add) != 0)
      return close_flow(f, true);
    f.posted = 1;
    return;
  }
  while (!f.finished && f.posted < f.chunks && f.posted - f.done < sc_.nic.wqes_in_flight) {
    const uint64_t off = f.posted * kChunkBytes;
    const auto bytes = static_cast<uint32_t>(std::min<uint64_t>(kChunkBytes, f.spec.bytes - off));
    if (src.post_write(f.qp, *hosts_[f.spec.dst], id, bytes, static_cast<uint32_t>(f.posted)))
      return close_flow(f, true);
    ++f.posted;
  }
}

void Simulator::on_completion(const WorkCompletion& wc) {
  if (wc.wr_id >= flows_.size()) return;
  Flow& f = flows_[wc.wr_id];
  if (f.finished) return;
  if (wc.status != WcStatus::kSuccess) return close_flow(f, true);  // the QP is in error
  if (++f.done == f.chunks) {
    f.fct_ns = clock_.now_ns() - f.spec.start_ns;
    if (f.spec.faa) record_atomic(f);
    return close_flow(f, false);
  }
  post_more(f);
  hold_posted(f);
}

// The NIC's cost of the work requests just posted: one doorbell, the WQEs read in one DMA
// read, the payload in another (Fetch-and-Add carries none).
void Simulator::hold_posted(Flow& f) {
  const NicParams& n = sc_.nic;
  hosts_[f.spec.src]->hold(n.doorbell_ns + n.dma_read_ns + (f.spec.faa ? 0 : n.dma_read_ns));
}

void Simulator::record_atomic(const Flow& f) {
  AtomicResult r;
  r.flow = static_cast<uint32_t>(&f - flows_.data());
  r.fetched = hosts_[f.spec.src]->fetched();
  r.memory = hosts_[f.spec.dst]->atomic_word();
  atomics_.push_back(r);
}

// After the simulator touched a host's engine: its completions, then its timer re-armed.
// A timer still due right after on_timer ran goes 1 ns later, so time always moves on.
void Simulator::service(uint32_t i, bool after_timer) {
  Host& h = *hosts_[i];
  WorkCompletion wc[64];
  for (int n; (n = h.dev().poll_cq(h.cq(), wc, 64)) > 0;)
    for (int k = 0; k < n; ++k) on_completion(wc[k]);
  h.hold(0);  // nothing the engine sent stays behind
  uint64_t t = h.dev().next_timer_ns();
  if (t == UINT64_MAX) return;
  const uint64_t now = clock_.now_ns();
  if (t <= now) t = after_timer ? now + 1 : now;
  if (t < h.timer_at) {
    h.timer_at = t;
    ev_.push(t, EventKind::kHostTimer, i, 0, ++h.timer_gen);
  }
}

// Every switch queue that holds bytes, and one that has just emptied (a 0 row ends its run).
void Simulator::sample_queues() {
  sampled_.resize(net_.port_count(), false);
  for (uint32_t i = 0; i < net_.port_count(); ++i) {
    const Port& p = net_.port(i);
    if (!net_.is_switch(p.node) || (p.queue_bytes == 0 && !sampled_[i])) continue;
    queue_series_.push_back({clock_.now_ns(), i, p.queue_bytes});
    sampled_[i] = p.queue_bytes > 0;
  }
}

void Simulator::capture(const std::string& dir, const std::vector<uint32_t>& hosts) {
  captures_ = std::make_unique<HostCaptures>(clock_, dir, hosts, host_node_, net_);
  net_.set_tap(captures_.get());
}

Summary Simulator::run(const std::function<void(uint64_t, uint64_t)>& progress) {
  const auto wall0 = std::chrono::steady_clock::now();  // wall_s only
  uint64_t events = 0;
  if (sample_ns_ > 0) ev_.push(0, EventKind::kSample, 0);
  while (!ev_.empty() && finished_ < flows_.size() && ev_.top().time <= sc_.duration_ns) {
    const Event e = ev_.pop();
    clock_.advance_to(e.time);
    if (e.kind == EventKind::kSample) {
      sample_queues();
      ev_.push(e.time + sample_ns_, EventKind::kSample, 0);
      continue;
    }
    ++events;
    if (progress && (events & ((1u << 20) - 1)) == 0) progress(e.time, events);
    if (e.kind == EventKind::kHostTimer) {
      Host& h = *hosts_[e.a];
      if (e.c != h.timer_gen) continue;  // superseded by an earlier one
      h.timer_at = UINT64_MAX;
      h.dev().on_timer();
      h.hold(sc_.nic.dma_read_ns * 2);  // a retransmission reads its WQE and payload again
      service(e.a, true);
    } else if (e.kind == EventKind::kNicRelease) {
      hosts_[e.a]->release();
    } else if (e.kind == EventKind::kFlowStart) {
      open_flow(e.a);
      post_more(flows_[e.a]);
      hold_posted(flows_[e.a]);
      service(flows_[e.a].spec.src, false);
    } else {
      net_.handle(e);
    }
  }
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  net_.set_tap(nullptr);
  captures_.reset();  // the files complete
  return summarise(events, wall);
}

}  // namespace vrnic::sim
