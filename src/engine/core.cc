// Shared device internals: completions, error transition with flush, packet start, SGE copy.
#include "engine/core.h"

#include "engine/congestion.h"
#include "engine/qp_transition.h"

#include "wire/opcode.h"
#include "wire/psn.h"
#include "wire/gid.h"

#include <algorithm>
#include <cstring>

namespace vrnic::engine {

namespace {
wire::IpUdpInfo ip_from_gid(const Gid& gid) {
  wire::IpUdpInfo ip;
  ip.src = wire::ip_of_gid(gid.raw, ip.ipv6);
  ip.dst_port = wire::kRoceV2Port;
  ip.ip_id = 0;
  ip.ip_flags_frag = 0x4000;  // DF: the sender then uses IP ID 0 and knows the whole header
  return ip;
}
}  // namespace

Core::Core(const DeviceConfig& cfg, PacketPort& p, Clock& c, HostMemory& h, EventSink& e)
    : config(cfg), port(p), clock(c), events(e),
      ctr(cfg.counters ? *cfg.counters : own_counters), names(cfg.name_seed), mem(h, names), local_ip(ip_from_gid(cfg.gid)) {
  tx.set_auth(&auth);
}

void Core::complete(Cq* cq, WorkCompletion wc, bool solicited) {
  if (cq == nullptr) return;
  wc.completion_ts_ns = now();
  bool error = wc.status != WcStatus::kSuccess;
  if (!cq->push(wc)) {
    ++ctr.cq_overflows;
    async_event(AsyncEventType::kCqErr, cq->user_context());
    return;
  }
  if (error) ++ctr.cqe_error; else ++ctr.cqe_ok;
  if (cq->take_notification(solicited, error, wc.completion_ts_ns)) {
    events.on_cq_event(cq, cq->user_context());
  } else {
    watch_cq_deadline(cq);
  }
}

void Core::watch_cq_deadline(Cq* cq) {
  if (cq->notify_deadline() == UINT64_MAX) return;
  note_deadline(cq->notify_deadline());
  if (!cq->timer_listed) {
    cq->timer_listed = true;
    moderated_cqs.push_back(cq);
  }
}

uint64_t Core::fire_due_cq_events() {
  uint64_t next = UINT64_MAX;
  const uint64_t t = now();
  size_t kept = 0;
  for (Cq* cq : moderated_cqs) {
    if (cq->take_due_notification(t)) events.on_cq_event(cq, cq->user_context());
    if (cq->notify_deadline() == UINT64_MAX) {
      cq->timer_listed = false;
      continue;
    }
    next = std::min(next, cq->notify_deadline());
    moderated_cqs[kept++] = cq;
  }
  moderated_cqs.resize(kept);
  return next;
}

void Core::forget_cq(Cq* cq) {
  if (!cq->timer_listed) return;
  moderated_cqs.erase(std::find(moderated_cqs.begin(), moderated_cqs.end(), cq));
  cq->timer_listed = false;
}

void Core::async_event(AsyncEventType type, void* ctx) {
  AsyncEvent ev{type, ctx, 1};
  events.on_async_event(ev);
}

void Core::flush_queues(Qp& qp) {
  while (!qp.sq.empty()) {
    const SendWqe& w = qp.sq.front();
    WorkCompletion wc;
    wc.wr_id = w.wr_id;
    wc.status = WcStatus::kWrFlushErr;
    wc.qp_num = qp.qpn;
    wc.src_qp = qp.attr.dest_qp_num;
    complete(qp.send_cq, wc);
    qp.sq.pop_front();
  }
  auto flush_recv = [&](const RecvWqe& r) {
    WorkCompletion wc;
    wc.wr_id = r.wr_id;
    wc.status = WcStatus::kWrFlushErr;
    wc.opcode = WcOpcode::kRecv;
    wc.qp_num = qp.qpn;
    wc.src_qp = qp.attr.dest_qp_num;
    complete(qp.recv_cq, wc);
  };
  if (qp.resp.have_recv) {
    flush_recv(qp.resp.recv);
    qp.resp.have_recv = false;
  }
  while (!qp.rq.empty()) {
    flush_recv(qp.rq.front());
    qp.rq.pop_front();
  }
  qp.req.cursor = 0;
  qp.req.cursor_pkt = 0;
}

void Core::publish_qp(const Qp& qp) {
  if (config.direct == nullptr || qp.type != QpType::kRc) return;
  DirectQp d;
  d.qpn = qp.qpn;
  d.pd = qp.pd->handle;
  d.access = qp.attr.qp_access_flags;
  d.dest_qpn = qp.attr.dest_qp_num;
  const QpState s = qp.state();
  d.responds = s == QpState::kRtr || s == QpState::kRts || s == QpState::kSqd;
  d.ipv6 = qp.ip.ipv6;
  d.dest_ip = qp.ip.dst;
  config.direct->publish_qp(d);
}

void Core::retract_qp(const Qp& qp) {
  if (config.direct != nullptr && qp.type == QpType::kRc) config.direct->retract_qp(qp.qpn);
}

void Core::publish_mr(const Mr& mr) {
  if (config.direct == nullptr) return;
  DirectMr d;
  d.key = mr.key;
  d.pd = mr.pd->handle;
  d.access = mr.access;
  d.iova = mr.iova;
  d.length = mr.length;
  d.host = mr.host;
  config.direct->publish_mr(d);
}

void Core::retract_mr(const Mr& mr) {
  if (config.direct != nullptr) config.direct->retract_mr(mr.key);
}

void Core::enter_error(Qp& qp) { qp_transition(*this, qp, QpState::kErr, QpCause::kError); }

std::span<uint8_t> Core::start_packet(Qp& qp, const wire::Packet& p, size_t payload_len) {
  const uint8_t tos = data_tos(*this, qp.attr.ah.traffic_class);
  if (is_xrc(qp.type)) {
    // The requester and responder build RC packets; XRC has the same operations at
    // 0xa0 | opcode (IBA 9.2.1), requests with the XRCETH the packet carries.
    wire::Packet x = p;
    x.bth.opcode = wire::rc_to_xrc(p.bth.opcode);
    return tx.start(x, payload_len, qp.ip, tos, qp.qpn);
  }
  return tx.start(p, payload_len, qp.ip, tos, qp.qpn);
}

size_t Core::commit_packet() { return tx.commit(port, ctr); }

void Core::recount_inflight(Qp& qp) {
  RequesterState& r = qp.req;
  int32_t d = is_reliable(qp.type) && qp.sending() ? wire::psn_diff(r.next_psn, r.una) : 0;
  uint32_t now = d > 0 ? static_cast<uint32_t>(d) : 0;
  inflight = inflight - r.counted_inflight + now;
  r.counted_inflight = now;
}

void Core::mark_tx_ready(Qp& qp) {
  for (Qp* q : tx_ready)
    if (q == &qp) return;
  tx_ready.push_back(&qp);
}

bool Core::gather(const Pd* pd, const SgeList& sges, uint64_t offset, uint8_t* dst,
                  uint64_t len) {
  size_t i = 0;
  while (i < sges.size() && offset >= sges[i].length) offset -= sges[i++].length;
  while (len > 0) {
    if (i >= sges.size()) return false;
    const Sge& s = sges[i];
    uint64_t n = s.length - offset;
    if (n > len) n = len;
    const uint8_t* src = mem.check_local(s.lkey, pd, s.addr + offset, n, 0);
    if (src == nullptr) return false;
    std::memcpy(dst, src, n);
    dst += n;
    len -= n;
    offset = 0;
    ++i;
  }
  return true;
}

bool Core::scatter(const Pd* pd, const SgeList& sges, uint64_t offset,
                   const uint8_t* src, uint64_t len) {
  size_t i = 0;
  while (i < sges.size() && offset >= sges[i].length) offset -= sges[i++].length;
  while (len > 0) {
    if (i >= sges.size()) return false;
    const Sge& s = sges[i];
    uint64_t n = s.length - offset;
    if (n > len) n = len;
    uint8_t* dst = mem.check_local(s.lkey, pd, s.addr + offset, n, kLocalWrite);
    if (dst == nullptr) return false;
    std::memcpy(dst, src, n);
    src += n;
    len -= n;
    offset = 0;
    ++i;
  }
  return true;
}

}  // namespace vrnic::engine
