// Ethernet / IPv4 / IPv6 / UDP framing around a RoCEv2 transport packet, for captures and tests.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "wire/icrc.h"

namespace vrnic::wire {

// Builds a whole Ethernet frame (dst MAC, src MAC, EtherType, IP header with a valid header
// checksum, TTL 64, DSCP/ECN from tos, UDP header with checksum 0 for IPv4 and a valid one
// for IPv6) around `udp_payload` (BTH .. ICRC). MAC addresses are derived from the IPs.
std::vector<uint8_t> build_frame(const IpUdpInfo& ip, std::span<const uint8_t> udp_payload,
                                 uint8_t tos = 0);

// Writes the IPv4 (20 bytes) or IPv6 (40 bytes) header of a UDP datagram of `udp_len` bytes
// (UDP header included) from `ip`: TTL / hop limit 64, DSCP/ECN from tos, the IPv4 header
// checksum. Returns its size.
size_t write_ip_header(const IpUdpInfo& ip, size_t udp_len, uint8_t tos, uint8_t* out);

// Splits an Ethernet frame: fills ip (addresses, ports, id, flags) and returns the UDP
// payload; returns an empty span if the frame is not IPv4/IPv6 + UDP.
std::span<const uint8_t> parse_frame(std::span<const uint8_t> frame, IpUdpInfo& ip);

}  // namespace vrnic::wire
