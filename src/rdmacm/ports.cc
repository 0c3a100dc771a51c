// Source ports of ids in their port spaces, as the kernel CMA's bind lists: ephemeral ports, privileged ports, REUSEADDR, conflicts.
#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "rdmacm/state.h"

namespace vrnic::rdmacm {
namespace {

bool is_any(const cm::Endpoint& e) {
  return std::all_of(e.ip.begin(), e.ip.begin() + (e.ipv6 ? 16 : 4),
                     [](uint8_t b) { return b == 0; });
}

cm::Endpoint source_of(const Id* id) {
  cm::Endpoint e;
  endpoint_of(&id->id.route.addr.src_addr, e);
  return e;
}

// The kernel asks for CAP_NET_BIND_SERVICE below port 1024 (PROT_SOCK).
bool may_bind_privileged() {
  __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = {};
  if (syscall(SYS_capget, &h, d) != 0) return geteuid() == 0;
  return (d[CAP_NET_BIND_SERVICE / 32].effective >> (CAP_NET_BIND_SERVICE % 32)) & 1;
}

// Whether `id`, at address `mine`, may share the port with the ids already holding it
// (cma_check_port): with `reuseaddr`, an owner that set REUSEADDR too and does not listen is
// no conflict; nor is one of the other family when both are AFONLY. Otherwise a wildcard on
// either side is EADDRNOTAVAIL and the same address EADDRINUSE.
int check_owners(const std::vector<Id*>& owners, const Id* id, const cm::Endpoint& mine,
                 bool reuseaddr) {
  for (const Id* other : owners) {
    if (other == id) continue;
    if (reuseaddr && other->reuseaddr && other->state != IdState::kListening) continue;
    const cm::Endpoint theirs = source_of(other);
    if (id->afonly && other->afonly && mine.ipv6 != theirs.ipv6) continue;
    if (is_any(mine) || is_any(theirs)) return EADDRNOTAVAIL;
    if (mine.same_address(theirs)) return EADDRINUSE;
  }
  return 0;
}

}  // namespace

int claim_port(Service& s, Id* id, cm::Endpoint& e) {
  const int ps = id->id.ps;
  if (e.port == 0) {  // cma_alloc_any_port: the first free port of the ephemeral range
    for (int tries = 0; tries < 65536; ++tries) {
      const uint16_t p = s.ephemeral_port();
      if (s.port_owners.count({ps, p}) == 0) {
        e.port = p;
        break;
      }
    }
    if (e.port == 0) return EADDRNOTAVAIL;
  } else {
    if (e.port < 1024 && !may_bind_privileged()) return EACCES;
    auto it = s.port_owners.find({ps, e.port});
    if (it != s.port_owners.end()) {
      if (const int err = check_owners(it->second, id, e, id->reuseaddr)) return err;
    }
  }
  s.port_owners[{ps, e.port}].push_back(id);
  id->port_held = true;
  return 0;
}

int check_listen_port(Service& s, Id* id) {
  const cm::Endpoint mine = source_of(id);
  auto it = s.port_owners.find({id->id.ps, mine.port});
  if (it == s.port_owners.end()) return 0;
  return check_owners(it->second, id, mine, false);
}

void release_port(Service& s, Id* id) {
  if (!id->port_held) return;
  id->port_held = false;
  auto it = s.port_owners.find({id->id.ps, source_of(id).port});
  if (it == s.port_owners.end()) return;
  std::erase(it->second, id);
  if (it->second.empty()) s.port_owners.erase(it);
}

}  // namespace vrnic::rdmacm
