// Responder of RC, XRC and UC: PSN checking, placement with the memory check before any byte
// moves, READ and atomic execution through the ACK queue, ACK coalescing and NAK generation.
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

using wire::aeth_nak;
using wire::kAethAckNoCredit;
using wire::kNakInvRequest;
using wire::kNakPsnSeq;
using wire::kNakRemAccess;
using wire::kNakRemOp;

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
  const wire::AethType type = wire::aeth_type(syndrome);
  const uint8_t code = wire::aeth_value(syndrome);
  if (type == wire::AethType::kAck) ++c.ctr.tx_ack;
  else if (type == wire::AethType::kRnrNak) ++c.ctr.tx_nak_rnr;
  else if (code == kNakPsnSeq) ++c.ctr.tx_nak_psn_seq;
  else if (code == kNakInvRequest) ++c.ctr.tx_nak_inv_req;
  else if (code == kNakRemAccess) ++c.ctr.tx_nak_rem_access;
  else ++c.ctr.tx_nak_rem_op;
}

// `seen`: the message makes a receive completion (the program is told of it and may answer).
void queue_ack(Core& c, Qp& qp, bool seen) {
  ++c.acks_queued;
  ResponderState& s = qp.resp;
  if (s.ack_pending) {
    s.ack_unseen = s.ack_unseen && !seen;
    return;
  }
  s.ack_pending = true;
  s.ack_unseen = !seen;
  s.ack_duplicate = false;
  c.ack_pending.push_back(&qp);
}

// RC and XRC acknowledge, NAK and retransmit; UC does none of it (IBA 9.8): a UC request
// the responder cannot take drops its message, counted, and the QP waits for the next FIRST
// or ONLY (IBA 9.9.3.1: UC responder errors are silent); a PSN gap resynchronises.
bool reliable(const Qp& qp) { return qp.type != QpType::kUc; }

// A receive completion of a connected QP (its peer's QPN, the path's SL).
WorkCompletion recv_wc(const Qp& qp, WcStatus st, WcOpcode op, uint64_t byte_len = 0,
                       uint32_t flags = 0, uint32_t imm = 0) {
  WorkCompletion wc;
  wc.status = st;
  wc.opcode = op;
  wc.byte_len = static_cast<uint32_t>(byte_len);
  wc.wc_flags = flags;
  wc.imm_data = imm;
  wc.src_qp = qp.attr.dest_qp_num;
  wc.sl = qp.attr.ah.sl;
  return wc;
}

// UC: the message in progress is dropped; `count` (if any) says why.
void drop_message(Core& c, Qp& qp, uint64_t Counters::*count) {
  if (count != nullptr) ++(c.ctr.*count);
  qp.resp.op = ResponderState::Op::kNone;
}

// A request the responder cannot carry out. RC: NAK it and move the QP to ERR (9.9.3.1.2,
// class B/C responder errors), with the affiliated async event. UC: dropped, counted in
// uc_count.
void request_error(Core& c, Qp& qp, uint32_t psn, uint8_t code, AsyncEventType ev,
                   uint64_t Counters::*uc_count) {
  if (!reliable(qp)) return drop_message(c, qp, uc_count);
  responder_flush_ack(c, qp);
  send_ack(c, qp, psn, aeth_nak(code));
  c.enter_error(qp);
  c.async_event(ev, qp.user_context);
}

// The receive WQE in use cannot take the message (too long, a local protection error): it
// completes in error, which moves the QP to ERR; RC also NAKs (class C / B, IBA 9.9.3.1).
void receive_error(Core& c, Qp& qp, uint32_t psn, uint8_t code, AsyncEventType ev,
                   WcStatus status) {
  if (reliable(qp)) {
    responder_flush_ack(c, qp);
    send_ack(c, qp, psn, aeth_nak(code));
  }
  responder_complete_recv(c, qp, recv_wc(qp, status, WcOpcode::kRecv), false);
  if (reliable(qp)) c.async_event(ev, qp.user_context);
}

void access_error(Core& c, Qp& qp, uint32_t psn) {
  ++c.ctr.rx_access_errors;
  request_error(c, qp, psn, kNakRemAccess, AsyncEventType::kQpAccessErr, nullptr);
}

void invalid_request(Core& c, Qp& qp, uint32_t psn,
                     uint64_t Counters::*uc_count = &Counters::rx_malformed) {
  request_error(c, qp, psn, kNakInvRequest, AsyncEventType::kQpReqErr, uc_count);
}

// A MIDDLE / LAST without a message in progress, or of another kind than the one in progress
// (class C on RC; on UC the rest of a dropped message, or a stray packet).
void out_of_order(Core& c, Qp& qp, uint32_t psn) {
  invalid_request(c, qp, psn, &Counters::rx_uc_dropped);
}

// A FIRST or ONLY: on RC none may come inside a message (class C); on UC it ends the one in
// progress, whose LAST was lost. False if it was refused.
bool begin_message(Core& c, Qp& qp, uint32_t psn) {
  if (qp.resp.op == ResponderState::Op::kNone) return true;
  if (!reliable(qp)) return drop_message(c, qp, nullptr), true;
  invalid_request(c, qp, psn);
  return false;
}

