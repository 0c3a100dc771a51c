// Completer: in-order retirement of send WQEs, READ data placement, NAK handling, timers.
#include "engine/completer.h"

#include <cstring>

#include "engine/requester.h"
#include "wire/opcode.h"
#include "wire/psn.h"

namespace vrnic::engine {

using wire::psn_add;
using wire::psn_diff;

namespace {

using wire::AethType;
using wire::kNakInvRequest;
using wire::kNakPsnSeq;
using wire::kNakRemAccess;
using wire::kNakRemOp;

WcOpcode wc_opcode(WrOpcode op) {
  switch (op) {
    case WrOpcode::kRdmaWrite: case WrOpcode::kRdmaWriteWithImm: return WcOpcode::kRdmaWrite;
    case WrOpcode::kRdmaRead: return WcOpcode::kRdmaRead;
    case WrOpcode::kAtomicCmpSwp: return WcOpcode::kCompSwap;
    case WrOpcode::kAtomicFetchAdd: return WcOpcode::kFetchAdd;
    case WrOpcode::kLocalInv: return WcOpcode::kLocalInv;
    case WrOpcode::kBindMw: return WcOpcode::kBindMw;
    case WrOpcode::kAtomicWrite: return WcOpcode::kAtomicWrite;
    default: return WcOpcode::kSend;
  }
}

void retire_front(Core& c, Qp& qp, WcStatus status, uint32_t vendor_err) {
  SendWqe& w = qp.sq.front();
  if (w.signaled || status != WcStatus::kSuccess) {
    WorkCompletion wc;
    wc.wr_id = w.wr_id;
    wc.status = status;
    wc.opcode = wc_opcode(w.opcode);
    wc.vendor_err = vendor_err;
    wc.byte_len = w.length;
    wc.qp_num = qp.qpn;
    wc.src_qp = qp.attr.dest_qp_num;
    c.complete(qp.send_cq, wc);
  }
  qp.sq.pop_front();
  RequesterState& r = qp.req;
  if (r.cursor > 0) {
    --r.cursor;
  } else {
    r.cursor_pkt = 0;
  }
  // A bind / local invalidate that already ran behind it completes with it.
  if (status == WcStatus::kSuccess && !qp.sq.empty() && qp.sq.front().is_local() &&
      qp.sq.front().started)
    retire_front(c, qp, WcStatus::kSuccess, kVendorNone);
}

// Completes the front WQE with an error and moves the QP to ERR (the rest is flushed).
void fail_front(Core& c, Qp& qp, WcStatus status, uint32_t vendor_err) {
  if (!qp.sq.empty()) retire_front(c, qp, status, vendor_err);
  c.enter_error(qp);
}

void on_progress(Core& c, Qp& qp) {
  RequesterState& r = qp.req;
  r.retry_left = qp.attr.retry_cnt;
  r.rnr_left = qp.attr.rnr_retry;
  r.seq_nak_handled = false;
  requester_arm_timer(c, qp, true);
  c.mark_tx_ready(qp);
}

// Retires SEND / WRITE WQEs acknowledged by a response covering PSNs up to `last`
// (inclusive). A READ or atomic at the front whose pending PSN is <= last was passed over
// by the responder: its response was lost, an implicit NAK (IBA 9.7.5.1.3). Returns true
// in that case; una then points at the lost response.
bool retire_acked(Core& c, Qp& qp, uint32_t last) {
  RequesterState& r = qp.req;
  bool progress = false, implicit = false;
  while (!qp.sq.empty()) {
    SendWqe& w = qp.sq.front();
    if (!w.started || w.local_status != WcStatus::kSuccess) break;
    if (w.is_local()) {  // ran already; nothing to acknowledge
      retire_front(c, qp, WcStatus::kSuccess, kVendorNone);
      continue;
    }
    if (w.is_read_or_atomic()) {
      implicit = psn_diff(last, psn_add(w.first_psn, w.read_placed)) >= 0;
      break;
    }
    uint32_t w_last = psn_add(w.first_psn, w.npkts - 1);
    if (psn_diff(w_last, last) <= 0) {
      r.una = psn_add(w_last, 1);
      retire_front(c, qp, WcStatus::kSuccess, kVendorNone);
      progress = true;
    } else {
      if (psn_diff(psn_add(last, 1), r.una) > 0) {
        r.una = psn_add(last, 1);  // part of a multi-packet message acknowledged
        progress = true;
      }
      break;
    }
  }
  if (progress) on_progress(c, qp);
  // After a Go-Back-N the cursor may sit on PSNs the peer has now acknowledged (the
  // originals arrived after all): move it up to una instead of resending them.
  if (psn_diff(r.next_psn, r.una) < 0) requester_go_back(c, qp, r.una);
  completer_check_front(c, qp);
  return implicit;
}

void implicit_nak(Core& c, Qp& qp) {
  RequesterState& r = qp.req;
  // Later responses behind the same gap say nothing new: one resend per gap.
  if (r.seq_nak_handled && r.seq_nak_psn == r.una) return;
  ++c.ctr.implicit_naks;
  r.seq_nak_handled = true;
  r.seq_nak_psn = r.una;
  requester_go_back(c, qp, r.una);
}

// The answer to an ATOMIC WRITE: a READ response Only without payload at its PSN (IBA A19.4.2).
void on_atomic_write_response(Core& c, Qp& qp, const wire::Packet& p) {
  SendWqe& w = qp.sq.front();
  if (p.bth.psn != w.first_psn || w.read_placed != 0) {
    ++c.ctr.rx_duplicate;
    return;
  }
  if (!p.payload.empty() || p.bth.opcode != wire::kRcReadResponseOnly) {
    ++c.ctr.rx_malformed;
    return;
  }
  w.read_placed = 1;
  qp.req.una = psn_add(p.bth.psn, 1);
  retire_front(c, qp, WcStatus::kSuccess, kVendorNone);
  on_progress(c, qp);
  completer_check_front(c, qp);
}

void on_read_response(Core& c, Qp& qp, const wire::Packet& p) {
  RequesterState& r = qp.req;
  uint32_t psn = p.bth.psn;
  if (retire_acked(c, qp, psn_add(psn, -1))) return implicit_nak(c, qp);
  if (!qp.sending() || qp.sq.empty()) return;
  SendWqe& w = qp.sq.front();
  if (w.started && w.opcode == WrOpcode::kAtomicWrite) return on_atomic_write_response(c, qp, p);
  if (!w.started || w.opcode != WrOpcode::kRdmaRead || w.direct) return;  // a copy: no responses
  int32_t k = psn_diff(psn, w.first_psn);
  if (k < 0 || static_cast<uint32_t>(k) != w.read_placed) {
    ++c.ctr.rx_duplicate;  // an older response (already placed) or a stray one
    return;
  }
  uint32_t mtu = qp.mtu();
  uint64_t off = uint64_t(k) * mtu;
  uint64_t expect = w.length > off ? w.length - off : 0;
  if (expect > mtu) expect = mtu;
  bool last = static_cast<uint32_t>(k) + 1 == w.npkts;
  // The response closing a piece of the READ (requester.h read_piece) is a LAST too.
  bool piece_end = last || (static_cast<uint32_t>(k) + 1) % w.read_piece == 0;
  const wire::OpcodeInfo& info = wire::opcode_info(p.bth.opcode);
  if (p.payload.size() != expect || info.last() != piece_end) {
    ++c.ctr.rx_malformed;  // a response of the wrong length is not placed (C9-92 at the requester)
    return;
  }
  if (!c.scatter(qp.pd, w.sges, off, p.payload.data(), expect)) {
    fail_front(c, qp, WcStatus::kLocProtErr, kVendorLocalKey);
    return;
  }
  ++w.read_placed;
  r.una = psn_add(psn, 1);
  if (last) retire_front(c, qp, WcStatus::kSuccess, kVendorNone);
  on_progress(c, qp);
  completer_check_front(c, qp);
}

void on_atomic_ack(Core& c, Qp& qp, const wire::Packet& p) {
  RequesterState& r = qp.req;
  uint32_t psn = p.bth.psn;
  if (retire_acked(c, qp, psn_add(psn, -1))) return implicit_nak(c, qp);
  if (!qp.sending() || qp.sq.empty()) return;
  SendWqe& w = qp.sq.front();
  if (!w.started || !w.is_atomic() || w.first_psn != psn || w.read_placed != 0) {
    ++c.ctr.rx_duplicate;
    return;
  }
  uint64_t orig = p.atomic_ack.orig;
  if (!c.scatter(qp.pd, w.sges, 0, reinterpret_cast<const uint8_t*>(&orig), 8)) {
    fail_front(c, qp, WcStatus::kLocProtErr, kVendorLocalKey);
    return;
  }
  w.read_placed = 1;
  r.una = psn_add(psn, 1);
  retire_front(c, qp, WcStatus::kSuccess, kVendorNone);
  on_progress(c, qp);
  completer_check_front(c, qp);
}

void on_rnr_nak(Core& c, Qp& qp, uint32_t psn, uint8_t timer) {
  RequesterState& r = qp.req;
  ++c.ctr.rx_nak_rnr;
  if (retire_acked(c, qp, psn_add(psn, -1))) return implicit_nak(c, qp);
  if (!qp.sending() || psn != r.una) return;
  if (r.rnr_deadline != 0) return;  // a copy of the NAK we are already waiting on
  if (qp.attr.rnr_retry != 7) {  // 7 = retry forever (IBA 9.7.5.2.8)
    if (r.rnr_left == 0) {
      fail_front(c, qp, WcStatus::kRnrRetryExcErr, kVendorRnrExhausted);
      return;
    }
    --r.rnr_left;
  }
  ++c.ctr.rnr_retries;
  requester_go_back(c, qp, psn);
  r.rnr_deadline = c.now() + rnr_timer_ns(timer);
  c.note_qp_deadline(qp, r.rnr_deadline);
  r.ack_deadline = 0;  // the RNR timer replaces the ACK timer while waiting
}

void on_nak(Core& c, Qp& qp, uint32_t psn, uint8_t code, uint8_t syndrome) {
  RequesterState& r = qp.req;
  switch (code) {
    case kNakPsnSeq: ++c.ctr.rx_nak_psn_seq; break;
    case kNakInvRequest: ++c.ctr.rx_nak_inv_req; break;
    case kNakRemAccess: ++c.ctr.rx_nak_rem_access; break;
    case kNakRemOp: ++c.ctr.rx_nak_rem_op; break;
    default: break;
  }
  if (retire_acked(c, qp, psn_add(psn, -1))) return implicit_nak(c, qp);
  if (!qp.sending()) return;
  if (code == kNakPsnSeq) {
    // The responder expects psn: resend from there (Go-Back-N, 9.7.5.2.2). A second NAK
    // for the same PSN with no progress in between is a copy of the first and is ignored.
    if (psn != r.una || (r.seq_nak_handled && r.seq_nak_psn == psn)) return;
    if (r.retry_left == 0) {
      fail_front(c, qp, WcStatus::kRetryExcErr, syndrome);
      c.async_event(AsyncEventType::kQpFatal, qp.user_context);
      return;
    }
    --r.retry_left;
    r.seq_nak_handled = true;
    r.seq_nak_psn = psn;
    requester_go_back(c, qp, psn);
    requester_arm_timer(c, qp, true);
    return;
  }
  // Invalid request, remote access and remote operational errors end the QP (9.9.2).
  WcStatus st = code == kNakInvRequest  ? WcStatus::kRemInvReqErr
                : code == kNakRemAccess ? WcStatus::kRemAccessErr
                : code == kNakRemOp     ? WcStatus::kRemOpErr
                                        : WcStatus::kRemInvRdReqErr;
  if (qp.sq.empty() || !qp.sq.front().started) return;
  fail_front(c, qp, st, syndrome);
}

}  // namespace

void completer_check_front(Core& c, Qp& qp) {
  if (qp.state() == QpState::kErr || qp.sq.empty()) return;
  const SendWqe& w = qp.sq.front();
  if (w.local_status != WcStatus::kSuccess) fail_front(c, qp, w.local_status, kVendorLocalKey);
}

void completer_retire_local(Core& c, Qp& qp) {
  if (!qp.sq.empty() && (qp.sq.front().is_local() || qp.sq.front().direct) &&
      qp.sq.front().started)
    retire_front(c, qp, WcStatus::kSuccess, kVendorNone);
}

void completer_receive(Core& c, Qp& qp, const wire::Packet& p) {
  RequesterState& r = qp.req;
  uint32_t psn = p.bth.psn;
  const wire::OpcodeInfo& info = wire::opcode_info(p.bth.opcode);
  // A response must acknowledge something sent: una - 1 <= psn < next new PSN.
  if (psn_diff(psn, r.una) < -1 || psn_diff(psn, r.next_new_psn) >= 0) {
    ++c.ctr.rx_duplicate;
    return;
  }
  switch (info.kind) {
    case wire::OpKind::kReadResponse: {
      if (info.has(wire::kHasAeth) && wire::aeth_type(p.aeth.syndrome) != AethType::kAck) return;
      on_read_response(c, qp, p);
      return;
    }
    case wire::OpKind::kAtomicAck:
      on_atomic_ack(c, qp, p);
      return;
    case wire::OpKind::kAck: {
      const AethType type = wire::aeth_type(p.aeth.syndrome);
      const uint8_t value = wire::aeth_value(p.aeth.syndrome);
      if (type == AethType::kAck) {
        ++c.ctr.rx_ack;
        if (retire_acked(c, qp, psn)) implicit_nak(c, qp);
      } else if (type == AethType::kRnrNak) {
        on_rnr_nak(c, qp, psn, value);
      } else if (type == AethType::kNak) {
        on_nak(c, qp, psn, value, p.aeth.syndrome);
      } else {
        ++c.ctr.rx_malformed;  // reserved AETH type
      }
      return;
    }
    default:
      return;
  }
}

void completer_on_timer(Core& c, Qp& qp) {
  RequesterState& r = qp.req;
  uint64_t now = c.now();
  if (!qp.sending()) return;
  if (r.rnr_deadline != 0 && now >= r.rnr_deadline) {
    r.rnr_deadline = 0;
    c.mark_tx_ready(qp);
  }
  if (r.ack_deadline != 0 && now >= r.ack_deadline) {
    r.ack_deadline = 0;
    if (r.una == r.next_psn && r.cursor == 0) return;  // nothing outstanding
    ++c.ctr.ack_timeouts;
    if (r.retry_left == 0) {
      // Transport retry counter exceeded (a requester error, IBA 9.9.2): error CQE, QP to ERR.
      fail_front(c, qp, WcStatus::kRetryExcErr, kVendorRetryTimeout);
      c.async_event(AsyncEventType::kQpFatal, qp.user_context);
      return;
    }
    --r.retry_left;
    r.seq_nak_handled = false;
    requester_go_back(c, qp, r.una);
    requester_arm_timer(c, qp, true);
  }
}

}  // namespace vrnic::engine
