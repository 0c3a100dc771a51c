// The RoCEv2 invariant CRC (IBA Annex A17.3.3) over the masked IP/UDP headers and the transport packet.
#pragma once
#include <array>
#include <cstdint>
#include <span>

namespace vrnic::wire {

// The IP/UDP fields the ICRC covers. Addresses in network byte order; IPv4 uses the first
// four bytes of each array. Ports and ip_id in host order.
struct IpUdpInfo {
  bool ipv6 = false;
  std::array<uint8_t, 16> src{};
  std::array<uint8_t, 16> dst{};
  uint16_t src_port = 0;
  uint16_t dst_port = 4791;
  uint16_t ip_id = 0;            // IPv4 identification (not masked by the ICRC)
  uint16_t ip_flags_frag = 0x4000;  // IPv4 flags + fragment offset: DF set, as vrnic sends
  // True when ip_id / ip_flags_frag were read from the packet itself (a capture, a raw
  // socket): verify_icrc then checks them as given and never solves for the ID.
  bool ip_id_known = false;
};

// ICRC of a transport packet. `transport` is BTH .. end of payload+pad, without the ICRC.
// The UDP and IP lengths are derived from transport.size() + 4 (no IP options).
uint32_t compute_icrc(const IpUdpInfo& ip, std::span<const uint8_t> transport);

// ICRC of a whole IP packet as captured (IPv4 or IPv6 header, UDP, BTH..payload, ICRC);
// returns false if the packet is not IP/UDP.
bool compute_icrc_ip_packet(std::span<const uint8_t> ip_packet, uint32_t& icrc);

// The ICRC of the same IPv4 packet sent with its identification changed by id_xor (IDs
// differ as id ^ id_xor): the CRC is affine in the ID bits, so no pass over the payload.
// Used for the segments of a UDP_SEGMENT send, which the kernel numbers 0, 1, 2, ...
uint32_t icrc_with_ip_id_change(uint32_t icrc, size_t transport_size, uint16_t id_xor);

// The ICRC as stored in the last four bytes of a packet (little-endian on the wire).
uint32_t stored_icrc(std::span<const uint8_t> udp_payload);
void store_icrc(uint32_t icrc, uint8_t* out4);

enum class IcrcVerdict : uint8_t {
  kOk,               // matched with ip_id / flags as given
  kOkRecoveredIpId,  // matched once the (unseen) IPv4 identification was solved for
  kBad,
};

// Verifies the ICRC of a received UDP payload (BTH .. ICRC). A UDP socket does not reveal
// the IPv4 identification field, which the ICRC covers; peers such as ConnectX NICs send a
// non-zero one. When the check with ip.ip_id fails for IPv4, the 16 ID bits are solved for
// (the CRC is affine in them, so this is a 32x16 linear system over GF(2)) with DF set and
// clear; the packet is accepted if some ID makes the ICRC match. ip.ip_id_known turns the
// recovery off. See docs/protocol.md.
IcrcVerdict verify_icrc(const IpUdpInfo& ip, std::span<const uint8_t> udp_payload,
                        uint16_t* recovered_ip_id = nullptr);

}  // namespace vrnic::wire
