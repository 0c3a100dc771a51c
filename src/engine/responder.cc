// Responder: PSN checking, placement with the memory check before any byte moves, READ and
// atomic execution through the ACK queue, ACK coalescing and NAK generation.
#include "engine/responder.h"

#include <cerrno>

#include <cstring>

#include "engine/mw.h"
#include "engine/srq.h"
#include "wire/opcode.h"
#include "wire/psn.h"

namespace vrnic::engine {

using wire::psn_add;
using wire::psn_diff;

namespace {

enum NakCode : uint8_t { kNakPsnSeq = 0, kNakInvRequest = 1, kNakRemAccess = 2, kNakRemOp = 3 };

uint32_t packets_for(uint64_t length, uint32_t mtu) {
  return length == 0 ? 1 : static_cast<uint32_t>((length + mtu - 1) / mtu);
}

void send_ack(Core& c, Qp& qp, uint32_t psn, uint8_t syndrome) {
  wire::Packet p;
  p.bth.opcode = wire::kRcAck;
  p.bth.dest_qp = qp.attr.dest_qp_num;
  p.bth.psn = psn;
  p.aeth.syndrome = syndrome;
  p.aeth.msn = qp.resp.msn;
  c.start_packet(qp, p, 0);
  c.commit_packet();
  uint8_t type = syndrome >> 5, code = syndrome & 0x1f;
  if (type == 0) ++c.ctr.tx_ack;
  else if (type == 1) ++c.ctr.tx_nak_rnr;
  else if (code == kNakPsnSeq) ++c.ctr.tx_nak_psn_seq;
  else if (code == kNakInvRequest) ++c.ctr.tx_nak_inv_req;
  else if (code == kNakRemAccess) ++c.ctr.tx_nak_rem_access;
  else ++c.ctr.tx_nak_rem_op;
}

void queue_ack(Core& c, Qp& qp) {
  ++c.acks_queued;
  if (qp.resp.ack_pending) return;
  qp.resp.ack_pending = true;
  c.ack_pending.push_back(&qp);
}

void complete_recv(Core& c, Qp& qp, const RecvWqe& r, WcStatus st, WcOpcode op,
                   uint32_t byte_len, uint32_t flags, uint32_t imm, bool solicited) {
  WorkCompletion wc;
  wc.wr_id = r.wr_id;
  wc.status = st;
  wc.opcode = op;
  wc.byte_len = byte_len;
  wc.wc_flags = flags;
  wc.imm_data = imm;
  wc.qp_num = qp.qpn;
  wc.src_qp = qp.attr.dest_qp_num;
  wc.sl = qp.attr.ah.sl;
  c.complete(qp.recv_cq, wc, solicited);
}

// A request the responder cannot carry out: NAK it and move the QP to ERR (9.9.3.1.2,
// class B/C responder errors). recv_status completes a receive WQE in use, if any.
void fail(Core& c, Qp& qp, uint32_t psn, uint8_t code, AsyncEventType ev,
          WcStatus recv_status = WcStatus::kSuccess) {
  responder_flush_ack(c, qp);
  send_ack(c, qp, psn, aeth_nak(code));
  ResponderState& s = qp.resp;
  if (s.have_recv && recv_status != WcStatus::kSuccess) {
    complete_recv(c, qp, s.recv, recv_status, WcOpcode::kRecv, 0, 0, 0, false);
    s.have_recv = false;
  }
  c.enter_error(qp);
  c.async_event(ev, qp.user_context);
}

void access_error(Core& c, Qp& qp, uint32_t psn) {
  ++c.ctr.rx_access_errors;
  fail(c, qp, psn, kNakRemAccess, AsyncEventType::kQpAccessErr);
}

void invalid_request(Core& c, Qp& qp, uint32_t psn) {
  fail(c, qp, psn, kNakInvRequest, AsyncEventType::kQpReqErr);
}

void accept(Core& c, Qp& qp, const wire::Packet& p, uint32_t span) {
  ResponderState& s = qp.resp;
  s.epsn = psn_add(s.epsn, span);
  s.nak_sent = false;
  if (p.bth.ack_req) queue_ack(c, qp);
}

void rnr_nak(Core& c, Qp& qp, uint32_t psn) {
  responder_flush_ack(c, qp);
  send_ack(c, qp, psn, aeth_rnr_nak(qp.attr.min_rnr_timer));
  // Later packets of the same window arrive out of sequence; they get no PSN NAK on top.
  qp.resp.nak_sent = true;
}

void on_send(Core& c, Qp& qp, const wire::Packet& p) {
  ResponderState& s = qp.resp;
  const wire::OpcodeInfo& info = wire::opcode_info(p.bth.opcode);
  uint32_t mtu = qp.mtu();
  size_t n = p.payload.size();
  // Opcode sequence (class C, IBA 9.9.3.1): FIRST/ONLY between messages, MIDDLE/LAST in one.
  if (info.first() ? s.op != ResponderState::Op::kNone : s.op != ResponderState::Op::kSend)
    return invalid_request(c, qp, p.bth.psn);
  if (n > mtu || (!info.last() && n != mtu)) return invalid_request(c, qp, p.bth.psn);  // C9-92
  if (info.first()) {
    if (!responder_take_recv(c, qp)) return rnr_nak(c, qp, p.bth.psn);  // 9.7.5.2.8
    s.op = ResponderState::Op::kSend;
    s.placed = 0;
  }
  if (s.placed + n > s.recv.length) {
    // A message longer than the receive buffer: class C, Invalid Request NAK (IBA 9.9.3.1).
    return fail(c, qp, p.bth.psn, kNakInvRequest, AsyncEventType::kQpReqErr,
                WcStatus::kLocLenErr);
  }
  if (!c.scatter(responder_recv_pd(qp), s.recv.sges, s.placed, p.payload.data(), n))
    return fail(c, qp, p.bth.psn, kNakRemOp, AsyncEventType::kQpFatal, WcStatus::kLocProtErr);
  s.placed += n;
  accept(c, qp, p, 1);
  if (info.last()) {
    uint32_t flags = 0, imm = 0;
    if (info.has(wire::kHasImm)) { flags = kWcWithImm; imm = p.imm; }
    if (info.has(wire::kHasIeth)) {
      flags = kWcWithInv;
      imm = p.ieth_rkey;
      if (!mw_remote_invalidate(c, qp, p.ieth_rkey)) {
        // An rkey this QP may not invalidate (class J, IBA 9.9.3.1): the message is received
        // and acknowledged, its receive completes in error and the QP goes to ERR.
        complete_recv(c, qp, s.recv, WcStatus::kRemInvReqErr, WcOpcode::kRecv,
                      static_cast<uint32_t>(s.placed), flags, imm, false);
        s.have_recv = false;
        s.op = ResponderState::Op::kNone;
        s.msn = psn_add(s.msn, 1);
        responder_flush_ack(c, qp);
        c.enter_error(qp);
        return;
      }
    }
    complete_recv(c, qp, s.recv, WcStatus::kSuccess, WcOpcode::kRecv,
                  static_cast<uint32_t>(s.placed), flags, imm, p.bth.solicited);
    s.have_recv = false;
    s.op = ResponderState::Op::kNone;
    s.msn = psn_add(s.msn, 1);
  }
}

void on_write(Core& c, Qp& qp, const wire::Packet& p) {
  ResponderState& s = qp.resp;
  const wire::OpcodeInfo& info = wire::opcode_info(p.bth.opcode);
  uint32_t mtu = qp.mtu();
  uint64_t n = p.payload.size();
  uint32_t psn = p.bth.psn;
  if (info.first()) {
    if (s.op != ResponderState::Op::kNone) return invalid_request(c, qp, psn);
    if (!(qp.attr.qp_access_flags & kRemoteWrite)) return access_error(c, qp, psn);
    uint64_t len = p.reth.dma_len;
    // The whole target range is checked once, before the first byte (IBA 9.7.4.1);
    // a zero-length WRITE checks no R_Key (C9-88).
    if (len != 0 && c.mem.check_remote(p.reth.rkey, qp.pd, qp.qpn, p.reth.va, len, kRemoteWrite) == nullptr)
      return access_error(c, qp, psn);
    s.write_va = p.reth.va;
    s.write_rkey = p.reth.rkey;
    s.write_left = len;
    s.write_total = len;
  } else if (s.op != ResponderState::Op::kWrite) {
    return invalid_request(c, qp, psn);
  }
  // Payload size rules (C9-92): FIRST / MIDDLE carry one MTU; nothing beyond the DMA length.
  if (n > mtu || n > s.write_left || (!info.last() && n != mtu) ||
      (info.last() && n != s.write_left))
    return invalid_request(c, qp, psn);
  bool imm = info.has(wire::kHasImm);
  if (imm && !responder_take_recv(c, qp)) return rnr_nak(c, qp, psn);  // before any byte of this packet
  if (n != 0) {
    uint8_t* dst = c.mem.check_remote(s.write_rkey, qp.pd, qp.qpn, s.write_va, n, kRemoteWrite);
    if (dst == nullptr) return access_error(c, qp, psn);  // MR gone mid-message
    std::memcpy(dst, p.payload.data(), n);
  }
  s.write_va += n;
  s.write_left -= n;
  s.op = info.last() ? ResponderState::Op::kNone : ResponderState::Op::kWrite;
  accept(c, qp, p, 1);
  if (info.last()) {
    if (imm) {
      complete_recv(c, qp, s.recv, WcStatus::kSuccess, WcOpcode::kRecvRdmaWithImm,
                    static_cast<uint32_t>(s.write_total), kWcWithImm, p.imm, p.bth.solicited);
      s.have_recv = false;
    }
    s.msn = psn_add(s.msn, 1);
  }
}

// Sends READ response packets [k0, k0 + count) of a READ of `len` bytes at va whose first
// response PSN is psn0.
bool send_read_responses(Core& c, Qp& qp, uint32_t psn0, uint64_t va, uint32_t rkey,
                         uint64_t len) {
  uint32_t mtu = qp.mtu();
  uint32_t n = packets_for(len, mtu);
  for (uint32_t k = 0; k < n; ++k) {
    uint64_t off = uint64_t{k} * mtu;
    uint64_t sz = len - off < mtu ? len - off : mtu;
    if (len == 0) sz = 0;
    const uint8_t* src = nullptr;
    if (sz != 0) {
      src = c.mem.check_remote(rkey, qp.pd, qp.qpn, va + off, sz, kRemoteRead);
      if (src == nullptr) return false;
    }
    wire::Packet p;
    p.bth.opcode = n == 1 ? wire::kRcReadResponseOnly
                   : k == 0 ? wire::kRcReadResponseFirst
                   : k + 1 == n ? wire::kRcReadResponseLast
                   : wire::kRcReadResponseMiddle;
    p.bth.dest_qp = qp.attr.dest_qp_num;
    p.bth.psn = psn_add(psn0, k);
    p.aeth.syndrome = kAethAckNoCredit;
    p.aeth.msn = qp.resp.msn;
    std::span<uint8_t> out = c.start_packet(qp, p, sz);
    if (sz != 0) std::memcpy(out.data(), src, sz);
    c.commit_packet();
  }
  return true;
}

void on_read(Core& c, Qp& qp, const wire::Packet& p) {
  ResponderState& s = qp.resp;
  uint32_t psn = p.bth.psn;
  if (s.op != ResponderState::Op::kNone) return invalid_request(c, qp, psn);
  if (!(qp.attr.qp_access_flags & kRemoteRead)) return access_error(c, qp, psn);
  uint64_t len = p.reth.dma_len;
  if (len > (uint64_t{1} << 31)) return invalid_request(c, qp, psn);  // C9-94
  // C9-88: a zero-length READ checks no R_Key.
  if (len != 0 && c.mem.check_remote(p.reth.rkey, qp.pd, qp.qpn, p.reth.va, len, kRemoteRead) == nullptr)
    return access_error(c, qp, psn);
  uint32_t span = packets_for(len, qp.mtu());
  AckEntry e;
  e.kind = AckEntry::Kind::kRead;
  e.psn = psn;
  e.span = span;
  e.va = p.reth.va;
  e.rkey = p.reth.rkey;
  e.length = static_cast<uint32_t>(len);
  // The earlier requests' coalesced ACK goes first, naming their last PSN (not this one's).
  responder_flush_ack(c, qp);
  s.ack_queue.push(e);
  s.msn = psn_add(s.msn, 1);  // C9-148: a READ counts as a message once accepted
  s.epsn = psn_add(s.epsn, span);  // the responses themselves acknowledge the request
  s.nak_sent = false;
  send_read_responses(c, qp, psn, p.reth.va, p.reth.rkey, len);
}

void on_atomic(Core& c, Qp& qp, const wire::Packet& p) {
  ResponderState& s = qp.resp;
  uint32_t psn = p.bth.psn;
  if (s.op != ResponderState::Op::kNone) return invalid_request(c, qp, psn);
  if (!(qp.attr.qp_access_flags & kRemoteAtomic)) return access_error(c, qp, psn);
  // An atomic on a VA that is not 8-byte aligned: class C, Invalid Request (IBA 9.9.3.1).
  if (p.atomic.va & 7) return invalid_request(c, qp, psn);
  uint8_t* host = c.mem.check_remote(p.atomic.rkey, qp.pd, qp.qpn, p.atomic.va, 8, kRemoteAtomic);
  if (host == nullptr) return access_error(c, qp, psn);
  if (reinterpret_cast<uintptr_t>(host) & 7) return invalid_request(c, qp, psn);
  auto* word = reinterpret_cast<uint64_t*>(host);
  uint64_t orig;
  if (p.bth.opcode == wire::kRcCompareSwap) {
    orig = p.atomic.compare;
    // On failure `orig` receives the current value; on success it already holds it.
    __atomic_compare_exchange_n(word, &orig, p.atomic.swap_add, false, __ATOMIC_SEQ_CST,
                                __ATOMIC_SEQ_CST);
  } else {
    orig = __atomic_fetch_add(word, p.atomic.swap_add, __ATOMIC_SEQ_CST);
  }
  AckEntry e;
  e.kind = AckEntry::Kind::kAtomic;
  e.psn = psn;
  e.span = 1;
  e.va = p.atomic.va;
  e.rkey = p.atomic.rkey;
  e.length = 8;
  e.orig = orig;
  e.atomic_executed = true;
  responder_flush_ack(c, qp);  // the earlier requests' ACK first, as for a READ
  s.ack_queue.push(e);
  s.msn = psn_add(s.msn, 1);
  s.epsn = psn_add(s.epsn, 1);
  s.nak_sent = false;
  wire::Packet a;
  a.bth.opcode = wire::kRcAtomicAck;
  a.bth.dest_qp = qp.attr.dest_qp_num;
  a.bth.psn = psn;
  a.aeth.syndrome = kAethAckNoCredit;
  a.aeth.msn = s.msn;
  a.atomic_ack.orig = orig;
  c.start_packet(qp, a, 0);
  c.commit_packet();
}

// The zero-length READ response Only that answers an ATOMIC WRITE (IBA A19.4.2), at its PSN.
void send_atomic_write_response(Core& c, Qp& qp, uint32_t psn) {
  wire::Packet a;
  a.bth.opcode = wire::kRcReadResponseOnly;
  a.bth.dest_qp = qp.attr.dest_qp_num;
  a.bth.psn = psn;
  a.aeth.syndrome = kAethAckNoCredit;
  a.aeth.msn = qp.resp.msn;
  c.start_packet(qp, a, 0);
  c.commit_packet();
}

// ATOMIC WRITE (IBA 1.5 Annex A19; rxe_resp.c): 8 bytes stored as one atomic access, after
// everything before it (a release store). The checks, in rxe's order: the QP's remote write
// right, the length (RETH and payload exactly 8: oA19-28, else Invalid Request), the R_Key
// and range (remote write access: Remote Access Error), then 8-byte alignment (A19.4.2:
// Invalid Request).
void on_atomic_write(Core& c, Qp& qp, const wire::Packet& p) {
  ResponderState& s = qp.resp;
  const uint32_t psn = p.bth.psn;
  if (s.op != ResponderState::Op::kNone) return invalid_request(c, qp, psn);
  if (!(qp.attr.qp_access_flags & kRemoteWrite)) return access_error(c, qp, psn);
  if (p.reth.dma_len != 8 || p.payload.size() != 8) return invalid_request(c, qp, psn);
  uint8_t* host = c.mem.check_remote(p.reth.rkey, qp.pd, qp.qpn, p.reth.va, 8, kRemoteWrite);
  if (host == nullptr) return access_error(c, qp, psn);
  if ((p.reth.va & 7) || (reinterpret_cast<uintptr_t>(host) & 7))
    return invalid_request(c, qp, psn);
  uint64_t value;
  std::memcpy(&value, p.payload.data(), 8);
  __atomic_store_n(reinterpret_cast<uint64_t*>(host), value, __ATOMIC_RELEASE);
  responder_flush_ack(c, qp);  // the earlier requests' ACK first, as for a READ
  AckEntry e;
  e.kind = AckEntry::Kind::kAtomicWrite;
  e.psn = psn;
  e.span = 1;
  e.va = p.reth.va;
  e.rkey = p.reth.rkey;
  e.length = 8;
  s.ack_queue.push(e);
  s.msn = psn_add(s.msn, 1);
  s.epsn = psn_add(s.epsn, 1);
  s.nak_sent = false;
  send_atomic_write_response(c, qp, psn);
}

// A request with PSN before the expected one (9.7.5.1.2 / C9-105..110).
void on_duplicate(Core& c, Qp& qp, const wire::Packet& p) {
  ResponderState& s = qp.resp;
  ++c.ctr.rx_duplicate;
  const wire::OpcodeInfo& info = wire::opcode_info(p.bth.opcode);
  switch (info.kind) {
    case wire::OpKind::kSend:
    case wire::OpKind::kWrite:
      // Already placed: acknowledge again, never place again (C9-105).
      queue_ack(c, qp);
      return;
    case wire::OpKind::kReadRequest: {
      AckEntry* e = s.ack_queue.find(p.bth.psn);
      if (e == nullptr || e->kind != AckEntry::Kind::kRead) return;  // too old: dropped
      // A retransmitted READ may ask for the tail of the original (from a middle PSN).
      uint64_t off = uint64_t(psn_diff(p.bth.psn, e->psn)) * qp.mtu();
      uint64_t len = p.reth.dma_len;
      if (p.reth.rkey != e->rkey || p.reth.va != e->va + off || off + len > e->length)
        return;
      responder_flush_ack(c, qp);
      if (send_read_responses(c, qp, p.bth.psn, p.reth.va, p.reth.rkey, len))
        ++c.ctr.duplicate_reads_replayed;
      return;
    }
    case wire::OpKind::kCompareSwap:
    case wire::OpKind::kFetchAdd: {
      AckEntry* e = s.ack_queue.find(p.bth.psn);
      if (e == nullptr || e->kind != AckEntry::Kind::kAtomic || e->psn != p.bth.psn) return;
      // At most once (IBA 9.7.5.1.2): the saved original value is returned, nothing re-executed.
      responder_flush_ack(c, qp);
      wire::Packet a;
      a.bth.opcode = wire::kRcAtomicAck;
      a.bth.dest_qp = qp.attr.dest_qp_num;
      a.bth.psn = e->psn;
      a.aeth.syndrome = kAethAckNoCredit;
      a.aeth.msn = s.msn;
      a.atomic_ack.orig = e->orig;
      c.start_packet(qp, a, 0);
      c.commit_packet();
      ++c.ctr.duplicate_atomics_replayed;
      return;
    }
    case wire::OpKind::kAtomicWrite: {
      // Written once: a duplicate gets the response again (A19.4.2, as rxe's replay).
      AckEntry* e = s.ack_queue.find(p.bth.psn);
      if (e == nullptr || e->kind != AckEntry::Kind::kAtomicWrite || e->psn != p.bth.psn) return;
      responder_flush_ack(c, qp);
      send_atomic_write_response(c, qp, e->psn);
      ++c.ctr.duplicate_atomics_replayed;
      return;
    }
    default:
      return;
  }
}

}  // namespace

// Fetches the receive WQE the next message consumes: from the QP's SRQ or its own queue.
bool responder_take_recv(Core& c, Qp& qp) {
  ResponderState& s = qp.resp;
  if (s.have_recv) return true;
  if (qp.srq != nullptr) {
    if (!srq_take(c, *qp.srq, s.recv)) return false;
  } else {
    if (qp.rq.empty()) return false;
    s.recv = std::move(qp.rq.front());
    qp.rq.pop_front();
  }
  s.have_recv = true;
  return true;
}

// The receive WQE's SGEs belong to the PD of the queue they were posted to.
const Pd* responder_recv_pd(const Qp& qp) { return qp.srq != nullptr ? qp.srq->pd : qp.pd; }


void responder_flush_ack(Core& c, Qp& qp) {
  if (!qp.resp.ack_pending) return;
  qp.resp.ack_pending = false;
  if (qp.state() == QpState::kErr || qp.state() == QpState::kReset) return;
  send_ack(c, qp, psn_add(qp.resp.epsn, -1), kAethAckNoCredit);
}

void responder_receive(Core& c, Qp& qp, const wire::Packet& p) {
  ResponderState& s = qp.resp;
  int32_t d = psn_diff(p.bth.psn, s.epsn);
  if (qp.type == QpType::kXrcTgt && d <= 0 && !xrc_bind_srq(c, qp, p.xrc_srqn)) {
    // No such XRC SRQ, or one of another XRC domain: class C, Invalid Request NAK (IBA
    // 9.9.3.1), counted in tx_nak_inv_req. A duplicate naming none is dropped.
    if (d == 0) invalid_request(c, qp, p.bth.psn);
    return;
  }
  if (d > 0) {
    // A gap: NAK once with the expected PSN, then stay silent until it arrives (IBA 9.7.5.2.2).
    ++c.ctr.rx_out_of_sequence;
    if (!s.nak_sent) {
      responder_flush_ack(c, qp);
      send_ack(c, qp, s.epsn, aeth_nak(kNakPsnSeq));
      s.nak_sent = true;
    }
    return;
  }
  if (d < 0) return on_duplicate(c, qp, p);
  switch (wire::opcode_info(p.bth.opcode).kind) {
    case wire::OpKind::kSend: return on_send(c, qp, p);
    case wire::OpKind::kWrite: return on_write(c, qp, p);
    case wire::OpKind::kReadRequest: return on_read(c, qp, p);
    case wire::OpKind::kCompareSwap:
    case wire::OpKind::kFetchAdd: return on_atomic(c, qp, p);
    case wire::OpKind::kAtomicWrite: return on_atomic_write(c, qp, p);
    default: return;
  }
}

Errno responder_post_recv(Core& c, Qp& qp, const RecvWr& wr) {
  if (qp.state() == QpState::kReset) return EINVAL;  // C10-97.2.1
  if (wr.num_sge > qp.cap.max_recv_sge) return EINVAL;
  if (wr.num_sge > 0 && wr.sg_list == nullptr) return EINVAL;
  if (qp.rq.size() >= qp.cap.max_recv_wr) return ENOMEM;
  RecvWqe r;
  r.wr_id = wr.wr_id;
  r.sges.assign(wr.sg_list, wr.sg_list + wr.num_sge);
  for (const Sge& sg : r.sges) r.length += sg.length;
  qp.rq.push_back(std::move(r));
  if (qp.state() == QpState::kErr) c.flush_queues(qp);  // WRs posted in ERR flush (IBA 11.4.1.2)
  return 0;
}

}  // namespace vrnic::engine
