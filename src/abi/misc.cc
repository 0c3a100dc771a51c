// Process-wide verbs: fork support and L2 address resolution.
#include <cstring>

#include "abi/identity.h"
#include "abi/objects.h"

// Registered memory is never pinned (the engine reads it through the process' own mappings),
// so a fork needs no preparation and no range has to be excluded from the child.
VRNIC_EXPORT int ibv_fork_init() { return 0; }
VRNIC_EXPORT ibv_fork_status ibv_is_fork_initialized() { return IBV_FORK_UNNEEDED; }
VRNIC_EXPORT int ibv_dontfork_range(void*, size_t) { return 0; }
VRNIC_EXPORT int ibv_dofork_range(void*, size_t) { return 0; }

// The MAC of a vrnic peer follows from its GID (identity.h); there is no VLAN.
VRNIC_EXPORT int ibv_resolve_eth_l2_from_gid(ibv_context* context, ibv_ah_attr* attr,
                                             uint8_t eth_mac[ETHERNET_LL_SIZE], uint16_t* vid) {
  if (!attr || !attr->is_global) return EINVAL;
  vrnic::abi::mac_from_gid(attr->grh.dgid.raw, eth_mac);
  if (vid) *vid = 0xffff;  // no VLAN tag
  return 0;
}
