// Per-sender ICRC policy: the full 32-bit check for senders whose IPv4 IDs are known.
#include "engine/icrc_peers.h"

#include "wire/headers.h"

namespace vrnic::engine {

wire::IcrcVerdict IcrcPeers::verify(const WirePacket& pkt) {
  if (!checked_) return wire::IcrcVerdict::kOk;
  // IPv6 has no identification field, and a known ID needs no solving: check as is.
  if (pkt.ip.ipv6 || pkt.ip.ip_id_known) return wire::verify_icrc(pkt.ip, pkt.data);
  Sender& s = sender(key_of(pkt.ip));
  if (s.zero_id) return verify_zero_id(pkt);
  wire::IcrcVerdict v = wire::verify_icrc(pkt.ip, pkt.data);
  if (v == wire::IcrcVerdict::kOk) {
    if (++s.direct_run >= kZeroIdAfter) s.zero_id = true;
  } else if (v == wire::IcrcVerdict::kOkRecoveredIpId) {
    s.direct_run = 0;
  }
  return v;
}

// A zero-ID sender numbers only the segments of an offload group: the kernel (or a NIC that
// segments for it) gives segment i of a UDP_SEGMENT send ID i, and a group arriving as lone
// datagrams shows them so. The transport reports segment i of a received group as ID i, or 0
// for a lone datagram. The check stays a full 32-bit CRC against each of the kGroupIds
// candidates (one affine update each, no pass over the payload): a corrupted packet passes
// with odds of kGroupIds in 2^32.
wire::IcrcVerdict IcrcPeers::verify_zero_id(const WirePacket& pkt) {
  if (pkt.data.size() < wire::kIcrcSize) return wire::IcrcVerdict::kBad;
  const auto transport = pkt.data.first(pkt.data.size() - wire::kIcrcSize);
  const uint32_t stored = wire::stored_icrc(pkt.data);
  const uint32_t computed = wire::compute_icrc(pkt.ip, transport);
  if (computed == stored) return wire::IcrcVerdict::kOk;
  for (uint16_t id = 0; id < kGroupIds; ++id) {
    const auto change = static_cast<uint16_t>(id ^ pkt.ip.ip_id);
    if (change != 0 && wire::icrc_with_ip_id_change(computed, transport.size(), change) == stored)
      return wire::IcrcVerdict::kOkRecoveredIpId;
  }
  return wire::IcrcVerdict::kBad;
}

bool IcrcPeers::is_zero_id_sender(const wire::IpUdpInfo& ip) const {
  auto it = senders_.find(key_of(ip));
  return it != senders_.end() && it->second.zero_id;
}

}  // namespace vrnic::engine
