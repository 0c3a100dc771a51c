// mount_sysfs_view: the attribute files, each the value vrnic's ibv_query_* return (abi/query.cc),
// and the device's network interface.
#include "tools/sysfs_view.h"

#include <infiniband/verbs.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "live/address.h"
#include "live/identity.h"
#include "tools/private_mounts.h"

namespace vrnic::tools {
namespace {

// The kernel prints GIDs as eight groups of four hex digits ("%pI6"), GUIDs as four.
std::string groups_of_four(const uint8_t* bytes, int n) {
  std::string out;
  char buf[8];
  for (int i = 0; i < n; i += 2) {
    std::snprintf(buf, sizeof buf, "%s%02x%02x", i ? ":" : "", bytes[i], bytes[i + 1]);
    out += buf;
  }
  return out;
}

}  // namespace

std::vector<ViewEntry> device_entries(const transport::IpAddress& address,
                                      const std::string& ifname) {
  const auto gid = address.gid();
  const uint64_t guid = live::guid_from_gid(gid.data());  // network order
  const std::string guid_text = groups_of_four(reinterpret_cast<const uint8_t*>(&guid), 8);
  std::vector<ViewEntry> f = {{"node_guid", guid_text}, {"sys_image_guid", guid_text}};
  for (const char* name : {"board_id", "node_desc", "fw_ver", "hw_rev", "hca_type", "node_type",
                           "ports/1/link_layer"}) {
    std::string value;
    live::fixed_sysfs_attr(name, value);
    f.push_back({name, value});
  }
  char cap[16];
  std::snprintf(cap, sizeof cap, "0x%08x", unsigned(IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS));
  const std::vector<ViewEntry> port = {
      {"ports/1/state", "4: ACTIVE"},       // IBV_PORT_ACTIVE
      {"ports/1/phys_state", "5: LinkUp"},  // phys_state 5
      {"ports/1/rate", "100 Gb/sec (4X EDR)"},  // active_width 4X, active_speed EDR
      {"ports/1/lid", "0x0"},  // RoCE has no LIDs
      {"ports/1/sm_lid", "0x0"},
      {"ports/1/lid_mask_count", "0"},
      {"ports/1/sm_sl", "0"},
      {"ports/1/cap_mask", cap},
      {"ports/1/pkeys/0", "0xffff"},  // the default partition, full membership
      // One RoCEv2 GID, the address (gid_tbl_len 1).
      {"ports/1/gids/0", groups_of_four(gid.data(), 16)},
      {"ports/1/gid_attrs/types/0", "RoCE v2"},
      {"device/numa_node", "-1"},  // no PCI function: no NUMA node of its own
  };
  f.insert(f.end(), port.begin(), port.end());
  if (!ifname.empty()) {
    // The interface that holds the address: the GID's netdev, and the device's network
    // interface, where rdma-core's tests and ibdev2netdev look (the netdev's directory).
    f.push_back({"ports/1/gid_attrs/ndevs/0", ifname});
    f.push_back({"device/net/" + ifname, "/sys/class/net/" + ifname, true});
  }
  return f;
}

namespace {

bool write_tree(const std::string& root, const std::vector<ViewEntry>& entries,
                std::string& why) {
  for (const auto& [rel, value, link] : entries) {
    const std::string path = root + "/" + rel;
    for (size_t slash = root.size(); (slash = path.find('/', slash)) != std::string::npos;
         ++slash)
      mkdir(path.substr(0, slash).c_str(), 0755);  // EEXIST is fine; a real failure shows below
    if (link) {
      if (symlink(value.c_str(), path.c_str()) != 0) {
        why = "linking " + path + ": " + std::strerror(errno);
        return false;
      }
      continue;
    }
    FILE* out = std::fopen(path.c_str(), "we");
    if (!out || std::fprintf(out, "%s\n", value.c_str()) < 0 || std::fclose(out) != 0) {
      why = "writing " + path + ": " + std::strerror(errno);
      return false;
    }
  }
  return true;
}

bool build(PrivateMounts& m, const transport::IpAddress& address, std::string& why) {
  if (!m.graft("/sys/class", {"infiniband", "infiniband_verbs"}, why)) return false;
  if (!m.graft("/dev", {"infiniband"}, why)) return false;
  // UCX requires stat(/dev/infiniband/<dev_name>) to be a character device it may read and
  // write; /dev/null is one, and nothing opens it to talk to a driver.
  if (!m.bind_node("/dev/null", live::kUverbsNode, why)) return false;
  struct stat st;
  if (stat(live::kUverbsNode, &st) != 0) {
    why = std::string(live::kUverbsNode) + ": " + std::strerror(errno);
    return false;
  }
  const std::string dev =
      std::to_string(major(st.st_rdev)) + ":" + std::to_string(minor(st.st_rdev));
  const std::vector<ViewEntry> uverbs = {
      {"ibdev", live::kDeviceName}, {"dev", dev}, {"abi_version", "1"}};
  return write_tree(live::kIbdevPath, device_entries(address, live::interface_name(address)),
                    why) &&
         write_tree(live::kUverbsPath, uverbs, why) &&
         write_tree("/sys/class/infiniband_verbs", {{"abi_version", "6"}}, why);
}

}  // namespace

bool mount_sysfs_view(const transport::IpAddress& address, std::string& why) {
  PrivateMounts m;
  if (!m.enter(why)) return false;
  if (build(m, address, why)) return true;
  m.undo();
  return false;
}

}  // namespace vrnic::tools
