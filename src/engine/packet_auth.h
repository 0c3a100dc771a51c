// Authenticated mode at the packet boundary (docs/protocol.md "Authenticated mode"): the
// keys of each authenticated QP; every packet the QP sends is sealed as it leaves (TxBatch),
// every packet to it opened before it is parsed (Device::receive). Nothing else in the
// engine knows of it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>

#include "wire/auth_trailer.h"

namespace vrnic::engine {

// The two directions' keys of one connection, agreed by the connection manager.
struct AuthKeys {
  wire::AuthKey tx{}, rx{};
};

enum class AuthVerdict : uint8_t {
  kPlain,     // the QP has no keys: the packet is what it is
  kOk,        // tag right, number not seen before: the packet without its trailer goes on
  kForged,    // no trailer, or a tag that does not match (forged or altered): dropped
  kReplayed,  // a right tag on a number seen before or too old for the window: dropped
};

class PacketAuth {
 public:
  // Anti-replay window (as IPsec's, RFC 4303 3.4.3): numbers up to this far below the
  // highest seen are accepted once each; older ones are dropped.
  static constexpr uint64_t kWindow = 64;

  // Keys for a QP (replacing any it had: the numbering starts again).
  void set(uint32_t qpn, const AuthKeys& keys) { sessions_[qpn] = Session{keys}; }
  void erase(uint32_t qpn) { sessions_.erase(qpn); }
  bool empty() const { return sessions_.empty(); }
  bool has(uint32_t qpn) const { return sessions_.count(qpn) != 0; }

  // Bytes a packet the QP sends carries after its pad (0: not authenticated).
  size_t trailer_size(uint32_t qpn) const {
    return !sessions_.empty() && has(qpn) ? wire::kAuthTrailerSize : 0;
  }
  // Writes the trailer of the QP's next packet (body: BTH .. pad).
  void seal(uint32_t qpn, std::span<const uint8_t> body, uint8_t* trailer);
  // A received packet (BTH .. the byte before the ICRC) to the QP: kOk sets body_len to the
  // length without the trailer.
  AuthVerdict open(uint32_t qpn, std::span<const uint8_t> packet, size_t& body_len);

 private:
  struct Session {
    AuthKeys keys;
    uint64_t tx_seq = 0;
    uint64_t rx_top = 0;     // the highest number accepted (valid once rx_seen)
    uint64_t rx_mask = 0;    // bit i: number rx_top - i accepted
    bool rx_seen = false;
  };
  std::unordered_map<uint32_t, Session> sessions_;
};

}  // namespace vrnic::engine
