// The sysfs view of `vrnic run`: vrnic0's /sys/class/infiniband directory, its uverbs class
// entry and /dev/infiniband node, as rdma-core consumers (UCX, libfabric, Open MPI) look for them.
#pragma once
#include <string>

#include "transport/udp/ip_address.h"

namespace vrnic::tools {

// Builds the view for a device on `address` in a private mount namespace of this process
// (inherited by what it execs). False with `why` if it cannot; then nothing is hidden.
bool mount_sysfs_view(const transport::IpAddress& address, std::string& why);

}  // namespace vrnic::tools
