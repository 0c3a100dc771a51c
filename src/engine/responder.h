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

// AETH syndromes (IBA 9.7.5.1.1).
inline constexpr uint8_t kAethAckNoCredit = 0x1f;  // ACK, credit count "invalid" (RC w/o EEC flow control)
inline constexpr uint8_t aeth_rnr_nak(uint8_t timer) { return 0x20 | (timer & 0x1f); }
inline constexpr uint8_t aeth_nak(uint8_t code) { return 0x60 | (code & 0x1f); }

}  // namespace vrnic::engine
