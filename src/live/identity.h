// What the device is called and how it identifies itself: names, MAC and node GUID from the GID,
// and the fixed attributes its sysfs directory shows (shared by the ABI and `vrnic run`).
#pragma once
#include <cstdint>
#include <string>

namespace vrnic::live {

inline constexpr char kDeviceName[] = "vrnic0";
inline constexpr char kUverbsName[] = "uverbs_vrnic0";  // ibv_device::dev_name
inline constexpr char kIbdevPath[] = "/sys/class/infiniband/vrnic0";
inline constexpr char kUverbsPath[] = "/sys/class/infiniband_verbs/uverbs_vrnic0";
inline constexpr char kUverbsNode[] = "/dev/infiniband/uverbs_vrnic0";

// A locally administered unicast MAC made from the GID's last four (IPv4) or five bytes.
void mac_from_gid(const uint8_t gid[16], uint8_t mac[6]);
// EUI-64 node GUID from that MAC (ff:fe inserted), network byte order as ibv_* report it.
uint64_t guid_from_gid(const uint8_t gid[16]);

// The device-level sysfs attributes that do not depend on the address (board_id, fw_ver,
// hca_type, hw_rev, node_desc, node_type, ports/1/link_layer); false for any other name.
bool fixed_sysfs_attr(const std::string& name, std::string& value);

}  // namespace vrnic::live
