// The RoCEv2 GID of an IP address and the address a GID stands for: the one conversion.
#pragma once
#include <array>
#include <cstdint>
#include <cstring>

namespace vrnic::wire {

using GidBytes = std::array<uint8_t, 16>;

// RoCEv2 (IBA Annex A17) names an IPv4 address by its IPv4-mapped IPv6 address,
// ::ffff:a.b.c.d, and an IPv6 address by itself.
constexpr bool is_ipv4_mapped(const GidBytes& g) {
  for (int i = 0; i < 10; ++i)
    if (g[i] != 0) return false;
  return g[10] == 0xff && g[11] == 0xff;
}

// `ip` holds an IPv4 address in its first four bytes (as IpUdpInfo does), an IPv6 one whole.
inline GidBytes gid_of_ip(const std::array<uint8_t, 16>& ip, bool ipv6) {
  if (ipv6) return ip;
  GidBytes g{};
  g[10] = g[11] = 0xff;
  std::memcpy(g.data() + 12, ip.data(), 4);
  return g;
}

// The address a GID stands for, in IpUdpInfo's layout; `ipv6` says which family.
inline std::array<uint8_t, 16> ip_of_gid(const GidBytes& g, bool& ipv6) {
  ipv6 = !is_ipv4_mapped(g);
  if (ipv6) return g;
  std::array<uint8_t, 16> ip{};
  std::memcpy(ip.data(), g.data() + 12, 4);
  return ip;
}

}  // namespace vrnic::wire
