// The device's names and identifiers: its ibv_device, node GUID and MAC, derived from the GID.
#pragma once
#include <infiniband/verbs.h>

#include <cstdint>

#include "engine/types.h"
#include "live/identity.h"

namespace vrnic::abi {

using live::kDeviceName;
// Under `vrnic run` a real directory (docs/live.md); elsewhere ibv_read_sysfs_file answers for
// its fixed attributes (device.cc).
using live::kIbdevPath;
// 02:76:72: an identifier in the local (administratively assigned, AAI) quadrant of IEEE
// 802c: U/L bit set, so no OUI or CID the IEEE assigns can equal it; 76:72 is "vr".
inline constexpr uint32_t kVendorId = 0x027672;
inline constexpr uint32_t kVendorPartId = 0x7672;  // "vr"; unknown to every vendor table
inline constexpr uint32_t kHwVer = 1;

ibv_device* the_device();

using live::guid_from_gid;
using live::mac_from_gid;

// The GID of the open device of this process, else the one VRNIC_IP names, else none.
bool current_gid(engine::Gid& out);
// current_gid, else the GID of the address opening the device would take now (the first
// free loopback address, probed by binding as the device will; nothing is kept).
bool expected_gid(engine::Gid& out);
void set_current_gid(const engine::Gid& gid);

}  // namespace vrnic::abi
