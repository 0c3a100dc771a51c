// Datagram rsockets' peers: a destination address turned into (address handle, QPN, Q_Key)
// by a SIDR exchange with the socket bound there, and the answer to a peer's own request.
#include <arpa/inet.h>

#include <cerrno>
#include <cstring>

#include "rdmacm/rsocket.h"
#include "rdmacm/state.h"

namespace vrnic::rdmacm::rs {
namespace {

constexpr int kResolveMs = 2000;

void forget_resolver(Peer& p) {
  if (p.resolver) rdma_destroy_id(p.resolver);
  p.resolver = nullptr;
}

// Why a destination cannot be reached, as a UDP socket learns it (from ICMP): nobody bound
// at the port (the SIDR reply's status) is ECONNREFUSED, an address or route failure or an
// unanswered request EHOSTUNREACH.
int resolve_errno(rdma_cm_event_type type, int status) {
  switch (type) {
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR: return EHOSTUNREACH;
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_REJECTED: return status == -ETIMEDOUT ? EHOSTUNREACH : ECONNREFUSED;
    default: return ECONNREFUSED;
  }
}

}  // namespace

bool peer_key(const sockaddr* sa, socklen_t len, PeerKey& key) {
  key = {};
  if (!sa) return false;
  if (sa->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    key[0] = 4;
    std::memcpy(&key[1], &in->sin_addr, 4);
    std::memcpy(&key[17], &in->sin_port, 2);
    return true;
  }
  if (sa->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    key[0] = 6;
    std::memcpy(&key[1], &in6->sin6_addr, 16);
    std::memcpy(&key[17], &in6->sin6_port, 2);
    return true;
  }
  return false;
}

// A resolver id of the UDP port space on the rsocket thread's channel (its context is the
// socket's serial); the thread carries it through address, route and SIDR.
int start_resolve(Socket& s, const PeerKey& key, const sockaddr* to) {
  Peer p;
  if (rdma_create_id(Runtime::get().channel(), &p.resolver, serial_ctx(s.serial),
                     RDMA_PS_UDP)) {
    return errno;
  }
  if (rdma_resolve_addr(p.resolver, nullptr, const_cast<sockaddr*>(to), kResolveMs)) {
    const int err = errno;
    rdma_destroy_id(p.resolver);
    return err;
  }
  s.peers[key] = p;
  return 0;
}

// The peer's SIDR request: answered with this socket's QP, then the request's id is done.
void dgram_answer(Socket& s, rdma_cm_id* request) {
  rdma_conn_param p{};
  p.qp_num = s.ud_qp->qp_num;
  if (rdma_accept(request, &p)) rdma_reject(request, nullptr, 0);
  rdma_destroy_id(request);
}

void dgram_cm_event(Socket& s, rdma_cm_id* id, rdma_cm_event_type type, int status,
                    const rdma_ud_param& ud) {
  Peer* peer = nullptr;
  for (auto& [key, p] : s.peers) {
    if (p.resolver == id) peer = &p;
  }
  if (!peer) return;
  int err = 0;
  switch (type) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (rdma_resolve_route(id, kResolveMs)) err = errno;
      break;
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
      if (rdma_connect(id, nullptr)) err = errno;
      break;
    case RDMA_CM_EVENT_ESTABLISHED:
      peer->ah = ibv_create_ah(Service::get().default_pd(), const_cast<ibv_ah_attr*>(&ud.ah_attr));
      peer->qpn = ud.qp_num;
      peer->qkey = ud.qkey;
      if (!peer->ah) err = errno ? errno : ENOMEM;
      forget_resolver(*peer);
      break;
    default:
      err = resolve_errno(type, status);
  }
  if (err) {
    peer->error = err;
    forget_resolver(*peer);
  }
  s.wake();
}

}  // namespace vrnic::rdmacm::rs
