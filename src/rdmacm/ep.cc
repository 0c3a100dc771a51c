// The convenience layer: rdma_getaddrinfo, rdma_create_ep/destroy_ep, rdma_get_request, rdma_migrate_id, devices, multicast.
#include <arpa/inet.h>
#include <netdb.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "rdmacm/state.h"

using namespace vrnic::rdmacm;

namespace {

sockaddr* copy_addr(const sockaddr* sa, socklen_t len) {
  auto* out = static_cast<sockaddr*>(std::calloc(1, len));
  if (out) std::memcpy(out, sa, len);
  return out;
}

// Resolves node/service with the system resolver into one rdma_addrinfo: the address is the
// destination, or with RAI_PASSIVE the source (a wildcard when node is NULL).
int resolve(const char* node, const char* service, const rdma_addrinfo* hints, rdma_addrinfo* r) {
  addrinfo h{};
  h.ai_family = hints && hints->ai_family ? hints->ai_family : AF_UNSPEC;
  h.ai_socktype = SOCK_STREAM;
  const bool passive = hints && (hints->ai_flags & RAI_PASSIVE);
  if (passive) h.ai_flags |= AI_PASSIVE;
  if (hints && (hints->ai_flags & RAI_NUMERICHOST)) h.ai_flags |= AI_NUMERICHOST;
  addrinfo* ai = nullptr;
  const int rc = getaddrinfo(node, service, &h, &ai);
  if (rc != 0) return rc;
  // Prefer the device's family (a vrnic device is IPv4 or IPv6).
  const int want = Service::get().ok() && Service::get().address().ipv6 ? AF_INET6 : AF_INET;
  addrinfo* pick = ai;
  for (addrinfo* p = ai; p; p = p->ai_next) {
    if (p->ai_family == want) {
      pick = p;
      break;
    }
  }
  r->ai_family = pick->ai_family;
  sockaddr* a = copy_addr(pick->ai_addr, pick->ai_addrlen);
  if (passive) {
    r->ai_src_addr = a;
    r->ai_src_len = pick->ai_addrlen;
  } else {
    r->ai_dst_addr = a;
    r->ai_dst_len = pick->ai_addrlen;
  }
  freeaddrinfo(ai);
  return 0;
}

}  // namespace

RDMACM_EXPORT int rdma_getaddrinfo(const char* node, const char* service,
                                   const rdma_addrinfo* hints, rdma_addrinfo** res) {
  // As librdmacm: with neither node nor service, the hints' addresses are the answer.
  if (!res || (!node && !service && !hints)) return fail(EINVAL);
  auto* r = static_cast<rdma_addrinfo*>(std::calloc(1, sizeof(rdma_addrinfo)));
  if (!r) return fail(ENOMEM);
  r->ai_flags = hints ? hints->ai_flags : 0;
  r->ai_qp_type = hints && hints->ai_qp_type ? hints->ai_qp_type : IBV_QPT_RC;
  r->ai_port_space = hints && hints->ai_port_space ? hints->ai_port_space : RDMA_PS_TCP;
  if (node || service) {
    if (const int rc = resolve(node, service, hints, r)) {
      std::free(r);
      // librdmacm returns getaddrinfo's code and sets errno from it.
      errno = rc == EAI_SYSTEM ? errno : ENOENT;
      return rc;
    }
  }
  if (!node && !service && hints->ai_dst_addr && hints->ai_dst_len) {
    r->ai_dst_addr = copy_addr(hints->ai_dst_addr, hints->ai_dst_len);
    r->ai_dst_len = hints->ai_dst_len;
  }
  if (hints && hints->ai_src_addr && !r->ai_src_addr) {
    r->ai_src_addr = copy_addr(hints->ai_src_addr, hints->ai_src_len);
    r->ai_src_len = hints->ai_src_len;
  }
  if (!node && !service) {  // the family of the hints, else of the address they carry
    const sockaddr* a = r->ai_dst_addr ? r->ai_dst_addr : r->ai_src_addr;
    r->ai_family = hints->ai_family ? hints->ai_family : a ? a->sa_family : AF_UNSPEC;
  }
  *res = r;
  return 0;
}

RDMACM_EXPORT void rdma_freeaddrinfo(rdma_addrinfo* res) {
  while (res) {
    rdma_addrinfo* next = res->ai_next;
    std::free(res->ai_src_addr);
    std::free(res->ai_dst_addr);
    std::free(res->ai_src_canonname);
    std::free(res->ai_dst_canonname);
    std::free(res->ai_route);
    std::free(res->ai_connect);
    std::free(res);
    res = next;
  }
}

