// Communication identifiers: create, destroy, bind, resolve, listen, options, ports.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "rdmacm/state.h"
#include "wire/gid.h"

namespace vrnic::rdmacm {

bool endpoint_of(const sockaddr* sa, cm::Endpoint& out) {
  out = {};
  if (!sa) return false;
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    std::memcpy(out.ip.data(), &in->sin_addr, 4);
    out.port = ntohs(in->sin_port);
    return true;
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    out.ipv6 = true;
    std::memcpy(out.ip.data(), &in6->sin6_addr, 16);
    out.port = ntohs(in6->sin6_port);
    return true;
  }
  return false;
}

void sockaddr_of(const cm::Endpoint& e, sockaddr_storage& out) {
  std::memset(&out, 0, sizeof out);
  if (e.ipv6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&out);
    in6->sin6_family = AF_INET6;
    std::memcpy(&in6->sin6_addr, e.ip.data(), 16);
    in6->sin6_port = htons(e.port);
  } else {
    auto* in = reinterpret_cast<sockaddr_in*>(&out);
    in->sin_family = AF_INET;
    std::memcpy(&in->sin_addr, e.ip.data(), 4);
    in->sin_port = htons(e.port);
  }
}

namespace {

bool is_wildcard(const cm::Endpoint& e) {
  for (size_t i = 0; i < (e.ipv6 ? 16u : 4u); ++i) {
    if (e.ip[i]) return false;
  }
  return true;
}

// 127.0.0.0/8 or ::1.
bool is_loopback(const cm::Endpoint& e) {
  if (!e.ipv6) return e.ip[0] == 127;
  for (size_t i = 0; i < 15; ++i) {
    if (e.ip[i]) return false;
  }
  return e.ip[15] == 1;
}

}  // namespace

// The device's GIDs in the route (rdma_ib_addr): read by programs, and the QP's path.
void fill_ib_addr(Id* id) {
  cm::Endpoint src, dst;
  endpoint_of(&id->id.route.addr.src_addr, src);
  endpoint_of(&id->id.route.addr.dst_addr, dst);
  const auto s = wire::gid_of_ip(src.ip, src.ipv6);
  const auto d = wire::gid_of_ip(dst.ip, dst.ipv6);
  std::memcpy(id->id.route.addr.addr.ibaddr.sgid.raw, s.data(), 16);
  std::memcpy(id->id.route.addr.addr.ibaddr.dgid.raw, d.data(), 16);
  id->id.route.addr.addr.ibaddr.pkey = 0xffff;
}

