// An in-process wire joining engines for tests: packets queue until the test delivers them,
// a seeded fault injector (loss, duplication, reordering, corruption, delay) and a virtual
// clock the test advances. Deterministic for a given seed and call sequence.
#pragma once
#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "engine/ports.h"

namespace vrnic::transport {

class VirtualClock : public engine::Clock {
 public:
  uint64_t now_ns() const override { return now_; }
  // Moves the clock on by the precise step first (0 by default: now_ns()).
  uint64_t precise_now_ns() const override { return now_ += precise_step_; }
  // The time a device spends on each event it times precisely (a batch's CE marks, CNPs),
  // for tests of what such events are timed by.
  void set_precise_step(uint64_t ns) { precise_step_ = ns; }
  void advance(uint64_t ns) { now_ += ns; }
  void advance_to(uint64_t t) {
    if (t > now_) now_ = t;
  }

 private:
  mutable uint64_t now_ = 1'000'000'000;  // not 0, so that "deadline 0 = unset" never collides
  uint64_t precise_step_ = 0;
};

// Probabilities per packet sent; delay holds a packet back by delay_ns of virtual time.
struct Faults {
  double loss = 0, dup = 0, reorder = 0, corrupt = 0, delay = 0;
  uint64_t delay_ns = 100'000;
};

struct LoopStats {
  uint64_t sent = 0, delivered = 0, lost = 0, duplicated = 0, reordered = 0, corrupted = 0,
           delayed = 0, unroutable = 0, ce_marked = 0;
};

class LoopWire;

class LoopPort : public engine::PacketPort {
 public:
  using Receiver = std::function<void(std::span<const engine::WirePacket>)>;

  LoopPort(LoopWire& wire, size_t index, const std::array<uint8_t, 16>& addr, bool ipv6);
  void send(std::span<const engine::WirePacket> batch) override;
  // 0xC000 | 14 bits of a hash of the QPN: an ephemeral port, different for nearby QPNs.
  uint16_t source_port_for(uint32_t qpn) override;

  void set_receiver(Receiver r) { receiver_ = std::move(r); }
  const std::array<uint8_t, 16>& address() const { return addr_; }
  bool ipv6() const { return ipv6_; }

 private:
  friend class LoopWire;
  LoopWire& wire_;
  size_t index_;
  std::array<uint8_t, 16> addr_;
  bool ipv6_;
  Receiver receiver_;
};

class LoopWire {
 public:
  explicit LoopWire(uint64_t seed = 1);

  // A port with this address (IPv4 in the first 4 bytes when !ipv6).
  LoopPort& add_port(const std::array<uint8_t, 16>& addr, bool ipv6 = false);
  VirtualClock& clock() { return clock_; }
  void set_faults(const Faults& f) { faults_ = f; }
  const Faults& faults() const { return faults_; }
  // Called for every packet delivered (after faults), e.g. to capture or to assert.
  void set_tap(std::function<void(const engine::WirePacket&)> tap) { tap_ = std::move(tap); }

  // Called for every packet sent, before the faults: returning true drops it (counted as
  // lost). For tests that remove one chosen packet.
  void set_drop_filter(std::function<bool(const engine::WirePacket&)> f) { drop_ = std::move(f); }
  // Called for every ECN-capable packet sent (ECT(0) or ECT(1)): returning true marks it CE,
  // as a switch whose queue is long would (RFC 3168 6.1.1.1); Not-ECT packets are left alone.
  void set_ce_marker(std::function<bool(const engine::WirePacket&)> f) { ce_ = std::move(f); }

  // Delivers the first deliverable packet and the packets right behind it for the same
  // port (one receive batch); false if nothing is deliverable at the current time.
  bool step();
  // Steps until nothing is deliverable (packets sent meanwhile included); returns the
  // number of batches delivered.
  size_t deliver_all(size_t max_batches = 10'000'000);
  size_t in_flight() const { return queue_.size(); }
  // Earliest due time of a delayed packet still queued, or UINT64_MAX.
  uint64_t next_due_ns() const;
  const LoopStats& stats() const { return stats_; }

 private:
  friend class LoopPort;
  struct Frame {
    size_t to = 0;
    wire::IpUdpInfo ip;
    uint8_t tos = 0;
    std::vector<uint8_t> bytes;
    uint64_t due = 0;
  };
  void enqueue(const engine::WirePacket& pkt);
  LoopPort* route(const wire::IpUdpInfo& ip);
  uint64_t next_u64();
  double uniform();  // [0, 1)
  bool chance(double p) { return p > 0 && uniform() < p; }

  VirtualClock clock_;
  Faults faults_;
  LoopStats stats_;
  uint64_t rng_;
  std::vector<std::unique_ptr<LoopPort>> ports_;
  std::deque<Frame> queue_;
  std::function<void(const engine::WirePacket&)> tap_;
  std::function<bool(const engine::WirePacket&)> drop_;
  std::function<bool(const engine::WirePacket&)> ce_;
};

}  // namespace vrnic::transport
