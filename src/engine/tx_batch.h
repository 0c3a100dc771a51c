// Outgoing packets of one engine call: built in place in one reused buffer (headers, payload,
// pad, ICRC) and handed to the PacketPort as one batch.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <span>

#include "engine/counters.h"
#include "engine/packet_auth.h"
#include "engine/ports.h"
#include "wire/headers.h"

namespace vrnic::engine {

class TxBatch {
 public:
  static constexpr size_t kMaxBatch = 64;

  // Packets of authenticated QPs are sealed here (packet_auth.h); null: none are.
  void set_auth(PacketAuth* auth) { auth_ = auth; }
  void set_icrc(bool on) { icrc_ = on; }  // false: the ICRC field left zero (DeviceConfig)

  // Starts a packet: writes the headers of p (pad count set from payload_len) and returns
  // the payload area for the caller to fill; then call commit(). `qpn`: the local QP that
  // sends it (0 for none), whose keys seal it if it has any.
  std::span<uint8_t> start(const wire::Packet& p, size_t payload_len,
                           const wire::IpUdpInfo& ip, uint8_t tos = 0, uint32_t qpn = 0);
  // Zeroes the pad, seals an authenticated QP's packet, computes and stores the ICRC, counts
  // the packet; flushes when full. Returns the packet's size (BTH to ICRC).
  size_t commit(PacketPort& port, Counters& c);
  void flush(PacketPort& port);
  size_t pending() const { return used_; }

 private:
  // Makes room for `need` more bytes after fill_ (a larger arena; packets keep their offsets).
  void reserve(size_t need);

  // The batch's packets back to back, each at a 64-byte aligned offset: one buffer reused
  // from batch to batch, grown (never shrunk) when a batch needs more.
  std::unique_ptr<uint8_t[]> arena_;
  size_t capacity_ = 0;
  size_t fill_ = 0;  // bytes of the arena the committed packets take
  std::array<WirePacket, kMaxBatch> pkts_;
  std::array<size_t, kMaxBatch> offset_{};  // where each packet starts in the arena
  size_t used_ = 0;
  // The packet started and not yet committed.
  size_t start_ = 0, payload_len_ = 0, header_len_ = 0, total_len_ = 0, trailer_len_ = 0;
  uint32_t qpn_ = 0;
  PacketAuth* auth_ = nullptr;
  bool icrc_ = true;
  uint8_t opcode_ = 0;
  wire::PacketKind kind_ = wire::PacketKind::kRequest;
};

}  // namespace vrnic::engine