namespace {

// The address lengths librdmacm knows (ucma_addrlen): other families are EINVAL before the
// kernel sees them.
bool known_family(const sockaddr* sa) {
  return sa && (sa->sa_family == AF_INET || sa->sa_family == AF_INET6);
}

// Binds under the service lock: the address must be the device's, a wildcard or a loopback
// address. As with the kernel's CM, binding to a loopback address succeeds (libfabric's verbs
// provider binds "localhost" to find its devices); the device has no such address, so the id
// stays without one (verbs NULL, like a wildcard bind) and its listener hears requests to that
// loopback address only. The port is then claimed in the id's port space (ports.cc).
int bind_locked(Service& s, Id* id, const sockaddr* addr) {
  cm::Endpoint e;
  if (!endpoint_of(addr, e)) return EAFNOSUPPORT;
  bool on_device = false;
  if (!is_wildcard(e)) {
    if (e.ipv6 != s.address().ipv6) return ENODEV;
    on_device = e.same_address(s.address());
    if (!on_device && !is_loopback(e)) return ENODEV;
  }
  // The kernel makes an IPv4 bind AF_INET-only; IPv6 follows bindv6only (0 by default).
  if (!id->afonly_set) id->afonly = !e.ipv6;
  sockaddr_of(e, id->id.route.addr.src_storage);
  if (const int err = claim_port(s, id, e)) return err;
  sockaddr_of(e, id->id.route.addr.src_storage);
  if (on_device) id->id.verbs = s.context();
  id->id.port_num = 1;
  id->state = IdState::kBound;
  return 0;
}

// The kernel's route lookup from the device's address (rdma_resolve_ip): a destination the
// host cannot route to from there fails rdma_resolve_addr at once with the routing errno
// (ENETUNREACH with no route; EINVAL from a loopback address to another host). A connected
// UDP socket asks it; through system calls of its own, since librspreload.so interposes
// socket() and friends and would turn this socket into an rsocket, back into this library.
int route_check(const cm::Endpoint& from, const cm::Endpoint& to) {
  const int fd = static_cast<int>(
      syscall(SYS_socket, to.ipv6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (fd < 0) return 0;  // nothing to ask: let the CM find out
  sockaddr_storage a, b;
  cm::Endpoint src = from, dst = to;
  src.port = 0;
  dst.port = 4791;
  sockaddr_of(src, a);
  sockaddr_of(dst, b);
  const socklen_t len = to.ipv6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  if (from.ipv6 == to.ipv6) (void)syscall(SYS_bind, fd, &a, len);
  const int err = syscall(SYS_connect, fd, &b, len) != 0 ? errno : 0;
  syscall(SYS_close, fd);
  return err;
}

void post(Service& s, Id* id, rdma_cm_event_type type, int status = 0) {
  auto* b = new EventBox();
  b->ev.event = type;
  b->ev.status = status;
  s.deliver(id, b);
}

// A listener going: as the kernel's ucma, the requests the program has not read go with it
// (their connections rejected, their ids destroyed); those it read are its own and only
// forget their listener.
void drop_requests_of(Service& s, Id* listener) {
  std::vector<Id*> unread;
  for (EventBox* b : listener->channel->queue) {
    if (b->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && b->ev.listen_id == &listener->id) {
      unread.push_back(to_id(b->ev.id));
    }
  }
  for (Id* child : unread) {
    s.manager().destroy(child->conn);
    s.by_conn.erase(child->conn);
    auto& q = child->channel->queue;
    for (auto it = q.begin(); it != q.end();) {
      if ((*it)->ev.id == &child->id) {
        delete *it;
        it = q.erase(it);
      } else {
        ++it;
      }
    }
    delete child;
  }
  for (auto& [conn, id] : s.by_conn) {
    if (id->listen_parent == listener) id->listen_parent = nullptr;
  }
}

}  // namespace
}  // namespace vrnic::rdmacm

using namespace vrnic::rdmacm;
using vrnic::cm::Endpoint;

RDMACM_EXPORT int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** out, void* context,
                                 rdma_port_space ps) {
  if (!out) return fail(EINVAL);
  Service& s = Service::get();
  if (!s.ok()) return fail(s.failure());
  if (ps != RDMA_PS_TCP && ps != RDMA_PS_UDP && ps != RDMA_PS_IB && ps != RDMA_PS_IPOIB) {
    return fail(EINVAL);
  }
  Channel* ch = channel ? to_channel(channel) : new_private_channel();
  if (!ch) return -1;
  auto* id = new Id();
  id->channel = ch;
  id->id.channel = &ch->ch;
  id->id.context = context;
  id->id.ps = ps;
  id->id.qp_type = (ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB) ? IBV_QPT_UD : IBV_QPT_RC;
  *out = &id->id;
  return 0;
}

RDMACM_EXPORT int rdma_destroy_id(rdma_cm_id* cm_id) {
  if (!cm_id) return fail(EINVAL);
  Id* id = to_id(cm_id);
  Service& s = Service::get();
  if (cm_id->event) rdma_ack_cm_event(cm_id->event);
  std::unique_lock<std::mutex> g(s.mu);
  release_port(s, id);
  if (id->conn) {
    s.manager().destroy(id->conn);
    s.by_conn.erase(id->conn);
  }
  if (id->listener) {
    s.manager().stop_listening(id->listener);
    s.by_listener.erase(id->listener);
    drop_requests_of(s, id);
  }
  // Events of this id not yet fetched go; fetched ones must be acknowledged first.
  auto& q = id->channel->queue;
  for (auto it = q.begin(); it != q.end();) {
    if ((*it)->ev.id == cm_id) {
      delete *it;
      it = q.erase(it);
      --id->pending_events;
    } else {
      ++it;
    }
  }
  s.cv.wait(g, [&] { return id->pending_events <= 0; });
  const bool sync = id->channel->sync;
  Channel* ch = id->channel;
  g.unlock();
  s.kick();
  if (sync) rdma_destroy_event_channel(&ch->ch);
  delete id;
  return 0;
}

