// Requester: posting send WRs and turning send WQEs into request packets.
#include "engine/congestion.h"
#include "engine/requester.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "engine/completer.h"
#include "engine/mw.h"
#include "engine/requester_direct.h"
#include "wire/opcode.h"
#include "wire/psn.h"

namespace vrnic::engine {

using wire::psn_add;
using wire::psn_diff;

namespace {

bool is_send(WrOpcode op) {
  return op == WrOpcode::kSend || op == WrOpcode::kSendWithImm || op == WrOpcode::kSendWithInv;
}
bool is_write(WrOpcode op) {
  return op == WrOpcode::kRdmaWrite || op == WrOpcode::kRdmaWriteWithImm;
}

uint32_t packets_for(uint64_t length, uint32_t mtu) {
  return length == 0 ? 1 : static_cast<uint32_t>((length + mtu - 1) / mtu);
}

// Opcode of packet k of n of a SEND or WRITE (IBA 9.4: first / middle / last / only).
uint8_t data_opcode(const SendWqe& w, uint32_t k, uint32_t n) {
  bool first = k == 0, last = k + 1 == n;
  switch (w.opcode) {
    case WrOpcode::kSend:
      return first && last ? wire::kRcSendOnly : first ? wire::kRcSendFirst
             : last ? wire::kRcSendLast : wire::kRcSendMiddle;
    case WrOpcode::kSendWithImm:
      return first && last ? wire::kRcSendOnlyImm : first ? wire::kRcSendFirst
             : last ? wire::kRcSendLastImm : wire::kRcSendMiddle;
    case WrOpcode::kSendWithInv:
      return first && last ? wire::kRcSendOnlyInv : first ? wire::kRcSendFirst
             : last ? wire::kRcSendLastInv : wire::kRcSendMiddle;
    case WrOpcode::kRdmaWrite:
      return first && last ? wire::kRcWriteOnly : first ? wire::kRcWriteFirst
             : last ? wire::kRcWriteLast : wire::kRcWriteMiddle;
    case WrOpcode::kRdmaWriteWithImm:
      return first && last ? wire::kRcWriteOnlyImm : first ? wire::kRcWriteFirst
             : last ? wire::kRcWriteLastImm : wire::kRcWriteMiddle;
    default: return 0;
  }
}

// Responder resources a started READ holds: one per piece asked for (up to packet
// `requested`) and not yet answered in full. A direct one holds one until its copy is done.
size_t read_pieces_held(const SendWqe& w, uint32_t requested) {
  if (w.direct || w.read_piece == 0) return 1;
  if (requested <= w.read_placed) return 0;
  return (requested + w.read_piece - 1) / w.read_piece - w.read_placed / w.read_piece;
}

// The responder resources the QP's requests hold: each atomic one, each READ one per piece
// in flight; a READ whose pieces are still being asked for sits at the cursor.
size_t outstanding_rd_atomic(const Qp& qp) {
  const RequesterState& r = qp.req;
  size_t n = 0;
  for (size_t i = 0; i <= r.cursor && i < qp.sq.size(); ++i) {
    const SendWqe& w = qp.sq[i];
    if (!w.started || !w.is_read_or_atomic()) continue;
    const uint32_t requested = i < r.cursor ? w.npkts : r.cursor_pkt;
    if (w.opcode == WrOpcode::kRdmaRead) n += read_pieces_held(w, requested);
    else if (i < r.cursor || requested > 0) ++n;
  }
  return n;
}

uint32_t rd_atomic_limit(const Qp& qp) {
  return qp.attr.max_rd_atomic == 0 ? 1 : qp.attr.max_rd_atomic;
}

wire::Packet base_packet(const Qp& qp, const SendWqe& w, uint32_t psn) {
  wire::Packet p;
  p.bth.dest_qp = qp.attr.dest_qp_num;
  p.xrc_srqn = w.xrc_srqn;  // written only on an XRC QP (Core::start_packet)
  p.bth.psn = psn;
  p.bth.pkey = 0xffff;
  return p;
}

void count_sent(Core& c, Qp& qp, uint32_t psn, uint32_t span, bool asked) {
  RequesterState& r = qp.req;
  if (psn_diff(psn, r.high_psn) < 0) ++c.ctr.retransmitted_packets;
  uint32_t end = psn_add(psn, span);
  if (psn_diff(end, r.high_psn) > 0) r.high_psn = end;
  if (asked) r.asked_end = end;
  // A packet is now outstanding: arm the local ACK timer unless it runs already.
  uint64_t t = ack_timeout_ns(qp.attr.timeout);
  if (t != 0 && r.ack_deadline == 0) {
    r.ack_deadline = c.now() + t;
    c.note_qp_deadline(qp, r.ack_deadline);
  }
}

// True if a packet in flight (from una up to next_psn) asked for a response: an ACK will come.
bool asked_in_flight(const RequesterState& r) {
  return psn_diff(r.asked_end, r.una) > 0 && psn_diff(r.asked_end, r.next_psn) <= 0;
}

// Sends packet k of a SEND / WRITE WQE. stop_after: the window or the device budget will
// hold the QP after this packet, or the controller's window (cc_window_holds) within the
// next cc_ack_interval packets (a window that shrinks under packets in flight, none of
// which asked for an ACK, would otherwise wait for the ACK timer), or DCQCN paces it too slowly for the ACK timer
// (cc_acks_every_packet), so it must ask for an ACK (else none would come before the ACK
// timer, the responder acknowledging only packets that ask).
bool send_data_packet(Core& c, Qp& qp, SendWqe& w, uint32_t k, bool stop_after) {
  uint32_t mtu = qp.mtu();
  uint32_t psn = psn_add(w.first_psn, k);
  uint64_t off = uint64_t{k} * mtu;
  uint64_t len = w.length > off ? w.length - off : 0;
  if (len > mtu) len = mtu;
  wire::Packet p = base_packet(qp, w, psn);
  p.bth.opcode = data_opcode(w, k, w.npkts);
  const wire::OpcodeInfo& info = wire::opcode_info(p.bth.opcode);
  bool last = k + 1 == w.npkts;
  p.bth.ack_req = last || stop_after || (k + 1) % cc_ack_interval(c, qp) == 0;
  p.bth.solicited = last && (w.send_flags & kSendSolicited);
  if (info.has(wire::kHasReth)) p.reth = {w.remote_addr, w.rkey, w.length};
  if (info.has(wire::kHasImm)) p.imm = w.imm_data;
  if (info.has(wire::kHasIeth)) p.ieth_rkey = w.invalidate_rkey;
  std::span<uint8_t> payload = c.start_packet(qp, p, len);
  if (!w.inline_data.empty()) {
    std::memcpy(payload.data(), w.inline_data.data() + off, len);
  } else if (!c.gather(qp.pd, w.sges, off, payload.data(), len)) {
    // The MR was deregistered after the WQE started: the packet is not committed (so never
    // sent) and the WQE fails with a local protection error when it reaches the front.
    w.local_status = WcStatus::kLocProtErr;
    return false;
  }
  cc_on_sent(c, qp, c.commit_packet());
  count_sent(c, qp, psn, 1, p.bth.ack_req);
  return true;
}

// Sends a READ request for response packets [k, k + n) of the WQE.
void send_read_request(Core& c, Qp& qp, SendWqe& w, uint32_t k, uint32_t n) {
  uint32_t mtu = qp.mtu();
  uint64_t off = uint64_t{k} * mtu;
  uint64_t left = w.length > off ? w.length - off : 0;
  uint64_t len = uint64_t{n} * mtu < left ? uint64_t{n} * mtu : left;
  uint32_t psn = psn_add(w.first_psn, k);
  wire::Packet p = base_packet(qp, w, psn);
  p.bth.opcode = wire::kRcReadRequest;
  p.bth.ack_req = true;
  p.reth = {w.remote_addr + off, w.rkey, static_cast<uint32_t>(len)};
  c.start_packet(qp, p, 0);
  cc_on_sent(c, qp, c.commit_packet());
  count_sent(c, qp, psn, n, true);
}

// ATOMIC WRITE (IBA 1.5 Annex A19): a RETH naming the 8 target bytes and the 8 bytes as
// payload, copied from the WQE (the verb takes them by value, no SGE).
void send_atomic_write(Core& c, Qp& qp, SendWqe& w) {
  wire::Packet p = base_packet(qp, w, w.first_psn);
  p.bth.opcode = wire::kRcAtomicWrite;
  p.bth.ack_req = true;
  p.reth = {w.remote_addr, w.rkey, 8};
  std::span<uint8_t> payload = c.start_packet(qp, p, 8);
  std::memcpy(payload.data(), &w.compare_add, 8);
  cc_on_sent(c, qp, c.commit_packet());
  count_sent(c, qp, w.first_psn, 1, true);
}

void send_atomic(Core& c, Qp& qp, SendWqe& w) {
  wire::Packet p = base_packet(qp, w, w.first_psn);
  p.bth.opcode = w.opcode == WrOpcode::kAtomicCmpSwp ? wire::kRcCompareSwap : wire::kRcFetchAdd;
  p.bth.ack_req = true;
  p.atomic.va = w.remote_addr;
  p.atomic.rkey = w.rkey;
  p.atomic.swap_add = w.opcode == WrOpcode::kAtomicCmpSwp ? w.swap : w.compare_add;
  p.atomic.compare = w.opcode == WrOpcode::kAtomicCmpSwp ? w.compare_add : 0;
  c.start_packet(qp, p, 0);
  cc_on_sent(c, qp, c.commit_packet());
  count_sent(c, qp, w.first_psn, 1, true);
}

WcStatus run_local(Core& c, Qp& qp, const SendWqe& w) {
  if (w.opcode == WrOpcode::kLocalInv) return mw_local_invalidate(c, qp, w.invalidate_rkey);
  // The Bind MW verb binds type 1 windows only, IBV_WR_BIND_MW type 2 only.
  if (!c.mem.has_mw(w.bind.mw) || (w.bind.mw->type == 1) != w.type1_bind)
    return WcStatus::kMwBindErr;
  return mw_bind(c, qp, w.bind);
}

}  // namespace

// Local memory check when a WQE starts: every SGE must be a valid local region of the QP's
// PD; READ and atomic destinations need local write access (IBA 10.6.3).
bool requester_check_local_sges(Core& c, const Qp& qp, const SendWqe& w) {
  if (!w.inline_data.empty() || (w.send_flags & kSendInline)) return true;
  uint32_t need = w.is_read_or_atomic() ? uint32_t{kLocalWrite} : 0u;
  for (const Sge& s : w.sges)
    if (s.length != 0 && c.mem.check_local(s.lkey, qp.pd, s.addr, s.length, need) == nullptr)
      return false;
  return true;
}

bool requester_waits_for_rd_atomic(const Qp& qp, const SendWqe& w) {
  // Counted only for the WQEs that can wait: the count walks the started WQEs.
  const bool fenced = (w.send_flags & kSendFence) != 0;
  if (!fenced && !w.is_read_or_atomic()) return false;
  const size_t outstanding = outstanding_rd_atomic(qp);
  if (fenced && outstanding > 0) return true;  // 10.8.3.3
  return w.is_read_or_atomic() && outstanding >= rd_atomic_limit(qp);
}

namespace {

// The checks of a WR that need no copy of it: QP state, opcode, SGE count, queue room.
Errno check_post(Core& c, Qp& qp, const SendWr& wr) {
  QpState s = qp.state();
  if (s != QpState::kRts && s != QpState::kSqd && s != QpState::kErr) return EINVAL;
  switch (wr.opcode) {
    case WrOpcode::kRdmaWrite: case WrOpcode::kRdmaWriteWithImm: case WrOpcode::kSend:
    case WrOpcode::kSendWithImm: case WrOpcode::kRdmaRead: case WrOpcode::kAtomicCmpSwp:
    case WrOpcode::kAtomicFetchAdd: case WrOpcode::kSendWithInv: case WrOpcode::kLocalInv:
      break;
    case WrOpcode::kAtomicWrite:
      // RC only (as rxe); XRC's ATOMIC WRITE opcode is not offered. UC / UD refuse it below.
      if (is_xrc(qp.type)) return EINVAL;
      break;
    case WrOpcode::kBindMw:
      if (wr.bind.mw == nullptr) return EINVAL;
      break;
    default:
      return EINVAL;
  }
  if (!is_reliable(qp.type))
    if (Errno e = unreliable_check_post(c, qp, wr)) return e;  // ud.cc
  if (wr.num_sge > qp.cap.max_send_sge) return EINVAL;
  if (wr.num_sge > 0 && wr.sg_list == nullptr) return EINVAL;
  if (qp.sq.size() >= qp.cap.max_send_wr) return ENOMEM;
  return 0;
}

}  // namespace

Errno requester_post(Core& c, Qp& qp, const SendWr& wr, bool type1_bind) {
  if (Errno e = check_post(c, qp, wr)) return e;
  SendWqe w;
  uint64_t total = 0;
  for (uint32_t i = 0; i < wr.num_sge; ++i) total += wr.sg_list[i].length;
  if (total > (uint64_t{1} << 31)) return EINVAL;  // 2^31 bytes at most (C9-94)
  if ((wr.opcode == WrOpcode::kBindMw || wr.opcode == WrOpcode::kLocalInv) && wr.num_sge != 0)
    total = 0;  // no data: SGEs of a bind / local invalidate are ignored

  bool atomic = wr.opcode == WrOpcode::kAtomicCmpSwp || wr.opcode == WrOpcode::kAtomicFetchAdd;
  if (atomic && (wr.num_sge != 1 || wr.sg_list[0].length < 8)) return EINVAL;
  const bool atomic_write = wr.opcode == WrOpcode::kAtomicWrite;
  if (atomic_write) total = 0;  // its 8 bytes come with the WR (compare_add), not from SGEs
  if (wr.send_flags & kSendInline) {
    if (!is_send(wr.opcode) && !is_write(wr.opcode)) return EINVAL;
    if (total > qp.cap.max_inline_data) return EINVAL;
    w.inline_data.resize(total);
    uint64_t at = 0;
    for (uint32_t i = 0; i < wr.num_sge; ++i) {
      // Inline data is read from the caller's buffer now, not through an lkey.
      std::memcpy(w.inline_data.data() + at, reinterpret_cast<const void*>(wr.sg_list[i].addr),
                  wr.sg_list[i].length);
      at += wr.sg_list[i].length;
    }
  } else if (!atomic_write) {
    w.sges.assign(wr.sg_list, wr.sg_list + wr.num_sge);
  }
  w.wr_id = wr.wr_id;
  w.opcode = wr.opcode;
  w.send_flags = wr.send_flags;
  w.imm_data = wr.imm_data;
  w.invalidate_rkey = wr.invalidate_rkey;
  w.remote_addr = wr.remote_addr;
  w.rkey = wr.rkey;
  w.compare_add = wr.compare_add;
  w.swap = wr.swap;
  w.xrc_srqn = wr.xrc_remote_srqn;
  if (wr.opcode == WrOpcode::kBindMw) {
    w.bind = wr.bind;
    w.type1_bind = type1_bind;
  }
  w.length = atomic || atomic_write ? 8 : static_cast<uint32_t>(total);
  if (atomic) w.sges[0].length = 8;
  w.signaled = qp.sq_sig_all || (wr.send_flags & kSendSignaled);
  if (qp.type == QpType::kUd) {
    w.remote_qpn = wr.remote_qpn & 0xffffff;
    // C10-15: a Q_Key with the high-order bit set means the QP's own Q_Key (IBA 10.2.5).
    w.remote_qkey = (wr.remote_qkey & kPrivilegedQkeyBit) ? qp.attr.qkey : wr.remote_qkey;
    w.dst_ipv6 = wr.ah->ipv6;
    w.dst = wr.ah->dst;
    w.traffic_class = wr.ah->av.traffic_class;
  }
  qp.sq.push_back(std::move(w));
  return 0;
}

void requester_arm_timer(Core& c, Qp& qp, bool restart) {
  RequesterState& r = qp.req;
  uint64_t t = ack_timeout_ns(qp.attr.timeout);
  bool outstanding = r.una != r.next_psn || r.cursor > 0;
  if (t == 0 || !outstanding) {
    r.ack_deadline = 0;
    return;
  }
  if (restart || r.ack_deadline == 0) {
    r.ack_deadline = c.now() + t;
    c.note_qp_deadline(qp, r.ack_deadline);
  }
}

void requester_go_back(Core& c, Qp& qp, uint32_t psn) {
  RequesterState& r = qp.req;
  size_t i = 0;
  for (; i < qp.sq.size(); ++i) {
    SendWqe& w = qp.sq[i];
    if (!w.started) break;
    int32_t off = psn_diff(psn, w.first_psn);
    if (off >= 0 && static_cast<uint32_t>(off) < w.npkts) {
      r.cursor = i;
      r.cursor_pkt = static_cast<uint32_t>(off);
      r.next_psn = psn;
      c.mark_tx_ready(qp);
      return;
    }
  }
  r.cursor = i;
  r.cursor_pkt = 0;
  r.next_psn = r.next_new_psn;
  c.mark_tx_ready(qp);
}

// Whether the device budget lets this QP put `n` more packets in flight now; if not, the
// QP waits on Core::budget_waiters. A QP with nothing in flight may always send.
bool budget_allows(Core& c, Qp& qp, uint32_t in_flight, uint32_t n) {
  if (in_flight == 0 || c.inflight - qp.req.counted_inflight + in_flight + n <= kDeviceWindow)
    return true;
  if (!qp.req.budget_wait) {
    qp.req.budget_wait = true;
    c.budget_waiters.push_back(&qp);
  }
  return false;
}

namespace {

// A bind or local invalidate runs when the queue reaches it and completes (in order) as
// soon as the WQEs before it have. False: it cannot run yet, or it failed.
bool run_local_wqe(Core& c, Qp& qp, SendWqe& w) {
  RequesterState& r = qp.req;
  if (!w.started) {
    if (w.local_status != WcStatus::kSuccess) return false;
    if (qp.state() == QpState::kSqd) return false;
    if ((w.send_flags & kSendFence) && outstanding_rd_atomic(qp) > 0) return false;  // 10.8.3.3
    WcStatus st = run_local(c, qp, w);
    if (st != WcStatus::kSuccess) {
      w.local_status = st;
      completer_check_front(c, qp);
      return false;
    }
    w.started = true;
    w.first_psn = r.next_new_psn;
    w.npkts = 0;
  }
  ++r.cursor;
  r.cursor_pkt = 0;
  completer_retire_local(c, qp);
  return true;
}

// Starts a WQE on the wire: its PSNs. False while a fence or the rd/atomic limit holds it,
// or when its local SGEs fail the memory check (it then fails when it reaches the front).
bool start_wqe(Core& c, Qp& qp, SendWqe& w) {
  RequesterState& r = qp.req;
  if (w.local_status != WcStatus::kSuccess) return false;  // waits for the completer
  if (requester_waits_for_rd_atomic(qp, w)) return false;
  if (!requester_check_local_sges(c, qp, w)) {
    w.local_status = WcStatus::kLocProtErr;
    completer_check_front(c, qp);
    return false;
  }
  w.started = true;
  w.first_psn = r.next_new_psn;
  w.npkts = w.is_atomic() ? 1 : packets_for(w.length, qp.mtu());
  if (w.opcode == WrOpcode::kRdmaRead) w.read_piece = read_piece(c, qp);
  r.next_new_psn = psn_add(r.next_new_psn, w.npkts);
  r.cursor_pkt = 0;
  r.next_psn = w.first_psn;
  return true;
}

// Sends the next request packet(s) of a started WQE: a READ piece, an atomic, or one
// SEND / WRITE packet. False when the window or budget holds it, or a gather failed.
bool send_request(Core& c, Qp& qp, SendWqe& w, uint32_t in_flight) {
  RequesterState& r = qp.req;
  if (w.opcode == WrOpcode::kRdmaRead) {
    // Each piece takes a responder resource of its own.
    if (outstanding_rd_atomic(qp) >= rd_atomic_limit(qp)) return false;
    // Up to the end of the piece: a resend inside a piece asks for the rest of that piece
    // only, as the responder's ACK queue entry covers the piece and a duplicate must be a
    // subset of it.
    const uint32_t n = std::min(w.npkts, (r.cursor_pkt / w.read_piece + 1) * w.read_piece) -
                       r.cursor_pkt;
    if (in_flight != 0 && in_flight + n > send_window(c, qp)) return false;
    if (!budget_allows(c, qp, in_flight, n)) return false;
    send_read_request(c, qp, w, r.cursor_pkt, n);
    r.cursor_pkt += n;
  } else if (w.is_atomic()) {
    send_atomic(c, qp, w);
    r.cursor_pkt = 1;
  } else if (w.opcode == WrOpcode::kAtomicWrite) {
    send_atomic_write(c, qp, w);
    r.cursor_pkt = 1;
  } else {
    const bool stop_after = in_flight + 1 >= send_window(c, qp) ||
                            cc_window_holds(qp, in_flight + cc_ack_interval(c, qp)) ||
                            c.inflight - r.counted_inflight + in_flight + 2 > kDeviceWindow ||
                            cc_acks_every_packet(qp, qp.mtu(), ack_timeout_ns(qp.attr.timeout));
    if (!send_data_packet(c, qp, w, r.cursor_pkt, stop_after)) {
      completer_check_front(c, qp);
      return false;
    }
    ++r.cursor_pkt;
  }
  r.next_psn = psn_add(w.first_psn, r.cursor_pkt);
  return true;
}

// SQD with the drained event asked for: raised once nothing is outstanding (11.6.3.1).
void notify_drained(Core& c, Qp& qp) {
  const RequesterState& r = qp.req;
  if (qp.state() != QpState::kSqd || !qp.sq_drain_notify) return;
  if (r.una == r.next_new_psn && (r.cursor >= qp.sq.size() || !qp.sq[r.cursor].started)) {
    qp.sq_drain_notify = false;
    c.async_event(AsyncEventType::kSqDrained, qp.user_context);
  }
}

}  // namespace

uint32_t send_window(const Core& c, const Qp& qp) {
  const uint32_t w = c.config.send_window_bytes / qp.mtu();
  return std::clamp(w, kMinSendWindow, kMaxSendWindow);
}

uint32_t read_piece(const Core& c, const Qp& qp) {
  const uint32_t window = send_window(c, qp);
  return rd_atomic_limit(qp) > 1 ? window / 2 : window;
}

// Go-Back-N: from the cursor, each WQE is started (PSNs assigned) and its packets sent while
// the window (send_window), the device budget, fences and the rd/atomic limit allow.
void requester_progress(Core& c, Qp& qp) {
  if (!is_reliable(qp.type)) return unreliable_progress(c, qp);  // ud.cc
  RequesterState& r = qp.req;
  c.recount_inflight(qp);  // acknowledgements or a Go-Back-N may have moved una / next_psn
  if (!qp.sending() || r.rnr_deadline != 0) return;
  while (r.cursor < qp.sq.size()) {
    SendWqe& w = qp.sq[r.cursor];
    if (c.config.direct != nullptr && requester_direct_step(c, qp, w) == DirectStep::kAgain)
      continue;  // direct mode (requester_direct.cc): a copy submitted, or held ones performed
    if (w.is_local()) {
      if (!run_local_wqe(c, qp, w)) break;
      continue;
    }
    if (!w.started && qp.state() == QpState::kSqd) break;  // SQD starts no new WQE
    const uint32_t in_flight = static_cast<uint32_t>(psn_diff(r.next_psn, r.una));
    if (in_flight >= send_window(c, qp) || !budget_allows(c, qp, in_flight, 1)) break;
    // The controller's window (congestion.h), unless no packet in flight asked for an ACK:
    // one that shrank under them would wait for the ACK timer. One more packet, asking.
    if (cc_window_holds(qp, in_flight) && asked_in_flight(r)) break;
    if (cc_pacer_holds(c, qp)) break;  // DCQCN's rate (congestion.h): a timer wakes the QP
    if (!w.started && !start_wqe(c, qp, w)) break;
    if (!send_request(c, qp, w, in_flight)) break;
    if (r.cursor_pkt >= w.npkts) {
      ++r.cursor;
      r.cursor_pkt = 0;
    }
    c.recount_inflight(qp);
  }
  c.recount_inflight(qp);
  notify_drained(c, qp);
}

}  // namespace vrnic::engine
