// Multicast on UD ids: rdma_join_multicast(_ex) attaches the id's QP to the group's GID, rdma_leave_multicast detaches it.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "rdmacm/state.h"
#include "wire/gid.h"

using namespace vrnic::rdmacm;

namespace {

bool known_family(const sockaddr* sa) {
  return sa && (sa->sa_family == AF_INET || sa->sa_family == AF_INET6);
}

// As the kernel CMA: a UD id bound or with its address resolved (not yet routed, not
// listening); its QP (if any) attached to the group unless it joins to send only; joining a
// group twice is two memberships (the QP attached once), each left by one leave.
int join_group(rdma_cm_id* cm_id, sockaddr* addr, void* context, bool send_only) {
  if (!cm_id || !known_family(addr)) return fail(EINVAL);
  vrnic::cm::Endpoint group;
  endpoint_of(addr, group);
  const auto gid = vrnic::wire::gid_of_ip(group.ip, group.ipv6);
  Service& s = Service::get();
  Id* id = to_id(cm_id);
  {
    std::lock_guard<std::mutex> g(s.mu);
    const bool any = std::all_of(group.ip.begin(), group.ip.begin() + (group.ipv6 ? 16 : 4),
                                 [](uint8_t b) { return b == 0; });  // no group: EINVAL
    if (cm_id->qp_type != IBV_QPT_UD || !cm_id->verbs || any ||
        (id->state != IdState::kBound && id->state != IdState::kAddrResolved)) {
      return fail(EINVAL);
    }
    ibv_gid mgid;
    std::memcpy(mgid.raw, gid.data(), 16);
    const bool attached = std::count(id->groups.begin(), id->groups.end(), gid) > 0;
    if (cm_id->qp && !send_only && !attached) {
      if (const int err = ibv_attach_mcast(cm_id->qp, &mgid, 0)) return fail(err);
    }
    if (!send_only) id->groups.push_back(gid);
    else id->send_only_groups.push_back(gid);
    // MULTICAST_JOIN carries what a sender needs (the group's AH, QPN 0xFFFFFF, the Q_Key),
    // and the join's context in private_data, as the kernel's CM gives them.
    auto* b = new EventBox();
    b->ev.event = RDMA_CM_EVENT_MULTICAST_JOIN;
    rdma_ud_param& ud = b->ev.param.ud;
    ud.private_data = context;
    ud.ah_attr.is_global = 1;
    ud.ah_attr.port_num = 1;
    ud.ah_attr.grh.hop_limit = 64;
    ud.ah_attr.grh.dgid = mgid;
    ud.qp_num = 0xffffff;
    ud.qkey = kUdpQkey;
    s.deliver(id, b);
  }
  return id->channel->sync ? wait_sync(id) : 0;
}

}  // namespace

RDMACM_EXPORT int rdma_join_multicast(rdma_cm_id* id, sockaddr* addr, void* context) {
  return join_group(id, addr, context, false);
}

// As librdmacm: comp_mask bits it does not know are ENOTSUP; the address and the join flags
// must both be given.
RDMACM_EXPORT int rdma_join_multicast_ex(rdma_cm_id* id, rdma_cm_join_mc_attr_ex* attr,
                                         void* context) {
  if (!attr) return fail(EINVAL);
  if (attr->comp_mask >= RDMA_CM_JOIN_MC_ATTR_RESERVED) return fail(ENOTSUP);
  if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS)) return fail(EINVAL);
  if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) ||
      attr->join_flags >= RDMA_MC_JOIN_FLAG_RESERVED) {
    return fail(EINVAL);
  }
  return join_group(id, attr->addr, context,
                    attr->join_flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER);
}

// One membership of the group goes; the QP is detached with the last one.
RDMACM_EXPORT int rdma_leave_multicast(rdma_cm_id* cm_id, sockaddr* addr) {
  if (!cm_id || !known_family(addr)) return fail(EINVAL);
  vrnic::cm::Endpoint group;
  endpoint_of(addr, group);
  const auto gid = vrnic::wire::gid_of_ip(group.ip, group.ipv6);
  std::lock_guard<std::mutex> g(Service::get().mu);
  Id* id = to_id(cm_id);
  auto it = std::find(id->groups.begin(), id->groups.end(), gid);
  if (it == id->groups.end()) {
    auto so = std::find(id->send_only_groups.begin(), id->send_only_groups.end(), gid);
    if (so == id->send_only_groups.end()) return fail(EADDRNOTAVAIL);
    id->send_only_groups.erase(so);
    return 0;
  }
  id->groups.erase(it);
  if (cm_id->qp && std::find(id->groups.begin(), id->groups.end(), gid) == id->groups.end()) {
    ibv_gid mgid;
    std::memcpy(mgid.raw, gid.data(), 16);
    ibv_detach_mcast(cm_id->qp, &mgid, 0);
  }
  return 0;
}