void rnr_nak(Core& c, Qp& qp, uint32_t psn) {
  responder_flush_ack(c, qp);
  send_ack(c, qp, psn, wire::aeth_rnr_nak(qp.attr.min_rnr_timer));
  // Later packets of the same window arrive out of sequence; they get no PSN NAK on top.
  qp.resp.nak_sent = true;
}

// No receive WQE for a message that needs one: RC answers RNR NAK (9.7.5.2.8), UC has none
// and drops the message.
void no_receive(Core& c, Qp& qp, uint32_t psn) {
  if (reliable(qp)) return rnr_nak(c, qp, psn);
  drop_message(c, qp, &Counters::rx_dropped_no_recv);
}

// A request packet taken: RC's expected PSN moves on (UC's moved when it came) and an ACK is
// coalesced if the requester asked for one.
void accept(Core& c, Qp& qp, const wire::Packet& p, uint32_t span) {
  if (!reliable(qp)) return;
  ResponderState& s = qp.resp;
  s.epsn = psn_add(s.epsn, span);
  s.nak_sent = false;
  const wire::OpcodeInfo& info = wire::opcode_info(p.bth.opcode);
  const bool seen = info.kind == wire::OpKind::kSend || info.has(wire::kHasImm);
  s.unseen_at_ns = seen ? 0 : c.now();
  if (p.bth.ack_req) queue_ack(c, qp, seen);
}

// A SEND WITH INVALIDATE's rkey this QP may not invalidate (class J, IBA 9.9.3.1): the
// message is received and acknowledged, its receive completes in error and the QP goes to
// ERR.
void refuse_invalidate(Core& c, Qp& qp, uint64_t placed, uint32_t rkey) {
  ResponderState& s = qp.resp;
  s.op = ResponderState::Op::kNone;
  s.msn = psn_add(s.msn, 1);
  responder_flush_ack(c, qp);
  responder_complete_recv(
      c, qp, recv_wc(qp, WcStatus::kRemInvReqErr, WcOpcode::kRecv, placed, kWcWithInv, rkey),
      false);
}

void on_send(Core& c, Qp& qp, const wire::Packet& p) {
  ResponderState& s = qp.resp;
  const wire::OpcodeInfo& info = wire::opcode_info(p.bth.opcode);
  const uint32_t psn = p.bth.psn;
  size_t n = p.payload.size();
  // Opcode sequence (class C, IBA 9.9.3.1): FIRST/ONLY between messages, MIDDLE/LAST in one.
  if (info.first()) {
    if (!begin_message(c, qp, psn)) return;
  } else if (s.op != ResponderState::Op::kSend) {
    return out_of_order(c, qp, psn);
  }
  if (n > qp.mtu() || (!info.last() && n != qp.mtu())) return invalid_request(c, qp, psn);  // C9-92
  if (info.first()) {
    if (!responder_take_recv(c, qp)) return no_receive(c, qp, psn);
    s.op = ResponderState::Op::kSend;
    s.placed = 0;
  }
  // A message longer than the receive buffer: class C, Invalid Request NAK (IBA 9.9.3.1).
  if (s.placed + n > s.recv.length)
    return receive_error(c, qp, psn, kNakInvRequest, AsyncEventType::kQpReqErr, WcStatus::kLocLenErr);
  if (!c.scatter(responder_recv_pd(qp), s.recv.sges, s.placed, p.payload.data(), n))
    return receive_error(c, qp, psn, kNakRemOp, AsyncEventType::kQpFatal, WcStatus::kLocProtErr);
  s.placed += n;
  accept(c, qp, p, 1);
  if (!info.last()) return;
  uint32_t flags = 0, imm = 0;
  if (info.has(wire::kHasImm)) { flags = kWcWithImm; imm = p.imm; }
  if (info.has(wire::kHasIeth)) {
    flags = kWcWithInv;
    imm = p.ieth_rkey;
    if (!mw_remote_invalidate(c, qp, p.ieth_rkey)) return refuse_invalidate(c, qp, s.placed, imm);
  }
  s.op = ResponderState::Op::kNone;
  s.msn = psn_add(s.msn, 1);
  responder_complete_recv(c, qp, recv_wc(qp, WcStatus::kSuccess, WcOpcode::kRecv, s.placed, flags, imm),
                          p.bth.solicited);
}

// The first packet of an RDMA WRITE: the QP's right, and the whole target range checked once,
// before the first byte (IBA 9.7.4.1); a zero-length WRITE checks no R_Key (C9-88).
bool begin_write(Core& c, Qp& qp, const wire::Packet& p) {
  ResponderState& s = qp.resp;
  const uint64_t len = p.reth.dma_len;
  if (!(qp.attr.qp_access_flags & kRemoteWrite) ||
      (len != 0 && c.mem.check_remote(p.reth.rkey, qp.pd, qp.qpn, p.reth.va, len, kRemoteWrite) == nullptr)) {
    access_error(c, qp, p.bth.psn);
    return false;
  }
  s.write_va = p.reth.va;
  s.write_rkey = p.reth.rkey;
  s.write_left = len;
  s.write_total = len;
  return true;
}

