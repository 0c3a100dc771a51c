// Congestion control in the device (docs/protocol.md "Congestion control"): the ECN field of
// outgoing packets, the notification point (CNPs for CE-marked packets) and the reaction
// point's hooks (DCQCN per QP, dcqcn.h, or a controller of rate_control.h) in the
// requester and the timers.
#pragma once
#include <cstddef>
#include <cstdint>

#include "engine/core.h"

namespace vrnic::engine {

inline constexpr uint8_t kEcnMask = 0x3, kEcnEct0 = 0x2, kEcnCe = 0x3;

// The DSCP/ECN byte of a data packet with this GRH traffic class: its DSCP (or the device's
// data DSCP when the class is 0) and ECT(0) while congestion control is on.
uint8_t data_tos(const Core& c, uint8_t traffic_class);
// A CNP for `qp` (null: no such QP): its reaction point cuts the rate.
void cc_receive_cnp(Core& c, Qp* qp);
// A packet for `qp` arrived CE-marked: counted, and answered with a CNP to its sender at
// most once per min_time_between_cnps. `src_qpn` / `from`: the sender (UD: from DETH).
void cc_on_ce(Core& c, Qp& qp, uint32_t src_qpn, const wire::IpUdpInfo& from);
// True if the QP's pacer holds its next packet (a timer is armed for it).
bool cc_pacer_holds(Core& c, Qp& qp);
// True when the QP's controller (DeviceConfig::rate_control) has a window and
// `in_flight_packets` of the path MTU fill it (none in flight: never).
bool cc_window_holds(const Qp& qp, uint32_t in_flight_packets);
// True when DCQCN (or the QP's controller) limits the QP so far that cc_ack_interval packets of `bytes` take a
// quarter of the local ACK timeout or more: each packet then asks for its ACK, so that the
// timer measures the path, not the QP's own slowness.
bool cc_acks_every_packet(const Qp& qp, uint32_t bytes, uint64_t ack_timeout_ns);
// Every how many data packets the QP asks for an ACK: kAckReqInterval, or its controller's
// RateControl::ack_interval (the controller made now if it is not yet: the first packet
// asks as the rest).
uint32_t cc_ack_interval(Core& c, Qp& qp);
// The requester sent a packet of `bytes` (the UDP payload) for `qp`.
void cc_on_sent(Core& c, Qp& qp, size_t bytes);
// Runs the QP's due congestion timers (the pacer's wake-up, DCQCN's increase timer).
void cc_on_timer(Core& c, Qp& qp);
// The QP's next congestion deadline (UINT64_MAX: none).
uint64_t cc_deadline(const Qp& qp);

}  // namespace vrnic::engine
