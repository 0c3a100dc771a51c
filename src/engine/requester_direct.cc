// Direct mode in the requester: submitting copies to the DirectLink and performing held ones.
#include "engine/requester_direct.h"

#include "engine/completer.h"

namespace vrnic::engine {

namespace {

// Performs the queued copies of every QP: they retire, or go back to their send queues.
DirectStep perform_held(Core& c) {
  c.direct_flush();
  return DirectStep::kAgain;
}

// An RDMA WRITE or READ at the front of an idle send queue (nothing before it outstanding
// but copies, so ordering is kept) that has not failed as a copy before.
bool copyable(const Core& c, const Qp& qp, const SendWqe& w) {
  const RequesterState& r = qp.req;
  // RC only: the peer publishes its RC QPs (an XRC target has no table entry).
  return c.config.direct != nullptr && qp.type == QpType::kRc && !w.no_direct && w.length > 0 &&
         (w.opcode == WrOpcode::kRdmaWrite || w.opcode == WrOpcode::kRdmaRead) &&
         r.cursor == r.direct_pending && r.una == r.next_new_psn;
}

// Submits the copy if the peer's published tables allow it. The local SGEs have passed
// requester_check_local_sges.
bool submit(Core& c, Qp& qp, const SendWqe& w) {
  const bool read = w.opcode == WrOpcode::kRdmaRead;
  SmallVec<DirectSpan, 4> spans;
  if (!w.inline_data.empty()) {
    spans.resize(1);
    spans[0] = {const_cast<uint8_t*>(w.inline_data.data()), w.inline_data.size(), true};
  } else {
    spans.resize(w.sges.size());
    size_t n = 0;
    for (const Sge& s : w.sges) {
      if (s.length == 0) continue;
      const uint32_t need = read ? uint32_t{kLocalWrite} : 0u;
      uint8_t* p = c.mem.check_local(s.lkey, qp.pd, s.addr, s.length, need);
      if (p == nullptr) return false;
      spans[n++] = {p, s.length, false};
    }
    spans.resize(n);
  }
  DirectOp op;
  op.read = read;
  op.qpn = qp.qpn;
  op.dest_qpn = qp.attr.dest_qp_num;
  op.ipv6 = qp.ip.ipv6;
  op.src_ip = qp.ip.src;
  op.dest_ip = qp.ip.dst;
  op.rkey = w.rkey;
  op.remote_addr = w.remote_addr;
  op.length = w.length;
  op.local = std::span<const DirectSpan>(spans.data(), spans.size());
  if (!c.config.direct->submit(op)) {
    ++c.ctr.direct_fallbacks;
    return false;
  }
  return true;
}

// The WQE is a held copy now: started without a PSN, queued until Core::direct_flush.
void hold(Core& c, Qp& qp, SendWqe& w) {
  RequesterState& r = qp.req;
  w.started = w.direct = true;
  w.first_psn = r.next_new_psn;
  w.npkts = 0;
  ++r.cursor;
  r.cursor_pkt = 0;
  ++r.direct_pending;
  if (c.direct_ops.empty()) c.direct_first_ns = c.now();
  c.direct_ops.push_back(&qp);
  if (w.signaled) ++c.direct_signaled;
}

}  // namespace

DirectStep requester_direct_step(Core& c, Qp& qp, SendWqe& w) {
  const RequesterState& r = qp.req;
  const bool copy = copyable(c, qp, w);
  if (r.direct_pending == 0 && !copy) return DirectStep::kWire;
  // A bind / local invalidate runs after the copies before it.
  if (w.is_local()) return r.direct_pending > 0 ? perform_held(c) : DirectStep::kWire;
  // What the requester waits for (or, started, resends) is no business of direct mode.
  if (w.started || w.local_status != WcStatus::kSuccess || qp.state() == QpState::kSqd)
    return DirectStep::kWire;
  // Held READs count against a fence and the rd/atomic limit: perform them rather than wait
  // for a poll (which performs held copies only if one of them is signaled).
  if (r.direct_pending > 0 && requester_waits_for_rd_atomic(qp, w)) return perform_held(c);
  if (!requester_check_local_sges(c, qp, w)) return DirectStep::kWire;  // the requester fails it
  if (copy) {
    if (c.config.direct->full()) return perform_held(c);  // then look again
    if (submit(c, qp, w)) {
      hold(c, qp, w);
      return DirectStep::kAgain;
    }
  }
  // Nothing goes on the wire while copies before it are not done (ordering).
  return r.direct_pending > 0 ? perform_held(c) : DirectStep::kWire;
}

void Core::direct_flush() {
  if (direct_ops.empty()) return;
  direct_scratch.clear();
  direct_scratch.swap(direct_ops);
  direct_signaled = 0;
  const size_t done = config.direct->flush();
  for (size_t i = 0; i < direct_scratch.size(); ++i) {
    Qp& qp = *direct_scratch[i];
    if (i < done) {
      SendWqe& w = qp.sq.front();
      ++(w.opcode == WrOpcode::kRdmaRead ? ctr.direct_reads : ctr.direct_writes);
      ctr.direct_bytes += w.length;
      --qp.req.direct_pending;
      completer_retire_local(*this, qp);
    } else if (qp.req.direct_pending > 0) {
      // The failed copy and those after it: back to not started, for the wire.
      RequesterState& r = qp.req;
      for (uint32_t j = 0; j < r.direct_pending; ++j) {
        SendWqe& w = qp.sq[j];
        w.started = w.direct = false;
        w.no_direct = true;
        ++ctr.direct_fallbacks;
      }
      r.cursor -= r.direct_pending;
      r.cursor_pkt = 0;
      r.direct_pending = 0;
    }
    mark_tx_ready(qp);
  }
  direct_scratch.clear();
}

}  // namespace vrnic::engine
