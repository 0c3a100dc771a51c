// PacketAuth: sealing with a per-direction sequence number, opening with an anti-replay window.
#include "engine/packet_auth.h"

namespace vrnic::engine {

void PacketAuth::seal(uint32_t qpn, std::span<const uint8_t> body, uint8_t* trailer) {
  Session& s = sessions_.at(qpn);
  wire::auth_seal(s.keys.tx, s.tx_seq++, body, trailer);
}

AuthVerdict PacketAuth::open(uint32_t qpn, std::span<const uint8_t> packet, size_t& body_len) {
  auto it = sessions_.find(qpn);
  if (it == sessions_.end()) return AuthVerdict::kPlain;
  Session& s = it->second;
  if (packet.size() < wire::kAuthTrailerSize) return AuthVerdict::kForged;
  const size_t body = packet.size() - wire::kAuthTrailerSize;
  uint64_t seq = 0;
  if (!wire::auth_open(s.keys.rx, packet.first(body), packet.data() + body, seq))
    return AuthVerdict::kForged;
  // Only a packet whose tag is right moves the window: a forger cannot push it forward.
  if (!s.rx_seen || seq > s.rx_top) {
    const uint64_t shift = s.rx_seen ? seq - s.rx_top : kWindow;
    s.rx_mask = shift >= kWindow ? 1 : (s.rx_mask << shift) | 1;
    s.rx_top = seq;
    s.rx_seen = true;
  } else {
    const uint64_t back = s.rx_top - seq;
    if (back >= kWindow || (s.rx_mask >> back & 1)) return AuthVerdict::kReplayed;
    s.rx_mask |= uint64_t{1} << back;
  }
  body_len = body;
  return AuthVerdict::kOk;
}

}  // namespace vrnic::engine
