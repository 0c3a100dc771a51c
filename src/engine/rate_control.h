// The engine's optional congestion-control interface: a per-QP controller that takes the
// place of the built-in DCQCN reaction point (dcqcn.h) when a device is configured with a
// factory (DeviceConfig::rate_control). It paces the QP and may bound the bytes it keeps in
// flight; whoever configures it (the simulator's DCQCN+w and HPCC) may also feed it what the
// engine does not see (INT records), through Device::rate_control. Sans-IO: times are given.
#pragma once
#include <cstdint>
#include <memory>

namespace vrnic::engine {

class RateControl {
 public:
  virtual ~RateControl() = default;
  // A CNP for this QP arrived at `now`.
  virtual void on_cnp(uint64_t now) = 0;
  // A packet of `wire_bytes` (UDP payload and Ethernet/IP/UDP framing) left at `now`.
  virtual void on_sent(uint64_t wire_bytes, uint64_t now) = 0;
  // Runs the controller's timer events due by `now`.
  virtual void advance(uint64_t now) = 0;
  // When the next timer event is due (UINT64_MAX: none).
  virtual uint64_t next_event_ns() const = 0;
  // When the pacer lets the next packet leave (<= now: at once).
  virtual uint64_t next_send_ns() const = 0;
  // The bytes the QP may keep sent and not yet acknowledged (UINT64_MAX: no window). A QP
  // with nothing in flight may always send one packet.
  virtual uint64_t window_bytes() const = 0;
  // The rate the QP is paced at (bits/s).
  virtual double rate_bps() const = 0;
  // Every how many data packets the QP asks for an ACK (0: the engine's kAckReqInterval),
  // for a controller that wants its feedback sooner (HPCC: each packet's INT).
  virtual uint32_t ack_interval() const { return 0; }
};

class RateControlFactory {
 public:
  virtual ~RateControlFactory() = default;
  // The controller of connected QP `qpn`, made at its first packet sent or CNP received.
  virtual std::unique_ptr<RateControl> make(uint32_t qpn) = 0;
};

}  // namespace vrnic::engine
