// IpAddress: parsing, printing and sockaddr / GID conversions.
#include "transport/udp/ip_address.h"

#include <arpa/inet.h>

#include <cstring>

#include "wire/gid.h"

namespace vrnic::transport {

bool IpAddress::parse(const std::string& text, IpAddress& out) {
  IpAddress a;
  if (inet_pton(AF_INET, text.c_str(), a.bytes.data()) == 1) {
    out = a;
    return true;
  }
  a.ipv6 = true;
  if (inet_pton(AF_INET6, text.c_str(), a.bytes.data()) == 1) {
    // An IPv4-mapped literal names an IPv4 host: it is sent and received as IPv4.
    out.bytes = wire::ip_of_gid(a.bytes, out.ipv6);
    return true;
  }
  return false;
}

IpAddress IpAddress::v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  IpAddress ip;
  ip.bytes[0] = a;
  ip.bytes[1] = b;
  ip.bytes[2] = c;
  ip.bytes[3] = d;
  return ip;
}

std::string IpAddress::to_string() const {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(ipv6 ? AF_INET6 : AF_INET, bytes.data(), buf, sizeof buf);
  return buf;
}

std::array<uint8_t, 16> IpAddress::gid() const { return wire::gid_of_ip(bytes, ipv6); }

IpAddress IpAddress::from_gid(const std::array<uint8_t, 16>& gid) {
  IpAddress a;
  a.bytes = wire::ip_of_gid(gid, a.ipv6);
  return a;
}

socklen_t IpAddress::to_sockaddr(uint16_t port, sockaddr_storage& out) const {
  std::memset(&out, 0, sizeof out);
  if (ipv6) {
    auto* s6 = reinterpret_cast<sockaddr_in6*>(&out);
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons(port);
    std::memcpy(&s6->sin6_addr, bytes.data(), 16);
    return sizeof(sockaddr_in6);
  }
  auto* s4 = reinterpret_cast<sockaddr_in*>(&out);
  s4->sin_family = AF_INET;
  s4->sin_port = htons(port);
  std::memcpy(&s4->sin_addr, bytes.data(), 4);
  return sizeof(sockaddr_in);
}

bool IpAddress::from_sockaddr(const sockaddr* sa, IpAddress& out, uint16_t* port) {
  IpAddress a;
  if (sa->sa_family == AF_INET) {
    const auto* s4 = reinterpret_cast<const sockaddr_in*>(sa);
    std::memcpy(a.bytes.data(), &s4->sin_addr, 4);
    if (port) *port = ntohs(s4->sin_port);
  } else if (sa->sa_family == AF_INET6) {
    const auto* s6 = reinterpret_cast<const sockaddr_in6*>(sa);
    a.ipv6 = true;
    std::memcpy(a.bytes.data(), &s6->sin6_addr, 16);
    if (port) *port = ntohs(s6->sin6_port);
  } else {
    return false;
  }
  out = a;
  return true;
}

}  // namespace vrnic::transport
