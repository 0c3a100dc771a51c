// Per-sender ICRC policy: the full 32-bit check for senders whose IPv4 IDs are known.
#include "engine/icrc_peers.h"

namespace vrnic::engine {

wire::IcrcVerdict IcrcPeers::verify(const WirePacket& pkt) {
  // IPv6 has no identification field, and a known ID needs no solving: check as is.
  if (pkt.ip.ipv6 || pkt.ip.ip_id_known) return wire::verify_icrc(pkt.ip, pkt.data);
  Sender& s = senders_[key_of(pkt.ip)];
  if (s.zero_id) {
    // A zero-ID sender's packet that fails the direct check is corrupt. The transport
    // reports segment i of a received offload group as ID i (the ID the kernel gave it);
    // a group merged from lone datagrams carries ID 0 in every segment.
    wire::IpUdpInfo ip = pkt.ip;
    ip.ip_id_known = true;
    wire::IcrcVerdict v = wire::verify_icrc(ip, pkt.data);
    if (v == wire::IcrcVerdict::kBad && ip.ip_id != 0) {
      ip.ip_id = 0;
      v = wire::verify_icrc(ip, pkt.data);
    }
    return v;
  }
  wire::IcrcVerdict v = wire::verify_icrc(pkt.ip, pkt.data);
  if (v == wire::IcrcVerdict::kOk) {
    if (++s.direct_run >= kZeroIdAfter) s.zero_id = true;
  } else if (v == wire::IcrcVerdict::kOkRecoveredIpId) {
    s.direct_run = 0;
  }
  return v;
}

bool IcrcPeers::is_zero_id_sender(const wire::IpUdpInfo& ip) const {
  auto it = senders_.find(key_of(ip));
  return it != senders_.end() && it->second.zero_id;
}

}  // namespace vrnic::engine
