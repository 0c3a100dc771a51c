// The simulation run: topology and flows from the scenario, the event loop (simulator.h).
#include "sim/simulator.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "sim/prefetch.h"
#include "wire/headers.h"

namespace vrnic::sim {

using namespace engine;

namespace {
constexpr uint64_t kHeaderBytes = 12 + 4;  // BTH and ICRC around a data packet's payload
constexpr uint64_t kRethBytes = 16, kAckBytes = 12 + 4 + 4;  // RETH; BTH + AETH + ICRC
constexpr uint64_t kDethBytes = 8, kAethBytes = 4, kImmBytes = 4;

struct MessageWire {
  uint64_t first = 0, total = 0;  // the first packet's wire bytes; all of the message's
};

// The wire bytes of one message of `m` bytes in packets of `mtu`: each packet's payload,
// BTH, ICRC and framing, and the verb's extra headers: RETH on a WRITE's (or an atomic's)
// first packet, DETH on every UD packet, AETH on a READ response's first and last, ImmDt
// on the last packet of a WRITE with immediate; `int_bytes` of INT header on each (HPCC).
MessageWire message_wire(const FlowSpec& f, uint64_t m, uint64_t mtu, bool imm, uint64_t int_bytes) {
  const uint64_t n = std::max<uint64_t>(1, (m + mtu - 1) / mtu);
  const uint64_t hdr = kHeaderBytes + kFrameOverhead + int_bytes +
                       (f.transport == Transport::kUd ? kDethBytes : 0);
  MessageWire w{std::min(m, mtu) + hdr, m + n * hdr};
  if (f.verb == Verb::kWrite || f.verb == Verb::kFaa) w.first += kRethBytes, w.total += kRethBytes;
  if (f.verb == Verb::kRead) w.first += kAethBytes, w.total += (n == 1 ? 1 : 2) * kAethBytes;
  if (imm) w.total += kImmBytes, w.first += n == 1 ? kImmBytes : 0;
  return w;
}
}  // namespace

Simulator::Simulator(const Scenario& sc) : sc_(sc), net_(ev_, clock_, sc.seed) {
  for (size_t i = 0; i < sc_.traffic.size(); ++i)
    for (const FlowSpec& f : poisson_flows(sc_.traffic[i], sc_.host_count(), sc_.host_rate_bps,
                                           sc_.seed + i))
      sc_.flows.push_back(f);
  net_.set_sink(this);
  net_.set_stats_from(sc_.stats_from_ns);
  sc_.sw.int_telemetry = sc_.nic.scheme == CcScheme::kHpcc;
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
    if (f.spec.transport == Transport::kUd) f.msg_bytes = sc_.nic.mtu;
    f.chunks = (f.spec.bytes + f.msg_bytes - 1) / f.msg_bytes;
    f.ideal_ns = ideal_fct(f);
    if (f.spec.bytes >= sc_.long_flow_bytes) f.bins.assign(sc_.duration_ns / bin_ns_ + 1, 0);
    ev_.push(f.spec.start_ns + sc_.nic.processing_delay_ns, EventKind::kFlowStart, i);
    flows_.push_back(std::move(f));
  }
}

// What the NIC model adds to a flow on an empty network: the first post's doorbell(s) and
// DMA reads (post_cost), the responder's pipeline (and an atomic's read-modify-write) before
// the answer an RC flow waits for (a UC or UD flow ends when its receiver's engine has the
// last packet), and the last CQE's write.
uint64_t Simulator::nic_cost(const Flow& f) const {
  const NicParams& n = sc_.nic;
  if (!n.pcie) return 0;
  const FlowSpec& s = f.spec;
  const uint64_t post = post_cost(f, std::min<uint64_t>(f.chunks, sc_.nic.wqes_in_flight));
  if (s.verb == Verb::kFaa) return post + n.rx_pipeline_ns + n.atomic_rmw_ns + n.cqe_write_ns;
  const bool answer = s.transport == Transport::kRc;  // an RC flow waits for the responder
  return post + (answer ? n.rx_pipeline_ns : 0) + n.cqe_write_ns;
}

// A packet of `wire_bytes` alone from host `from` to host `to`: store-and-forward and
// propagation over every hop.
uint64_t Simulator::leg_ns(uint32_t from, uint32_t to, uint64_t wire_bytes) const {
  double t = 0;
  for (uint32_t p : net_.path(host_node_[from], host_node_[to])) {
    const Port& port = net_.port(p);
    t += port.delay_ns + wire_bytes * 8e9 / port.rate_bps;
  }
  return static_cast<uint64_t>(t);
}

