// The device's names and identifiers: its ibv_device, node GUID and MAC, derived from the GID.
#pragma once
#include <infiniband/verbs.h>

#include <cstdint>

#include "engine/types.h"

namespace vrnic::abi {

inline constexpr char kDeviceName[] = "vrnic0";
// Not a real sysfs directory: ibv_read_sysfs_file answers for it (device.cc).
inline constexpr char kIbdevPath[] = "/sys/class/infiniband/vrnic0";
// 02:76:72: an identifier in the local (administratively assigned, AAI) quadrant of IEEE
// 802c: U/L bit set, so no OUI or CID the IEEE assigns can equal it; 76:72 is "vr".
inline constexpr uint32_t kVendorId = 0x027672;
inline constexpr uint32_t kVendorPartId = 0x7672;  // "vr"; unknown to every vendor table
inline constexpr uint32_t kHwVer = 1;

ibv_device* the_device();

// A locally administered unicast MAC made from the GID's last four (IPv4) or five bytes.
void mac_from_gid(const uint8_t gid[16], uint8_t mac[6]);
// EUI-64 node GUID from that MAC (ff:fe inserted), network byte order as ibv_* report it.
uint64_t guid_from_gid(const uint8_t gid[16]);

// The GID of the open device of this process, else the one VRNIC_IP names, else none.
bool current_gid(engine::Gid& out);
// current_gid, else the GID of the address opening the device would take now (the first
// free loopback address, probed by binding as the device will; nothing is kept).
bool expected_gid(engine::Gid& out);
void set_current_gid(const engine::Gid& gid);

}  // namespace vrnic::abi
