// The queue pair: its work queues, requester / responder state, and the QP state diagram
// (IBA 10.3.1, 11.2.4.2) that qp_transition (qp_transition.h) enforces.
#pragma once
#include <array>
#include <cstdint>
#include <deque>
#include <vector>

#include <memory>

#include "engine/ack_queue.h"
#include "engine/dcqcn.h"
#include "engine/rate_control.h"
#include "engine/ring.h"
#include "engine/small_vec.h"
#include "engine/types.h"
#include "wire/icrc.h"

namespace vrnic::engine {

class Cq;
class Pd;
class Srq;
class Xrcd;

// The SGE list of a WQE: up to 4 entries without an allocation.
using SgeList = SmallVec<Sge, 4>;

// A send WQE as the requester keeps it from post_send until it retires.
struct SendWqe {
  uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::kSend;
  uint32_t send_flags = 0;
  uint32_t imm_data = 0;
  uint32_t invalidate_rkey = 0;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint64_t compare_add = 0;  // kAtomicWrite: the 8 bytes to write, as in memory
  uint64_t swap = 0;
  MwBindInfo bind;          // kBindMw
  bool type1_bind = false;  // kBindMw from the Bind MW verb (type 1 windows only)
  SgeList sges;
  SmallVec<uint8_t, 64> inline_data;  // copied at post time when kSendInline
  uint32_t length = 0;               // message length in bytes (8 for atomics)
  bool signaled = false;
  bool direct = false;      // moved by the DirectLink (no packet, no PSN)
  bool no_direct = false;   // a direct copy of it failed: the wire only

  // Requester bookkeeping.
  bool started = false;     // PSNs assigned (first packet sent once)
  uint32_t first_psn = 0;
  uint32_t npkts = 1;       // PSNs this message occupies (READ: response packets)
  uint32_t read_placed = 0; // READ: response packets placed so far
  uint32_t read_piece = 0;  // READ: response packets per request (requester.h read_piece)
  WcStatus local_status = WcStatus::kSuccess;  // a local error found when the WQE started

  // UD: the destination copied from the AH at post time, the QPN and the Q_Key to send.
  uint32_t remote_qpn = 0;
  uint32_t remote_qkey = 0;
  bool dst_ipv6 = false;
  std::array<uint8_t, 16> dst{};
  uint8_t traffic_class = 0;  // the AH's GRH traffic class
  uint32_t xrc_srqn = 0;  // XRC initiator: the XRCETH of every request packet

  // The requests that take a responder resource and are answered by a response of their
  // own: READ, the atomics and ATOMIC WRITE (IBA A19.4.2: answered like a READ of nothing).
  bool is_read_or_atomic() const {
    return opcode == WrOpcode::kRdmaRead || opcode == WrOpcode::kAtomicCmpSwp ||
           opcode == WrOpcode::kAtomicFetchAdd || opcode == WrOpcode::kAtomicWrite;
  }
  // Bind and local invalidate: executed by the send queue, no packet, no PSN.
  bool is_local() const { return opcode == WrOpcode::kBindMw || opcode == WrOpcode::kLocalInv; }
  bool is_atomic() const {
    return opcode == WrOpcode::kAtomicCmpSwp || opcode == WrOpcode::kAtomicFetchAdd;
  }
};

struct RecvWqe {
  uint64_t wr_id = 0;
  SgeList sges;
  uint64_t length = 0;
};

struct RequesterState {
  bool started = false;       // loaded at RTR -> RTS (next_new_psn is the send PSN from then)
  size_t cursor = 0;          // index in sq of the WQE being sent (sq.front() is the oldest)
  uint32_t cursor_pkt = 0;    // packet index inside it
  uint32_t next_psn = 0;      // PSN of the next packet to send
  uint32_t next_new_psn = 0;  // PSN the next unstarted WQE gets
  uint32_t una = 0;           // oldest unacknowledged PSN
  uint32_t high_psn = 0;      // one past the highest PSN ever sent (retransmission counting)
  uint32_t asked_end = 0;     // one past the last packet sent that asked for a response
  uint8_t retry_left = 0;
  uint8_t rnr_left = 0;
  uint64_t ack_deadline = 0;  // local ACK timeout instant, 0 = not armed
  uint64_t rnr_deadline = 0;  // RNR wait end, 0 = not waiting
  // A resend from seq_nak_psn was started by a PSN-sequence NAK or an implicit NAK; copies
  // of that NAK (or more responses behind the same gap) are ignored until progress.
  bool seq_nak_handled = false;
  uint32_t seq_nak_psn = 0;
  // This QP's share of Core::inflight, as last counted (Core::recount_inflight).
  uint32_t counted_inflight = 0;
  bool budget_wait = false;  // on Core::budget_waiters
  // Direct mode: WQEs at the front of the send queue submitted to the DirectLink and not yet
  // flushed (Core::direct_flush). Nothing goes on the wire while there are any.
  uint32_t direct_pending = 0;
};

struct ResponderState {
  bool started = false;  // loaded at INIT -> RTR (epsn is the receive PSN from then)
  uint32_t epsn = 0;  // expected PSN
  uint32_t msn = 0;   // message sequence number (24-bit)
  bool nak_sent = false;  // one NAK per sequence error until a good packet (IBA 9.7.5.2.2)
  bool ack_pending = false;
  // Held ACKs (Device::receive with hold_acks_ns) learn per QP whether the program answers
  // messages it is not told of (a WRITE without immediate, a duplicate): ib_write_lat polls
  // memory and answers each WRITE, a one-sided put followed by a flush never does, and
  // holding the ACK its initiator waits for stalls both sides for the whole hold.
  bool ack_unseen = false;       // the pending ACK covers only such messages
  bool ack_duplicate = false;    // it answers a duplicate: the requester is resending, never held
  bool unseen_answered = true;   // their ACKs may be held (false after one ran out unanswered)
  uint64_t unseen_at_ns = 0;     // the last message taken, if unseen and not yet answered