// The FCT on an empty network: the processing delay, the NIC model's costs, a READ's
// request on its way, the first data packet's store-and-forward through every hop, the rest
// at the path's slowest rate, and for an RC WRITE or SEND the last ACK's way back.
uint64_t Simulator::ideal_fct(const Flow& f) const {
  const FlowSpec& s = f.spec;
  const bool read = s.verb == Verb::kRead;
  const uint32_t from = read ? s.dst : s.src, to = read ? s.src : s.dst;
  uint64_t wire = 0, first = 0;
  const uint64_t int_bytes = sc_.nic.scheme == CcScheme::kHpcc ? kIntHeaderBytes : 0;
  for (uint64_t off = 0; off < s.bytes; off += f.msg_bytes) {
    const uint64_t m = std::min<uint64_t>(f.msg_bytes, s.bytes - off);
    const bool imm = s.transport == Transport::kUc && s.verb == Verb::kWrite && off + m >= s.bytes;
    const MessageWire w = message_wire(s, m, sc_.nic.mtu, imm, int_bytes);
    if (off == 0) first = w.first;
    wire += w.total;
  }
  double min_rate = 1e30;
  for (uint32_t p : net_.path(host_node_[from], host_node_[to]))
    min_rate = std::min(min_rate, net_.port(p).rate_bps);
  double t = static_cast<double>(sc_.nic.processing_delay_ns + nic_cost(f));
  if (read) t += leg_ns(s.src, s.dst, kHeaderBytes + kRethBytes + kFrameOverhead + int_bytes);
  t += leg_ns(from, to, first) + (wire - first) * 8e9 / min_rate;
  if (s.transport == Transport::kRc && !read)
    t += leg_ns(s.dst, s.src, kAckBytes + kFrameOverhead + int_bytes);
  return static_cast<uint64_t>(t);
}

// A packet into a host's engine; what the engine sends in answer leaves the NIC after the
// receive pipeline and the host-memory accesses it made (an atomic's read-modify-write, or
// the ACK queue entry a duplicate atomic is answered from).
void Simulator::deliver(uint32_t node, Packet&& p) {
  const uint32_t h = host_of_node_[node];  // the network delivers to hosts only
  count_delivered(h, p);
  Host& host = *hosts_[h];
  if (p.telemetry) feed_int(host, p);
  const WirePacket w{p.ip, p.tos, p.bytes};
  const Device::ReceiveResult r = host.dev().receive(std::span<const WirePacket>(&w, 1));
  net_.give_back(std::move(p.bytes));  // the engine copied what it keeps
  if (r.atomic_requests > 0) atomic_in_[h].push_back(clock_.now_ns());
  if (!sc_.nic.pcie) return service(h, false);
  uint64_t cost = sc_.nic.rx_pipeline_ns;
  if (r.atomics_replayed > 0) {
    cost += sc_.nic.dma_read_ns;
  } else if (r.atomic_requests > 0) {
    cost += sc_.nic.atomic_rmw_ns;
  }
  host.hold(cost);
  service(h, false);
}

// HPCC's INT at a host: a data packet's records kept for the ACKs that answer it; an ACK's
// given to the sending QP's controller (before the engine sees the ACK and sends more).
void Simulator::feed_int(Host& host, const Packet& p) {
  if (p.kind != wire::PacketKind::kAck) return host.note_int(p);
  wire::Bth bth;
  if (!wire::parse_bth(p.bytes, bth)) return;
  if (auto* hpcc = dynamic_cast<Hpcc*>(host.dev().rate_control(bth.dest_qp)))
    hpcc->on_ack(bth.psn, *p.telemetry, clock_.now_ns());
}

// Bytes of a long flow's data packets (not ACKs, atomic ACKs or CNPs) reaching the QP they
// are for (data_key), by bin.
void Simulator::count_delivered(uint32_t host, const Packet& p) {
  wire::Bth bth;
  if (flow_by_rqp_.empty() || wire::is_control(p.kind) || !wire::parse_bth(p.bytes, bth)) return;
  const auto it = flow_by_rqp_.find(uint64_t{host} << 32 | bth.dest_qp);
  if (it == flow_by_rqp_.end()) return;
  Flow& f = flows_[it->second];
  const uint64_t bin = clock_.now_ns() / bin_ns_;
  if (bin < f.bins.size()) f.bins[bin] += p.bytes.size();
}

// After the simulator touched a host's engine: its completions, then its timer re-armed.
// A timer still due right after on_timer ran goes 1 ns later, so time always moves on.
void Simulator::service(uint32_t i, bool after_timer) {
  Host& h = *hosts_[i];
  WorkCompletion* wc = wc_buf_.data();  // not a local array: its 64 constructors per call
  const bool defer = sc_.nic.pcie && sc_.nic.cqe_write_ns > 0;
  for (int n; (n = h.dev().poll_cq(h.cq(), wc, 64)) > 0;)
    for (int k = 0; k < n; ++k) defer ? defer_cqe(i, wc[k]) : on_completion(wc[k]);
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
    if (const Event* next = ev_.peek()) {  // what the next event touches; the one after it
      net_.prefetch(*next);
      if (const Event* after = ev_.peek_after(*next)) prefetch_line(after);
    }
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
    } else if (e.kind == EventKind::kCqeVisible) {
      on_cqe_visible(e.a);
    } else if (e.kind == EventKind::kFlowStart) {
      open_flow(e.a);
      hold_posted(flows_[e.a], post_more(flows_[e.a]));
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