RDMACM_EXPORT int rdma_bind_addr(rdma_cm_id* cm_id, sockaddr* addr) {
  if (!cm_id || !known_family(addr)) return fail(EINVAL);
  Service& s = Service::get();
  std::lock_guard<std::mutex> g(s.mu);
  Id* id = to_id(cm_id);
  if (id->state != IdState::kIdle) return fail(EINVAL);
  const int err = bind_locked(s, id, addr);
  return err ? fail(err) : 0;
}

// As the kernel CMA: an unbound id is bound first (to the device's address when no source is
// given); a destination of another family than the bound source is EINVAL, one the host
// cannot route to from the device's address fails with the routing errno, one of the other
// family than the device's is ADDR_ERROR -ENODEV (no RDMA device has that source). Whether a
// vrnic answers at a routable address shows when the CM's REQ is answered (or, after its
// retries, UNREACHABLE -ETIMEDOUT).
RDMACM_EXPORT int rdma_resolve_addr(rdma_cm_id* cm_id, sockaddr* src, sockaddr* dst,
                                    int timeout_ms) {
  if (!cm_id || !known_family(dst) || (src && !known_family(src))) return fail(EINVAL);
  Service& s = Service::get();
  Id* id = to_id(cm_id);
  {
    std::lock_guard<std::mutex> g(s.mu);
    Endpoint d;
    endpoint_of(dst, d);
    if (id->state == IdState::kIdle) {
      sockaddr_storage any{};
      Endpoint me = s.address();
      me.port = 0;
      if (src) {
        endpoint_of(src, me);
        if (is_wildcard(me) && me.ipv6 == s.address().ipv6) {
          const uint16_t port = me.port;
          me = s.address();
          me.port = port;
        }
      } else if (d.ipv6 != s.address().ipv6) {
        me = Endpoint{};  // the wildcard of the destination's family
        me.ipv6 = d.ipv6;
      }
      sockaddr_of(me, any);
      if (const int err = bind_locked(s, id, reinterpret_cast<sockaddr*>(&any))) return fail(err);
    } else if (id->state != IdState::kBound) {
      return fail(EINVAL);
    }
    Endpoint me;
    endpoint_of(&cm_id->route.addr.src_addr, me);
    if (me.ipv6 != d.ipv6) return fail(EINVAL);
    const bool device_source = is_wildcard(me) && me.ipv6 == s.address().ipv6;
    if (const int err = route_check(device_source ? s.address() : me, d)) return fail(err);
    sockaddr_of(d, cm_id->route.addr.dst_storage);
    if (d.ipv6 != s.address().ipv6) {
      post(s, id, RDMA_CM_EVENT_ADDR_ERROR, -ENODEV);
    } else {
      if (is_wildcard(me)) {  // bound to any: the device's address, keeping the port
        const uint16_t port = me.port;
        me = s.address();
        me.port = port;
        sockaddr_of(me, cm_id->route.addr.src_storage);
      }
      cm_id->verbs = s.context();
      fill_ib_addr(id);
      id->state = IdState::kAddrResolved;
      post(s, id, RDMA_CM_EVENT_ADDR_RESOLVED);
    }
  }
  return id->channel->sync ? wait_sync(id) : 0;
}

RDMACM_EXPORT int rdma_resolve_route(rdma_cm_id* cm_id, int timeout_ms) {
  if (!cm_id) return fail(EINVAL);
  Service& s = Service::get();
  Id* id = to_id(cm_id);
  {
    std::lock_guard<std::mutex> g(s.mu);
    if (id->state != IdState::kAddrResolved) return fail(EINVAL);
    ibv_sa_path_rec& p = id->path;
    p = {};
    p.dgid = cm_id->route.addr.addr.ibaddr.dgid;
    p.sgid = cm_id->route.addr.addr.ibaddr.sgid;
    p.dlid = p.slid = htons(0xffff);
    p.hop_limit = 64;
    p.traffic_class = id->tos;
    p.reversible = htonl(1);
    p.numb_path = 1;
    p.pkey = 0xffff;
    ibv_port_attr pa{};
    ibv_query_port(s.context(), 1, &pa);
    p.mtu = pa.active_mtu;
    p.rate = 3;  // 10 Gb/s
    p.packet_life_time = 18;
    cm_id->route.path_rec = &p;
    cm_id->route.num_paths = 1;
    id->state = IdState::kRouteResolved;
    post(s, id, RDMA_CM_EVENT_ROUTE_RESOLVED);
  }
  return id->channel->sync ? wait_sync(id) : 0;
}

