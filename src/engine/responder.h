// Responder: request packets (SEND, WRITE, READ, atomics) -> placement, receive CQEs,
// READ responses, atomic ACKs, coalesced ACKs and NAKs; duplicates replayed, never re-run.
#pragma once
#include <cstdint>

#include "engine/core.h"

namespace vrnic::engine {

// A request packet for this QP whose ICRC and headers were checked.
void responder_receive(Core& c, Qp& qp, const wire::Packet& p);
// Sends the coalesced ACK of a QP, if one is pending.
void responder_flush_ack(Core& c, Qp& qp);
Errno responder_post_recv(Core& c, Qp& qp, const RecvWr& wr);
// Fetches the receive WQE the next message consumes into qp.resp.recv, from the QP's SRQ or
// its own receive queue (every QP type); false if there is none.
bool responder_take_recv(Core& c, Qp& qp);
// The PD a receive WQE's SGEs belong to: the SRQ's, or the QP's.
const Pd* responder_recv_pd(const Qp& qp);

// AETH syndromes (IBA 9.7.5.1.1).
inline constexpr uint8_t kAethAckNoCredit = 0x1f;  // ACK, credit count "invalid" (RC w/o EEC flow control)
inline constexpr uint8_t aeth_rnr_nak(uint8_t timer) { return 0x20 | (timer & 0x1f); }
inline constexpr uint8_t aeth_nak(uint8_t code) { return 0x60 | (code & 0x1f); }

}  // namespace vrnic::engine
