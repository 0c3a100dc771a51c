// Datagram rsockets' peers, as rdma-core's UDP service finds them: a datagram to a new
// destination goes over kernel UDP with a header naming the sender's QP; the destination
// answers the same way (op CTRL) and hands the payload to its reader; each side then makes an
// address handle to the other and sends UD datagrams to the QP it was told.
#include <arpa/inet.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "rdmacm/rsocket.h"
#include "rdmacm/state.h"

namespace vrnic::rdmacm::rs {
namespace {

constexpr int kResolveMs = 2000;

// The payload of a peer's first datagrams, which came over UDP, reaches the reader the way
// every other does: a UD SEND to this socket's own QP with the peer's address in its header.
void forward_to_self(Socket& s, const sockaddr_storage& from, std::span<const uint8_t> payload) {
  if (payload.size() > s.max_dgram) return;  // more than a datagram carries: lost
  if (!s.free_tx.size()) dgram_poll_cq(s);
  const int slot = dgram_slot(s);
  if (slot < 0) return;  // no send slot free: lost, as a datagram may be
  uint8_t* at = dgram_tx(s, uint32_t(slot));
  const size_t header = put_ds_header(at, reinterpret_cast<const sockaddr*>(&from));
  std::memcpy(at + header, payload.data(), payload.size());
  post_dgram(s, uint32_t(slot), uint32_t(header + payload.size()), s.self_ah, s.ud_qp->qp_num);
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

// As rdma-core makes it: the route from this socket's address to the peer's (the CM's, no
// packet leaves), its path record turned into address handle attributes.
ibv_ah* ah_to(Socket& s, const sockaddr* to) {
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(nullptr, &id, nullptr, RDMA_PS_UDP)) return nullptr;
  sockaddr_storage src = s.self;
  reinterpret_cast<sockaddr_in*>(&src)->sin_port = 0;  // sin6_port is at the same place
  ibv_ah* ah = nullptr;
  if (!rdma_resolve_addr(id, reinterpret_cast<sockaddr*>(&src), const_cast<sockaddr*>(to),
                         kResolveMs) &&
      !rdma_resolve_route(id, kResolveMs)) {
    const ibv_sa_path_rec& p = *id->route.path_rec;
    ibv_ah_attr a{};
    if (p.hop_limit > 1) {
      a.is_global = 1;
      a.grh.dgid = p.dgid;
      a.grh.flow_label = ntohl(p.flow_label);
      a.grh.sgid_index = 0;  // the device's one GID
      a.grh.hop_limit = p.hop_limit;
      a.grh.traffic_class = p.traffic_class;
    }
    a.dlid = ntohs(p.dlid);
    a.sl = p.sl;
    a.static_rate = p.rate;
    a.port_num = id->port_num ? id->port_num : 1;
    ah = ibv_create_ah(Service::get().default_pd(), &a);
  }
  rdma_destroy_id(id);
  return ah;
}

// The header (rdma-core's ds_udp_header) and the payload, to the peer's address (nothing
// named on a connected socket sending to its peer, so that the kernel reports its errors).
ssize_t udp_send(Socket& s, const Peer& peer, Op op, const iovec* iov, int iovcnt, int flags) {
  uint8_t header[kDsUdpHeaderV6];
  const size_t hlen =
      put_ds_udp_header(header, op, s.ud_qp->qp_num, reinterpret_cast<const sockaddr*>(&s.self));
  std::vector<iovec> v{{header, hlen}};
  v.insert(v.end(), iov, iov + iovcnt);
  msghdr m{};
  PeerKey key;
  peer_key(reinterpret_cast<const sockaddr*>(&peer.addr), sizeof peer.addr, key);
  if (!s.has_dest || key != s.dest) {
    m.msg_name = const_cast<sockaddr_storage*>(&peer.addr);
    m.msg_namelen = addr_len(peer.addr.ss_family);
  }
  m.msg_iov = v.data();
  m.msg_iovlen = v.size();
  const ssize_t n = sendmsg(s.udp_fd, &m, MSG_NOSIGNAL | (flags & MSG_DONTWAIT));
  return n < 0 ? -1 : n - ssize_t(hlen);
}

// What the socket's UDP port received: a peer's first datagram (op DATA) is answered with
// this socket's QP (op CTRL) and its payload handed to the reader; either op tells the
// peer's QP, to which an address handle is made.
void on_udp_readable(Socket& s) {
  uint8_t buf[kDsUdpHeaderV6 + kDsMaxMessage];
  for (;;) {
    sockaddr_storage from{};
    socklen_t flen = sizeof from;
    const ssize_t n = recvfrom(s.udp_fd, buf, sizeof buf, MSG_DONTWAIT,
                               reinterpret_cast<sockaddr*>(&from), &flen);
    if (n < 0) {  // an ICMP error on a connected socket: reported as UDP's (SO_ERROR, send)
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        s.so_error = errno;
        s.wake();
      }
      if (errno != EINTR) return;
      continue;
    }
    const auto h = get_ds_udp_header({buf, size_t(n)}, from.ss_family);
    PeerKey key;
    if (!h || !s.ud_qp || !peer_key(reinterpret_cast<sockaddr*>(&from), flen, key)) continue;
    Peer& peer = s.peers[key];
    peer.addr = from;
    if (h->op == Op::kData) udp_send(s, peer, Op::kCtrl, nullptr, 0, 0);
    if (!peer.ah || peer.qpn != h->qpn) {
      if (peer.ah) ibv_destroy_ah(peer.ah);
      peer.ah = ah_to(s, reinterpret_cast<sockaddr*>(&from));
      peer.qpn = h->qpn;
    }
    if (h->op == Op::kData) forward_to_self(s, from, {buf + h->length, size_t(n) - h->length});
  }
}

}  // namespace vrnic::rdmacm::rs
