// Outgoing packets of one engine call: built in place (headers, payload, pad, ICRC) and
// handed to the PacketPort as one batch.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "engine/counters.h"
#include "engine/ports.h"
#include "wire/headers.h"

namespace vrnic::engine {

class TxBatch {
 public:
  static constexpr size_t kMaxBatch = 64;

  // Starts a packet: writes the headers of p (pad count set from payload_len) and returns
  // the payload area for the caller to fill; then call commit().
  std::span<uint8_t> start(const wire::Packet& p, size_t payload_len,
                           const wire::IpUdpInfo& ip);
  // Zeroes the pad, computes and stores the ICRC, counts the packet; flushes when full.
  void commit(PacketPort& port, Counters& c);
  void flush(PacketPort& port);
  size_t pending() const { return used_; }

 private:
  std::vector<std::vector<uint8_t>> bufs_;
  std::vector<WirePacket> pkts_;
  size_t used_ = 0;
  size_t payload_len_ = 0, header_len_ = 0;
  uint8_t opcode_ = 0;
};

}  // namespace vrnic::engine
