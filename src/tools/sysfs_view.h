// The sysfs view of `vrnic run`: vrnic0's /sys/class/infiniband directory, its uverbs class
// entry and /dev/infiniband node, as rdma-core consumers (UCX, libfabric, Open MPI) look for them.
#pragma once
#include <string>
#include <vector>

#include "transport/udp/ip_address.h"

namespace vrnic::tools {

// One entry of vrnic0's directory: a file and its contents (the kernel's format, without the
// newline), or a symbolic link and its target.
struct ViewEntry {
  std::string path;  // relative to /sys/class/infiniband/vrnic0
  std::string value;
  bool link = false;
};

// What drivers/infiniband/core/sysfs.c shows for a RoCE device on `address` whose network
// interface is `ifname` (empty: none holds the address; then there is no device/net entry
// and no gid_attrs/ndevs file, which the kernel cannot read either).
std::vector<ViewEntry> device_entries(const transport::IpAddress& address,
                                      const std::string& ifname);

// Builds the view for a device on `address` in a private mount namespace of this process
// (inherited by what it execs). False with `why` if it cannot; then nothing is hidden.
bool mount_sysfs_view(const transport::IpAddress& address, std::string& why);

}  // namespace vrnic::tools
