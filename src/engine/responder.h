// Responder of RC, XRC and UC: request packets (SEND, WRITE, READ, atomics) -> placement,
// receive CQEs, READ responses, atomic ACKs, coalesced ACKs and NAKs; duplicates replayed,
// never re-run; UC's errors silent (dropped and counted).
#pragma once
#include <cstdint>

#include "engine/core.h"

namespace vrnic::engine {

// A request packet for this RC, XRC or UC QP whose ICRC and headers were checked.
void responder_receive(Core& c, Qp& qp, const wire::Packet& p);
// Completes the receive WQE in use (qp.resp.recv) with wc (status, opcode, length, flags,
// source set by the caller; wr_id and qp_num filled in here), for every QP type. An error
// completion moves the QP to ERR (the other WQEs flush), as every work completion error
// does (IBA 10.3.1 / 11.6.2).
void responder_complete_recv(Core& c, Qp& qp, WorkCompletion wc, bool solicited);
// Sends the coalesced ACK of a QP, if one is pending.
void responder_flush_ack(Core& c, Qp& qp);
Errno responder_post_recv(Core& c, Qp& qp, const RecvWr& wr);
// Fetches the receive WQE the next message consumes into qp.resp.recv, from the QP's SRQ or
// its own receive queue (every QP type); false if there is none.
bool responder_take_recv(Core& c, Qp& qp);
// The PD a receive WQE's SGEs belong to: the SRQ's, or the QP's.
const Pd* responder_recv_pd(const Qp& qp);

}  // namespace vrnic::engine
