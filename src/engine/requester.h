// Requester: send WQEs -> request packets (segmentation, PSNs, AckReq, window, rd/atomic
// limit), and Go-Back-N repositioning.
#pragma once
#include <cstddef>
#include <cstdint>

#include "engine/core.h"

namespace vrnic::engine {

// Packets in flight per QP (PSNs from the oldest unacknowledged one): send_window() is
// DeviceConfig::send_window_bytes of path-MTU packets, within these bounds. Bounded so that a
// kernel UDP receive buffer on the peer does not overflow under a burst; large enough that a
// 1 KiB-MTU link (Ethernet MTU 1500) is not stalled waiting for ACKs every 64 KiB.
inline constexpr uint32_t kMinSendWindow = 64;
inline constexpr uint32_t kMaxSendWindow = 1024;
// AckReq is set on the last packet of every message and on every kAckReqInterval-th packet
// (a controller may ask for another interval: cc_ack_interval).
inline constexpr uint32_t kAckReqInterval = 16;
// Packets in flight on the whole device (RC requesters). With many QPs, 64 each would put
// far more on the wire than a peer's socket buffer holds (256 QPs x 64 x 4 KiB = 64 MiB):
// the excess is dropped and recovered only by the ACK timer. Each QP keeps at least one
// packet in flight, so none starves; the rest share this budget.
inline constexpr uint32_t kDeviceWindow = 1024;
// Direct mode: the longest a held, unsignaled copy waits for the rest of its burst before a
// poll_cq performs it anyway (the peer may be waiting for its data).
inline constexpr uint64_t kDirectHoldMaxNs = 20000;

// The QP's window in packets: its PSNs in flight, READ responses asked for included, so
// that no READ floods the requester's receive buffer.
uint32_t send_window(const Core& c, const Qp& qp);
// A READ is requested in pieces of this many response packets (fixed when it starts): half
// the window, so that the next piece is asked for while the responder still sends the last
// one; the whole window on a QP allowed one outstanding READ (each piece takes a responder
// resource, max_rd_atomic of them at most).
uint32_t read_piece(const Core& c, const Qp& qp);

// Checks one WR against the QP (IBA 11.4.1.1) and queues it. Returns 0 or an errno.
// type1_bind: the WR comes from the Bind MW verb (Device::bind_mw), not from post_send.
Errno requester_post(Core& c, Qp& qp, const SendWr& wr, bool type1_bind = false);
// Sends whatever the window, the rd/atomic limit, fences and RNR waits allow.
void requester_progress(Core& c, Qp& qp);
// Repositions the send cursor so that the next packet sent has PSN psn (Go-Back-N).
void requester_go_back(Core& c, Qp& qp, uint32_t psn);
// Arms the local ACK timer if packets are outstanding and it is not armed.
void requester_arm_timer(Core& c, Qp& qp, bool restart);

}  // namespace vrnic::engine
