// `vrnic devinfo`: what the device would advertise here: address, GID, MTU, library.
#include <cstdio>
#include <cstdlib>

#include "engine/device.h"
#include "live/address.h"
#include "tools/commands.h"

namespace vrnic::tools {

int cmd_devinfo(const DevinfoOptions& o) {
  std::string requested = o.ip;
  if (requested.empty())
    if (const char* env = std::getenv("VRNIC_IP")) requested = env;
  int err = 0;
  std::string message;
  // Probe by really binding, exactly as the device will; the port closes on return.
  auto port = live::open_device_port(requested, "", {}, err, message);
  if (!port) {
    std::fprintf(stderr, "vrnic devinfo: %s\n", message.c_str());
    return 1;
  }
  const auto& a = port->address();
  auto gid = a.gid();
  char gid_text[64];
  std::snprintf(gid_text, sizeof gid_text,
                "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x",
                gid[0], gid[1], gid[2], gid[3], gid[4], gid[5], gid[6], gid[7], gid[8], gid[9],
                gid[10], gid[11], gid[12], gid[13], gid[14], gid[15]);
  engine::DeviceLimits limits;
  int if_mtu = live::interface_mtu(a);
  uint8_t mtu = if_mtu > 0 ? live::ib_mtu_for(if_mtu, a.ipv6, limits.max_mtu) : limits.active_mtu;
  std::string lib = find_lib_dir();
  std::printf("device:          vrnic0\n");
  std::printf("address:         %s (%s, UDP port %u)%s\n", a.to_string().c_str(),
              a.ipv6 ? "IPv6" : "IPv4", port->port(),
              requested.empty() ? " - first free loopback address" : "");
  std::printf("GID[0]:          %s (RoCE v2)\n", gid_text);
  std::printf("link layer:      Ethernet\n");
  std::printf("interface MTU:   %d\n", if_mtu);
  std::printf("active MTU:      %u (%u bytes)\n", mtu, engine::mtu_bytes(mtu));
  std::printf("max MTU:         %u (%u bytes)\n", limits.max_mtu, engine::mtu_bytes(limits.max_mtu));
  std::printf("libibverbs.so.1: %s\n", lib.empty() ? "(not built)" : (lib + "/libibverbs.so.1").c_str());
  return 0;
}

}  // namespace vrnic::tools