// A synchronous id from an rdma_addrinfo: bound (passive) or resolved to the destination;
// with qp_init_attr its QP is made (on a passive id: for each request rdma_get_request takes).
RDMACM_EXPORT int rdma_create_ep(rdma_cm_id** out, rdma_addrinfo* res, ibv_pd* pd,
                                 ibv_qp_init_attr* qp_init_attr) {
  if (!out || !res) return fail(EINVAL);
  rdma_cm_id* cm_id = nullptr;
  if (rdma_create_id(nullptr, &cm_id, nullptr, static_cast<rdma_port_space>(res->ai_port_space))) {
    return -1;
  }
  Id* id = to_id(cm_id);
  cm_id->qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
  int r;
  if (res->ai_flags & RAI_PASSIVE) {
    r = rdma_bind_addr(cm_id, res->ai_src_addr);
  } else {
    r = rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr, 2000);
    if (r == 0) r = rdma_resolve_route(cm_id, 2000);
  }
  if (r == 0 && qp_init_attr) {
    qp_init_attr->qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
    if (res->ai_flags & RAI_PASSIVE) {
      id->ep_attr = std::make_unique<ibv_qp_init_attr>(*qp_init_attr);
      cm_id->pd = pd;
    } else {
      r = rdma_create_qp(cm_id, pd, qp_init_attr);
    }
  } else if (r == 0) {
    cm_id->pd = pd;
  }
  if (r != 0) {
    const int err = errno;
    rdma_destroy_id(cm_id);
    return fail(err);
  }
  *out = cm_id;
  return 0;
}

RDMACM_EXPORT void rdma_destroy_ep(rdma_cm_id* cm_id) {
  if (!cm_id) return;
  rdma_destroy_qp(cm_id);
  rdma_destroy_srq(cm_id);
  rdma_destroy_id(cm_id);
}

namespace {

// Moves an id and its events not yet fetched to another channel.
void move_to_channel(Id* id, Channel* to) {
  std::lock_guard<std::mutex> g(Service::get().mu);
  Channel* from = id->channel;
  for (auto it = from->queue.begin(); it != from->queue.end();) {
    if ((*it)->ev.id == &id->id) {
      to->queue.push_back(*it);
      const uint64_t one = 1;
      (void)!write(to->ch.fd, &one, sizeof one);
      it = from->queue.erase(it);
    } else {
      ++it;
    }
  }
  id->channel = to;
  id->id.channel = &to->ch;
}

}  // namespace

// The next connection request of a synchronous listener, as an id of its own (synchronous
// too), with its QP made from the listener's rdma_create_ep attributes. As librdmacm: the
// next event must be a request (REJECTED: ECONNREFUSED; an error status: its errno; another
// event: EINVAL, the event left in listen->event).
RDMACM_EXPORT int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** out) {
  if (!listen || !out) return fail(EINVAL);
  Id* l = to_id(listen);
  if (!l->channel->sync || l->state != IdState::kListening) return fail(EINVAL);
  if (listen->event) rdma_ack_cm_event(listen->event);
  rdma_cm_event* ev = nullptr;
  if (rdma_get_cm_event(listen->channel, &ev) != 0) return -1;
  if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST || ev->status) {
    listen->event = ev;
    if (ev->event == RDMA_CM_EVENT_REJECTED) return fail(ECONNREFUSED);
    return fail(ev->status ? -ev->status : EINVAL);
  }
  rdma_cm_id* child = ev->id;
  Channel* own = new_private_channel();
  if (!own) {
    rdma_ack_cm_event(ev);
    return -1;
  }
  move_to_channel(to_id(child), own);
  child->event = ev;
  if (l->ep_attr) {
    ibv_qp_init_attr attr = *l->ep_attr;
    if (rdma_create_qp(child, listen->pd, &attr) != 0) {
      const int err = errno;
      rdma_reject(child, nullptr, 0);
      rdma_destroy_id(child);
      return fail(err);
    }
  } else {
    child->pd = listen->pd;
  }
  *out = child;
  return 0;
}

// Moves an id (and its events not yet fetched) to another channel; NULL: a private one
// (EINVAL for an id that is synchronous already). An id leaving its private channel takes
// its last event with it and the channel goes, as in librdmacm.
RDMACM_EXPORT int rdma_migrate_id(rdma_cm_id* cm_id, rdma_event_channel* channel) {
  if (!cm_id) return fail(EINVAL);
  Id* id = to_id(cm_id);
  Channel* from = id->channel;
  if (from->sync && !channel) return fail(EINVAL);
  Channel* to = channel ? to_channel(channel) : new_private_channel();
  if (!to) return -1;
  const bool own_private = from->sync && from != to &&
                           !(id->listen_parent && id->listen_parent->channel == from);
  if (own_private && cm_id->event) rdma_ack_cm_event(cm_id->event);
  move_to_channel(id, to);
  if (own_private) rdma_destroy_event_channel(&from->ch);
  return 0;
}

RDMACM_EXPORT ibv_context** rdma_get_devices(int* num) {
  Service& s = Service::get();
  const int n = s.ok() ? 1 : 0;
  auto** list = static_cast<ibv_context**>(std::calloc(n + 1, sizeof(ibv_context*)));
  if (!list) {
    errno = ENOMEM;
    return nullptr;
  }
  if (n) list[0] = s.context();
  if (num) *num = n;
  return list;
}

RDMACM_EXPORT void rdma_free_devices(ibv_context** list) { std::free(list); }
