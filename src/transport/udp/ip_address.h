// An IPv4 or IPv6 host address as vrnic devices use it: parsing, printing, sockaddr, GID.
#pragma once
#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <string>

namespace vrnic::transport {

struct IpAddress {
  bool ipv6 = false;
  std::array<uint8_t, 16> bytes{};  // network order; IPv4 uses the first four

  // Accepts an IPv4 dotted quad or an IPv6 literal; false if neither.
  static bool parse(const std::string& text, IpAddress& out);
  static IpAddress v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d);

  std::string to_string() const;
  // The RoCEv2 GID of this address: ::ffff:a.b.c.d for IPv4, the address itself for IPv6.
  std::array<uint8_t, 16> gid() const;
  // Inverse of gid(): an IPv4-mapped GID gives the IPv4 address (the interface of a device's
  // GID, abi/query.cc).
  static IpAddress from_gid(const std::array<uint8_t, 16>& gid);

  // Fills a sockaddr_in / sockaddr_in6 for this address and port; returns its length.
  socklen_t to_sockaddr(uint16_t port, sockaddr_storage& out) const;
  // Reads an AF_INET / AF_INET6 sockaddr; returns false for any other family.
  static bool from_sockaddr(const sockaddr* sa, IpAddress& out, uint16_t* port = nullptr);

  bool operator==(const IpAddress&) const = default;
};

}  // namespace vrnic::transport
