// The device's MAC and node GUID (derived from the GID) and its fixed sysfs attributes.
#include "live/identity.h"

#include <cstring>

#include "wire/gid.h"

namespace vrnic::live {

void mac_from_gid(const uint8_t gid[16], uint8_t mac[6]) {
  mac[0] = 0x02;  // locally administered, unicast
  std::memcpy(mac + 1, gid + 11, 5);
  wire::GidBytes g;
  std::memcpy(g.data(), gid, g.size());
  if (wire::is_ipv4_mapped(g)) mac[1] = 0x00;  // IPv4-mapped: 02:00:a:b:c:d
}

uint64_t guid_from_gid(const uint8_t gid[16]) {
  uint8_t mac[6];
  mac_from_gid(gid, mac);
  const uint8_t eui[8] = {uint8_t(mac[0] ^ 0x02), mac[1], mac[2], 0xff, 0xfe,
                          mac[3], mac[4], mac[5]};
  uint64_t be;
  std::memcpy(&be, eui, 8);
  return be;
}

bool fixed_sysfs_attr(const std::string& name, std::string& value) {
  static const struct {
    const char* name;
    const char* value;
  } kAttrs[] = {
      {"board_id", "VRNIC-SOFTWARE-ROCEV2"},
      {"node_desc", "vrnic software RoCEv2 NIC"},
      {"fw_ver", VRNIC_VERSION},  // ibv_query_device's fw_ver (abi/query.cc)
      {"hw_rev", "1"},            // hw_ver (abi/identity.h kHwVer)
      {"hca_type", "vrnic"},
      {"node_type", "1: CA"},  // the kernel's "%d: %s" of RDMA_NODE_IB_CA
      {"ports/1/link_layer", "Ethernet"},
  };
  for (const auto& a : kAttrs)
    if (name == a.name) {
      value = a.value;
      return true;
    }
  return false;
}

}  // namespace vrnic::live