RDMACM_EXPORT int rdma_listen(rdma_cm_id* cm_id, int backlog) {
  if (!cm_id) return fail(EINVAL);
  Service& s = Service::get();
  std::lock_guard<std::mutex> g(s.mu);
  Id* id = to_id(cm_id);
  if (id->state == IdState::kIdle) {  // listen without bind: any address, a free port
    sockaddr_storage any{};
    Endpoint e;
    e.ipv6 = s.address().ipv6;
    sockaddr_of(e, any);
    if (const int err = bind_locked(s, id, reinterpret_cast<sockaddr*>(&any))) return fail(err);
  }
  if (id->state != IdState::kBound) return fail(EINVAL);
  if (id->reuseaddr) {  // cma_bind_listen: nobody else may hold the port now
    if (const int err = check_listen_port(s, id)) return fail(err);
  }
  Endpoint local;
  endpoint_of(&cm_id->route.addr.src_addr, local);
  uint32_t l = 0;
  const uint16_t ps = static_cast<uint16_t>(cm_id->ps);
  const int err = s.manager().listen(ps, local.port, local, is_wildcard(local), backlog, &l,
                                     id->afonly);
  if (err) return fail(err);
  id->listener = l;
  id->backlog = backlog;
  id->state = IdState::kListening;
  s.by_listener[l] = id;
  s.kick();  // requests that waited for this service are events to deliver now
  return 0;
}

// As ucma's SET_OPTION: a wrong length is EINVAL, an unknown option ENOSYS.
RDMACM_EXPORT int rdma_set_option(rdma_cm_id* cm_id, int level, int optname, void* optval,
                                  size_t optlen) {
  if (!cm_id) return fail(EINVAL);
  if (!optval && optlen) return fail(EFAULT);  // the kernel copies optlen bytes from optval
  Id* id = to_id(cm_id);
  std::lock_guard<std::mutex> g(Service::get().mu);
  if (level == RDMA_OPTION_IB) {
    // RDMA_OPTION_IB_PATH: a RoCE path comes from the IP route, as in the kernel CM.
    return fail(optname == RDMA_OPTION_IB_PATH ? EINVAL : ENOSYS);
  }
  if (level != RDMA_OPTION_ID) return fail(ENOSYS);
  switch (optname) {
    case RDMA_OPTION_ID_TOS:
      if (optlen != sizeof(uint8_t)) return fail(EINVAL);
      id->tos = *static_cast<uint8_t*>(optval);
      return 0;
    case RDMA_OPTION_ID_REUSEADDR: {  // rdma_set_reuseaddr: clearing it only before bind
      if (optlen != sizeof(int)) return fail(EINVAL);
      const bool on = *static_cast<int*>(optval) != 0;
      if (!on && id->state != IdState::kIdle) return fail(EINVAL);
      id->reuseaddr = on;
      return 0;
    }
    case RDMA_OPTION_ID_AFONLY:  // rdma_set_afonly: before bind or while only bound
      if (optlen != sizeof(int)) return fail(EINVAL);
      if (id->state != IdState::kIdle && id->state != IdState::kBound) return fail(EINVAL);
      id->afonly = *static_cast<int*>(optval) != 0;
      id->afonly_set = true;
      return 0;
    case RDMA_OPTION_ID_ACK_TIMEOUT:  // rdma_set_ack_timeout: RC and XRC initiators only
      if (optlen != sizeof(uint8_t)) return fail(EINVAL);
      if (cm_id->qp_type != IBV_QPT_RC && cm_id->qp_type != IBV_QPT_XRC_SEND) {
        return fail(EINVAL);
      }
      id->ack_timeout = std::min<uint8_t>(*static_cast<uint8_t*>(optval), 31);
      return 0;
    default:
      return fail(ENOSYS);
  }
}

RDMACM_EXPORT __be16 rdma_get_src_port(rdma_cm_id* id) {
  const sockaddr* sa = &id->route.addr.src_addr;
  return sa->sa_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port
                                   : reinterpret_cast<const sockaddr_in*>(sa)->sin_port;
}

RDMACM_EXPORT __be16 rdma_get_dst_port(rdma_cm_id* id) {
  const sockaddr* sa = &id->route.addr.dst_addr;
  return sa->sa_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port
                                   : reinterpret_cast<const sockaddr_in*>(sa)->sin_port;
}