  // The message in progress (multi-packet SEND or WRITE).
  enum class Op : uint8_t { kNone, kSend, kWrite } op = Op::kNone;
  bool have_recv = false;
  RecvWqe recv;            // the receive WQE a SEND in progress fills
  uint64_t placed = 0;     // bytes of the message placed so far
  uint64_t write_va = 0;   // WRITE: next target address
  uint32_t write_rkey = 0;
  uint64_t write_left = 0; // WRITE: bytes still expected (from the RETH DMA length)
  uint64_t write_total = 0;

  AckQueue ack_queue;
};

// Congestion control of one QP (docs/protocol.md "Congestion control"): its reaction point,
// made at its first CNP, and the notification point's CNP rate limit.
struct CongestionState {
  std::unique_ptr<Dcqcn> rp;  // null until the first CNP: the QP sends unpaced
  // With DeviceConfig::rate_control, the controller in DCQCN's place (rp stays null).
  std::unique_ptr<RateControl> ctl;
  uint64_t pace_deadline = 0; // the requester waits for the pacer until then (0: it does not)
  uint64_t last_cnp_ns = 0;   // when this QP last sent a CNP
  bool cnp_sent = false;
};

class Qp {
 public:
  uint32_t qpn = 0;
  uint32_t timer_slot = 0;  // in Core::timers (qp_timers.h)
  QpType type = QpType::kRc;
  Pd* pd = nullptr;
  Cq* send_cq = nullptr;
  Cq* recv_cq = nullptr;
  Srq* srq = nullptr;  // receives come from this SRQ (the QP's own rq stays empty)
  // XRC target: its domain. srq, pd and recv_cq are those of the XRC SRQ the request being
  // handled names (responder xrc_bind_srq); the QP owns none of them.
  Xrcd* xrcd = nullptr;
  bool sq_sig_all = false;
  void* user_context = nullptr;
  QpCap cap;
  QpAttr attr;  // attr.qp_state is the current state
  uint16_t src_port = 0;
  wire::IpUdpInfo ip;  // addresses and ports of the connection (set at RTR)

  Ring<SendWqe> sq;
  Ring<RecvWqe> rq;
  RequesterState req;
  ResponderState resp;
  CongestionState cc;

  QpState state() const { return attr.qp_state; }
  // The requester side works in RTS, and in SQD for what was already started (IBA 10.3.1:
  // SQD finishes the messages in progress, retransmissions included, and starts no new one).
  bool sending() const { return attr.qp_state == QpState::kRts || attr.qp_state == QpState::kSqd; }
  bool sq_drain_notify = false;  // raise SQ_DRAINED when SQD has nothing outstanding
  uint32_t mtu() const;
};

// What moves a QP from one state to another (IBA 10.3.1, the QP state diagram).
enum class QpCause : uint8_t {
  kModify,          // the Modify QP verb (11.2.4.2): the edges of the transition table
  kError,           // an error the QP cannot continue from: any state but RESET -> ERR
  kSendQueueError,  // UC / UD: a send WQE completed in error: RTS or SQD -> SQE
};

// Whether the state diagram has an edge from -> to for this QP type and cause.
bool transition_allowed(QpType type, QpState from, QpState to, QpCause cause);

// Validates a modify_qp call on a QP of `type` in state `cur` against the transition table:
// the transition itself, required and allowed attributes, and their values. 0 or EINVAL.
Errno validate_modify(QpType type, QpState cur, const QpAttr& attr, uint32_t mask,
                      uint8_t max_mtu, uint8_t max_rd_atom);

// Local ACK timeout for the 5-bit timeout attribute: 4.096 us * 2^t; 0 means infinite.
uint64_t ack_timeout_ns(uint8_t timeout);
// RNR NAK timer value (IBA table 45) for the 5-bit encoding, in ns.
uint64_t rnr_timer_ns(uint8_t code);

}  // namespace vrnic::engine