void on_write(Core& c, Qp& qp, const wire::Packet& p) {
  ResponderState& s = qp.resp;
  const wire::OpcodeInfo& info = wire::opcode_info(p.bth.opcode);
  uint32_t mtu = qp.mtu();
  uint64_t n = p.payload.size();
  uint32_t psn = p.bth.psn;
  if (info.first()) {
    if (!begin_message(c, qp, psn) || !begin_write(c, qp, p)) return;
  } else if (s.op != ResponderState::Op::kWrite) {
    return out_of_order(c, qp, psn);
  }
  // Payload size rules (C9-92): FIRST / MIDDLE carry one MTU; nothing beyond the DMA length.
  if (n > mtu || n > s.write_left || (!info.last() && n != mtu) ||
      (info.last() && n != s.write_left))
    return invalid_request(c, qp, psn);
  bool imm = info.has(wire::kHasImm);
  if (imm && !responder_take_recv(c, qp)) return no_receive(c, qp, psn);  // before any byte of this packet
  if (n != 0) {
    uint8_t* dst = c.mem.check_remote(s.write_rkey, qp.pd, qp.qpn, s.write_va, n, kRemoteWrite);
    if (dst == nullptr) return access_error(c, qp, psn);  // MR gone mid-message
    std::memcpy(dst, p.payload.data(), n);
  }
  s.write_va += n;
  s.write_left -= n;
  s.op = info.last() ? ResponderState::Op::kNone : ResponderState::Op::kWrite;
  accept(c, qp, p, 1);
  if (!info.last()) return;
  s.msn = psn_add(s.msn, 1);
  if (imm)
    responder_complete_recv(c, qp, recv_wc(qp, WcStatus::kSuccess, WcOpcode::kRecvRdmaWithImm,
                                           s.write_total, kWcWithImm, p.imm),
                            p.bth.solicited);
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
      // Already placed: acknowledge again, never place again (C9-105); the program is told
      // of nothing, and the requester is resending: the ACK is never held.
      queue_ack(c, qp, false);
      s.ack_duplicate = true;
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

void responder_complete_recv(Core& c, Qp& qp, WorkCompletion wc, bool solicited) {
  ResponderState& s = qp.resp;
  wc.wr_id = s.recv.wr_id;
  wc.qp_num = qp.qpn;
  s.have_recv = false;
  s.op = ResponderState::Op::kNone;
  c.complete(qp.recv_cq, wc, solicited);
  if (wc.status != WcStatus::kSuccess) c.enter_error(qp);
}

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
  qp.resp.ack_duplicate = false;
  if (qp.state() == QpState::kErr || qp.state() == QpState::kReset) return;
  send_ack(c, qp, psn_add(qp.resp.epsn, -1), kAethAckNoCredit);
}

namespace {

// UC's PSN (IBA 9.9.3.1): a gap means lost packets, the message in progress is abandoned and
// the responder resynchronises on the PSN it got, waiting for the next FIRST or ONLY (a
// receive WQE half filled is reused). Nothing is a duplicate: nothing is retransmitted.
void uc_sequence(Core& c, Qp& qp, const wire::Packet& p) {
  ResponderState& s = qp.resp;
  if (p.bth.psn != s.epsn) {
    ++c.ctr.rx_out_of_sequence;
    s.op = ResponderState::Op::kNone;
  }
  s.epsn = psn_add(p.bth.psn, 1);
}

// RC's PSN (IBA 9.7.5.1.2): true if the packet is the expected one; a gap is NAKed once, a
// duplicate answered from what was done (never done again).
bool rc_sequence(Core& c, Qp& qp, const wire::Packet& p) {
  ResponderState& s = qp.resp;
  int32_t d = psn_diff(p.bth.psn, s.epsn);
  if (qp.type == QpType::kXrcTgt && d <= 0 && !xrc_bind_srq(c, qp, p.xrc_srqn)) {
    // No such XRC SRQ, or one of another XRC domain: class C, Invalid Request NAK (IBA
    // 9.9.3.1), counted in tx_nak_inv_req. A duplicate naming none is dropped.
    if (d == 0) invalid_request(c, qp, p.bth.psn);
    return false;
  }
  if (d > 0) {
    // A gap: NAK once with the expected PSN, then stay silent until it arrives (IBA 9.7.5.2.2).
    ++c.ctr.rx_out_of_sequence;
    if (!s.nak_sent) {
      responder_flush_ack(c, qp);
      send_ack(c, qp, s.epsn, aeth_nak(kNakPsnSeq));
      s.nak_sent = true;
    }
    return false;
  }
  if (d < 0) {
    on_duplicate(c, qp, p);
    return false;
  }
  return true;
}

}  // namespace

// One responder for RC, XRC and UC (as rxe's rxe_resp.c), branching on the QP's type where
// the transports differ: sequencing, and what an error costs (see `reliable`).
void responder_receive(Core& c, Qp& qp, const wire::Packet& p) {
  if (!reliable(qp)) uc_sequence(c, qp, p);
  else if (!rc_sequence(c, qp, p)) return;
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
