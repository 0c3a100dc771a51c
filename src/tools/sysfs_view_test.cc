// device_entries: vrnic0's sysfs files in the kernel's formats, and the device's network
// interface (gid_attrs/ndevs, device/net) for loopback, IPv6 and no interface at all.
#include "tools/sysfs_view.h"

#include <gtest/gtest.h>

#include <map>

namespace vrnic::tools {
namespace {

struct View {
  std::map<std::string, std::string> files, links;
};

View view_of(const char* address, const std::string& ifname) {
  transport::IpAddress a;
  EXPECT_TRUE(transport::IpAddress::parse(address, a)) << address;
  View v;
  for (const ViewEntry& e : device_entries(a, ifname)) {
    auto& into = e.link ? v.links : v.files;
    EXPECT_TRUE(into.emplace(e.path, e.value).second) << "twice: " << e.path;
  }
  return v;
}

// drivers/infiniband/core/sysfs.c: "%04x:%04x:%04x:%04x" GUIDs, "%pI6" GIDs, "%d: %s" states,
// "%d%s Gb/sec (%dX%s)" rate, "0x%08x" cap_mask, "0x%04x" P_Keys.
TEST(DeviceEntries, loopback__kernel_formats_and_lo_as_the_interface) {
  const View v = view_of("127.0.0.2", "lo");
  // MAC 02:00:7f:00:00:02, EUI-64 with the U/L bit flipped (live/identity.h).
  EXPECT_EQ(v.files.at("node_guid"), "0000:7fff:fe00:0002");
  EXPECT_EQ(v.files.at("sys_image_guid"), "0000:7fff:fe00:0002");
  EXPECT_EQ(v.files.at("node_type"), "1: CA");
  EXPECT_EQ(v.files.at("fw_ver"), VRNIC_VERSION);
  EXPECT_EQ(v.files.at("hw_rev"), "1");
  EXPECT_EQ(v.files.at("board_id"), "VRNIC-SOFTWARE-ROCEV2");
  EXPECT_EQ(v.files.at("ports/1/state"), "4: ACTIVE");
  EXPECT_EQ(v.files.at("ports/1/phys_state"), "5: LinkUp");
  EXPECT_EQ(v.files.at("ports/1/rate"), "100 Gb/sec (4X EDR)");
  EXPECT_EQ(v.files.at("ports/1/link_layer"), "Ethernet");
  EXPECT_EQ(v.files.at("ports/1/cap_mask"), "0x04010000");  // CM_SUP | IP_BASED_GIDS
  EXPECT_EQ(v.files.at("ports/1/pkeys/0"), "0xffff");
  EXPECT_EQ(v.files.at("ports/1/gids/0"), "0000:0000:0000:0000:0000:ffff:7f00:0002");
  EXPECT_EQ(v.files.at("ports/1/gid_attrs/types/0"), "RoCE v2");
  EXPECT_EQ(v.files.at("ports/1/gid_attrs/ndevs/0"), "lo");
  ASSERT_EQ(v.links.size(), 1u);
  EXPECT_EQ(v.links.at("device/net/lo"), "/sys/class/net/lo");
}

TEST(DeviceEntries, ipv6__gid_is_the_address_and_the_veth_is_the_interface) {
  const View v = view_of("fd00:97::1", "vwa123");
  EXPECT_EQ(v.files.at("ports/1/gids/0"), "fd00:0097:0000:0000:0000:0000:0000:0001");
  EXPECT_EQ(v.files.at("ports/1/gid_attrs/types/0"), "RoCE v2");
  EXPECT_EQ(v.files.at("ports/1/gid_attrs/ndevs/0"), "vwa123");
  EXPECT_EQ(v.links.at("device/net/vwa123"), "/sys/class/net/vwa123");
  // MAC 02 + the GID's last five bytes: 02:00:00:00:00:01.
  EXPECT_EQ(v.files.at("node_guid"), "0000:00ff:fe00:0001");
}

// No interface holds the address: no netdev to name (the kernel's ndevs file fails to read).
TEST(DeviceEntries, no_interface__no_ndev_and_no_device_net) {
  const View v = view_of("10.99.0.7", "");
  EXPECT_EQ(v.files.count("ports/1/gid_attrs/ndevs/0"), 0u);
  EXPECT_TRUE(v.links.empty());
  EXPECT_EQ(v.files.at("ports/1/gid_attrs/types/0"), "RoCE v2");
  EXPECT_EQ(v.files.at("ports/1/gids/0"), "0000:0000:0000:0000:0000:ffff:0a63:0007");
}

}  // namespace
}  // namespace vrnic::tools
