// The device's names and identifiers: its ibv_device, node GUID and MAC, derived from the GID.
#include "abi/identity.h"

#include "live/address.h"
#include "live/config.h"
#include "transport/udp/ip_address.h"


#include <cstdlib>
#include <cstring>
#include <mutex>

namespace vrnic::abi {
namespace {

ibv_device make_device() {
  ibv_device d{};
  d.node_type = IBV_NODE_CA;
  d.transport_type = IBV_TRANSPORT_IB;  // RoCE reports the IB transport
  std::strncpy(d.name, kDeviceName, sizeof(d.name) - 1);
  // UCX stats /dev/infiniband/<dev_name>; `vrnic run` makes these paths exist (docs/live.md).
  std::strncpy(d.dev_name, live::kUverbsName, sizeof(d.dev_name) - 1);
  std::strncpy(d.dev_path, live::kUverbsPath, sizeof(d.dev_path) - 1);
  std::strncpy(d.ibdev_path, kIbdevPath, sizeof(d.ibdev_path) - 1);
  return d;
}

std::mutex g_gid_mu;
bool g_gid_known = false;
engine::Gid g_gid;

}  // namespace

ibv_device* the_device() {
  static ibv_device device = make_device();
  return &device;
}

void set_current_gid(const engine::Gid& gid) {
  std::lock_guard g(g_gid_mu);
  g_gid = gid;
  g_gid_known = true;
}

bool current_gid(engine::Gid& out) {
  {
    std::lock_guard g(g_gid_mu);
    if (g_gid_known) {
      out = g_gid;
      return true;
    }
  }
  const char* ip = std::getenv("VRNIC_IP");
  if (!ip) return false;
  transport::IpAddress addr;
  if (!transport::IpAddress::parse(ip, addr)) return false;
  out.raw = addr.gid();
  return true;
}

bool expected_gid(engine::Gid& out) {
  if (current_gid(out)) return true;
  live::LiveConfig config;
  std::string why;
  if (!live::LiveConfig::from_environment(config, why)) return false;
  int err = 0;
  std::string message;
  auto port = live::open_device_port(config.ip, config.reserved, {}, err, message);
  if (!port) return false;
  out.raw = port->address().gid();
  return true;
}

}  // namespace vrnic::abi
