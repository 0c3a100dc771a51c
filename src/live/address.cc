// open_device_port and the interface MTU lookup.
#include "live/address.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "transport/udp/kernel_socket.h"
#include "wire/headers.h"

namespace vrnic::live {
namespace {

int bind_plain(const transport::IpAddress& address, uint16_t port, int& err) {
  int fd = transport::kernel_socket(address.ipv6 ? AF_INET6 : AF_INET,
                                    SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    err = errno;
    return -1;
  }
  sockaddr_storage ss;
  socklen_t len = address.to_sockaddr(port, ss);
  if (bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    err = errno;
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

int reserve_device_address(transport::IpAddress& address, int& err, std::string& message) {
  const uint16_t port = transport::UdpPortOptions{}.port;
  for (int host = 1; host <= 254; ++host) {
    address = transport::IpAddress::v4(127, 0, 0, static_cast<uint8_t>(host));
    int fd = bind_plain(address, port, err);
    if (fd >= 0) return fd;
    if (err != EADDRINUSE) {
      message = "cannot bind " + address.to_string() + " port " + std::to_string(port) + ": " +
                std::strerror(err);
      return -1;
    }
  }
  message = "no free loopback address: UDP port " + std::to_string(port) +
            " is taken on 127.0.0.1 .. 127.0.0.254 (set VRNIC_IP)";
  err = EADDRINUSE;
  return -1;
}

std::unique_ptr<transport::UdpPort> open_device_port(const std::string& requested,
                                                     const std::string& reserved,
                                                     transport::UdpPortOptions options,
                                                     int& err, std::string& message) {
  if (!requested.empty()) {
    if (!transport::IpAddress::parse(requested, options.address)) {
      err = EINVAL;
      message = "VRNIC_IP '" + requested + "' is not an IPv4 or IPv6 address";
      return nullptr;
    }
    auto port = transport::UdpPort::open(options, err);
    if (!port) {
      message = "cannot bind " + requested + " port " + std::to_string(options.port) + ": " +
                std::strerror(err) +
                (err == EADDRINUSE ? " (another vrnic program uses this address)" : "");
    }
    return port;
  }
  if (transport::IpAddress::parse(reserved, options.address)) {
    if (auto port = transport::UdpPort::open(options, err)) return port;
  }
  for (int host = 1; host <= 254; ++host) {
    options.address = transport::IpAddress::v4(127, 0, 0, static_cast<uint8_t>(host));
    auto port = transport::UdpPort::open(options, err);
    if (port) return port;
    if (err != EADDRINUSE) {
      message = "cannot bind " + options.address.to_string() + " port " +
                std::to_string(options.port) + ": " + std::strerror(err);
      return nullptr;
    }
  }
  message = "no free loopback address: UDP port " + std::to_string(options.port) +
            " is taken on 127.0.0.1 .. 127.0.0.254 (set VRNIC_IP)";
  err = EADDRINUSE;
  return nullptr;
}

std::string interface_name(const transport::IpAddress& address) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string name;
  for (ifaddrs* i = list; i && name.empty(); i = i->ifa_next) {
    transport::IpAddress a;
    if (!i->ifa_addr || !transport::IpAddress::from_sockaddr(i->ifa_addr, a)) continue;
    // All of 127/8 lives on the loopback interface, which lists only 127.0.0.1.
    bool match = a == address || (!address.ipv6 && !a.ipv6 && address.bytes[0] == 127 &&
                                  a.bytes[0] == 127 && (i->ifa_flags & IFF_LOOPBACK));
    if (match) name = i->ifa_name;
  }
  freeifaddrs(list);
  return name;
}

int interface_mtu(const transport::IpAddress& address) {
  const std::string name = interface_name(address);
  if (name.empty()) return 0;
  int fd = transport::kernel_socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  ifreq req{};
  std::strncpy(req.ifr_name, name.c_str(), IFNAMSIZ - 1);
  int mtu = ioctl(fd, SIOCGIFMTU, &req) == 0 ? req.ifr_mtu : 0;
  close(fd);
  return mtu;
}

uint8_t ib_mtu_for(int if_mtu, bool ipv6, uint8_t max_mtu) {
  const int overhead = (ipv6 ? 40 : 20) + 8 + static_cast<int>(wire::kBthSize + wire::kRethSize +
                                                               wire::kImmDtSize + wire::kIcrcSize);
  uint8_t best = 1;  // 256: every IP link carries it
  for (uint8_t m = 1; m <= max_mtu && m <= 5; ++m)
    if ((128 << m) + overhead <= if_mtu) best = m;
  return best;
}

}  // namespace vrnic::live
