// The in-simulation verbs client: each flow's QP pair (RC, UC or UD), its WRITEs, READs,
// SENDs and the RECVs they need, or its one Fetch-and-Add, and what each completion means.
#include <algorithm>
#include <stdexcept>

#include "sim/simulator.h"

namespace vrnic::sim {

using namespace engine;

namespace {

constexpr uint64_t kRecvBit = uint64_t{1} << 62;  // wr_id of a RECV: the flow's index | this
constexpr uint64_t kRecvDepth = 256;               // RECVs a receiver keeps posted at most

QpType qp_type_of(Transport t) {
  return t == Transport::kUc ? QpType::kUc : t == Transport::kUd ? QpType::kUd : QpType::kRc;
}

}  // namespace

// RECVs a flow's receiver needs: one per SEND, one for a UC flow's closing WRITE with
// immediate, none otherwise.
uint64_t Simulator::recvs_needed(const Flow& f) const {
  if (f.spec.verb == Verb::kSend) return f.chunks;
  return f.spec.verb == Verb::kWrite && f.spec.transport == Transport::kUc ? 1 : 0;
}

// A flow's QP pair, connected when it starts (in no virtual time) and destroyed when it ends,
// so that each engine holds only the QPs of its flows under way.
void Simulator::open_flow(uint32_t i) {
  Flow& f = flows_[i];
  Host& src = *hosts_[f.spec.src];
  Host& dst = *hosts_[f.spec.dst];
  if (f.spec.verb == Verb::kFaa) src.register_words(), dst.register_words();
  const QpType type = qp_type_of(f.spec.transport);
  const auto depth = static_cast<uint32_t>(std::clamp<uint64_t>(recvs_needed(f), 1, kRecvDepth));
  f.qp = src.create_qp(type, sc_.nic.wqes_in_flight, 1);
  f.rqp = dst.create_qp(type, 1, depth);
  f.sqpn = src.dev().qp_num(f.qp);
  f.rqpn = dst.dev().qp_num(f.rqp);
  f.path = PathParams{sc_.nic.mtu, sc_.nic.ack_timeout,
                      static_cast<uint8_t>(f.spec.dscp < 0 ? 0 : f.spec.dscp << 2)};
  if (src.connect(f.qp, type, f.rqpn, ipv4_of_host(f.spec.dst), f.path) ||
      dst.connect(f.rqp, type, f.sqpn, ipv4_of_host(f.spec.src), f.path))
    throw std::runtime_error("sim: connecting a flow's QPs failed");
  if (!f.bins.empty()) flow_by_rqp_[data_key(f)] = i;
  if (f.spec.set_initial) dst.set_atomic_word(f.spec.initial);
  post_recvs(f);
}

// Where a long flow's data arrives: its receiver's QP (a READ's: the requester's).
uint64_t Simulator::data_key(const Flow& f) const {
  return f.spec.verb == Verb::kRead ? uint64_t{f.spec.src} << 32 | f.sqpn
                                    : uint64_t{f.spec.dst} << 32 | f.rqpn;
}

void Simulator::close_flow(Flow& f, bool failed) {
  f.failed = failed;
  f.finished = true;
  ++finished_;
  if (!f.bins.empty()) flow_by_rqp_.erase(data_key(f));
  hosts_[f.spec.src]->dev().destroy_qp(f.qp);
  hosts_[f.spec.dst]->dev().destroy_qp(f.rqp);
  f.qp = f.rqp = nullptr;
}

void Simulator::finish_flow(Flow& f) {
  f.fct_ns = clock_.now_ns() - f.spec.start_ns;
  if (f.spec.verb == Verb::kFaa) record_atomic(f);
  close_flow(f, false);
}

void Simulator::post_recvs(Flow& f) {
  const uint64_t id = static_cast<uint64_t>(&f - flows_.data());
  const bool ud = f.spec.transport == Transport::kUd;
  while (f.recv_posted < recvs_needed(f) && f.recv_posted - f.recv_done < kRecvDepth) {
    if (hosts_[f.spec.dst]->post_recv(f.rqp, kRecvBit | id, f.msg_bytes, ud) != 0)
      return close_flow(f, true);
    ++f.recv_posted;
  }
}

// Keeps wqes_in_flight messages posted: 64 KiB each (UD: one MTU), the last shorter; a UC
// flow's last WRITE carries an immediate, so that its receiver sees the end.
uint64_t Simulator::post_more(Flow& f) {
  Host& src = *hosts_[f.spec.src];
  const auto id = static_cast<uint64_t>(&f - flows_.data());
  const uint64_t before = f.posted;
  if (f.spec.verb == Verb::kFaa) {
    if (f.posted > 0) return 0;
    if (src.post_faa(f.qp, *hosts_[f.spec.dst], id, f.spec.add) != 0) {
      close_flow(f, true);
      return 0;
    }
    f.posted = 1;
    return 1;
  }
  const QpType type = qp_type_of(f.spec.transport);
  while (!f.finished && f.posted < f.chunks && f.posted - f.done < sc_.nic.wqes_in_flight) {
    const uint64_t off = f.posted * f.msg_bytes;
    const auto bytes = static_cast<uint32_t>(std::min<uint64_t>(f.msg_bytes, f.spec.bytes - off));
    const bool imm = f.spec.transport == Transport::kUc && f.spec.verb == Verb::kWrite &&
                     f.posted + 1 == f.chunks;
    if (src.post(f.qp, type, f.spec.verb, *hosts_[f.spec.dst], f.rqpn, id, bytes, imm,
                 f.path)) {
      close_flow(f, true);
      break;
    }
    ++f.posted;
  }
  return f.posted - before;
}

// An RC flow completes with its last message's CQE at the sender (the ACK or the READ's
// last response); a UC or UD flow with its receiver's last RECV CQE (a message lost on the
// way leaves it incomplete). An error CQE fails the flow (its QP is in error).
void Simulator::on_completion(const WorkCompletion& wc) {
  const bool recv = (wc.wr_id & kRecvBit) != 0;
  const uint64_t i = wc.wr_id & ~kRecvBit;
  if (i >= flows_.size()) return;
  Flow& f = flows_[i];
  if (f.finished) return;
  if (wc.status != WcStatus::kSuccess) return close_flow(f, true);
  const bool reliable = f.spec.transport == Transport::kRc;
  if (recv) {
    if (++f.recv_done == recvs_needed(f) && !reliable) return finish_flow(f);
    return post_recvs(f);
  }
  if (++f.done == f.chunks && reliable) return finish_flow(f);
  hold_posted(f, post_more(f));
}

// The NIC's cost of `posted` work requests posted at once, before the first packet leaves:
// the doorbell (one per WQE without doorbell batching or with BlueFlame), the WQEs read in
// one DMA read (none with BlueFlame: they came with the doorbell), the payload in another
// (the batch's reads pipelined; none for a Fetch-and-Add or READ request, or a message of
// at most inline_bytes, which rides in its WQE).
uint64_t Simulator::post_cost(const Flow& f, uint64_t posted) const {
  const NicParams& n = sc_.nic;
  const bool payload = f.spec.verb != Verb::kFaa && f.spec.verb != Verb::kRead &&
                       std::min<uint64_t>(f.msg_bytes, f.spec.bytes) > n.inline_bytes;
  const uint64_t doorbells = n.doorbell_batching && !n.blueflame ? 1 : posted;
  return doorbells * n.doorbell_ns + (n.blueflame ? 0 : n.dma_read_ns) +
         (payload ? n.dma_read_ns : 0);
}

void Simulator::hold_posted(Flow& f, uint64_t posted) {
  if (posted > 0) hosts_[f.spec.src]->hold(post_cost(f, posted));
}

// NIC model: a CQE the engine wrote becomes visible cqe_write_ns later (its DMA write).
void Simulator::defer_cqe(uint32_t host, const WorkCompletion& wc) {
  const uint64_t at = clock_.now_ns() + sc_.nic.cqe_write_ns;
  pending_cqes_.resize(hosts_.size());
  pending_cqes_[host].emplace_back(at, wc);
  ev_.push(at, EventKind::kCqeVisible, host);
}

void Simulator::on_cqe_visible(uint32_t host) {
  auto& q = pending_cqes_[host];
  while (!q.empty() && q.front().first <= clock_.now_ns()) {
    const WorkCompletion wc = q.front().second;
    q.pop_front();
    on_completion(wc);
  }
  service(host, false);
}

void Simulator::record_atomic(const Flow& f) {
  AtomicResult r;
  r.flow = static_cast<uint32_t>(&f - flows_.data());
  r.fetched = hosts_[f.spec.src]->fetched();
  r.memory = hosts_[f.spec.dst]->atomic_word();
  atomics_.push_back(r);
}

}  // namespace vrnic::sim
