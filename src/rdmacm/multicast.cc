// Multicast on UD ids: rdma_join_multicast(_ex) attaches the id's QP to the group's GID, rdma_leave_multicast detaches it.
#include <cerrno>
#include <cstring>

#include "rdmacm/state.h"

using namespace vrnic::rdmacm;

namespace {

int join(rdma_cm_id* cm_id, sockaddr* addr, void* context) {
  if (!cm_id || !addr) return fail(EINVAL);
  if (cm_id->qp_type != IBV_QPT_UD || !cm_id->verbs) return fail(EINVAL);
  vrnic::cm::Endpoint group;
  if (!endpoint_of(addr, group)) return fail(EAFNOSUPPORT);
  const auto gid = vrnic::wire::cm::gid_of_ip(group.ip, group.ipv6);
  Service& s = Service::get();
  std::lock_guard<std::mutex> g(s.mu);
  Id* id = to_id(cm_id);
  for (const auto& joined : id->groups) {
    if (joined == gid) return fail(EADDRINUSE);
  }
  ibv_gid mgid;
  std::memcpy(mgid.raw, gid.data(), 16);
  if (cm_id->qp) {
    if (const int err = ibv_attach_mcast(cm_id->qp, &mgid, 0)) return fail(err);
  }
  id->groups.push_back(gid);
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
  return 0;
}

}  // namespace

RDMACM_EXPORT int rdma_join_multicast(rdma_cm_id* id, sockaddr* addr, void* context) {
  return join(id, addr, context);
}

RDMACM_EXPORT int rdma_join_multicast_ex(rdma_cm_id* id, rdma_cm_join_mc_attr_ex* attr,
                                         void* context) {
  if (!attr || !(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS)) return fail(EINVAL);
  if ((attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) &&
      attr->join_flags != RDMA_MC_JOIN_FLAG_FULLMEMBER &&
      attr->join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER) {
    return fail(EINVAL);
  }
  return join(id, attr->addr, context);
}

RDMACM_EXPORT int rdma_leave_multicast(rdma_cm_id* cm_id, sockaddr* addr) {
  if (!cm_id || !addr) return fail(EINVAL);
  vrnic::cm::Endpoint group;
  if (!endpoint_of(addr, group)) return fail(EAFNOSUPPORT);
  const auto gid = vrnic::wire::cm::gid_of_ip(group.ip, group.ipv6);
  std::lock_guard<std::mutex> g(Service::get().mu);
  Id* id = to_id(cm_id);
  for (auto it = id->groups.begin(); it != id->groups.end(); ++it) {
    if (*it != gid) continue;
    id->groups.erase(it);
    if (cm_id->qp) {
      ibv_gid mgid;
      std::memcpy(mgid.raw, gid.data(), 16);
      ibv_detach_mcast(cm_id->qp, &mgid, 0);
    }
    return 0;
  }
  return fail(EADDRNOTAVAIL);
}
