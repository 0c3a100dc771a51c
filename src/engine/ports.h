// The three narrow interfaces through which the sans-IO engine meets the world.
#pragma once
#include <array>
#include <cstdint>
#include <span>

#include "wire/icrc.h"

namespace vrnic::engine {

class Cq;

// One RoCEv2 packet handed to or from the transport: the UDP payload (BTH .. ICRC) plus the
// IP/UDP fields the ICRC covers. `data` is valid only for the duration of the call.
struct WirePacket {
  wire::IpUdpInfo ip;
  uint8_t tos = 0;  // DSCP/ECN byte (ECN bits used by congestion control)
  std::span<const uint8_t> data;
};

class PacketPort {
 public:
  virtual ~PacketPort() = default;
  // Sends a batch; the port copies what it needs before returning.
  virtual void send(std::span<const WirePacket> batch) = 0;
  // The UDP source port this port will really send a QP's packets from (flow entropy for
  // ECMP, derived from the QPN); the engine puts it in the ICRC.
  virtual uint16_t source_port_for(uint32_t qpn) = 0;
  // UD multicast membership of the device: join when the first QP attaches to a group (an
  // IP address, IPv4 in the first four bytes), leave after the last detaches. Returns true
  // if the port then delivers the group's packets itself — this device's own sends
  // included — so the engine does not loop them back; false (the default) if it cannot.
  virtual bool set_multicast(const std::array<uint8_t, 16>& group, bool ipv6, bool join) {
    return false;
  }
};

class Clock {
 public:
  virtual ~Clock() = default;
  virtual uint64_t now_ns() const = 0;
};

// Notifications out of the engine; called with the engine's lock held, must not call back
// into the engine.
class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void on_cq_event(Cq* cq, void* cq_user_context) = 0;  // an armed CQ got a CQE
  virtual void on_async_event(const struct AsyncEvent& ev) = 0;
};

}  // namespace vrnic::engine
