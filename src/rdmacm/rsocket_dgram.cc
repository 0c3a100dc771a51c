// Datagram rsockets: the UD QP and its slots, binding, and the datapath (a datagram per
// send, each read whole or cut to the reader's buffer as UDP's recvmsg does).
#include <arpa/inet.h>
#include <poll.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "rdmacm/rsocket.h"
#include "rdmacm/state.h"

namespace vrnic::rdmacm::rs {
namespace {

uint8_t* rx_slot(const Socket& s, uint32_t slot) { return s.rx_buf + size_t(slot) * kDgSlotSize; }
uint8_t* tx_slot(const Socket& s, uint32_t slot) { return s.tx_buf + size_t(slot) * kDgSlotSize; }

void post_dg_recv(Socket& s, uint32_t slot) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(rx_slot(s, slot)), kDgSlotSize, s.rx_mr->lkey};
  ibv_recv_wr wr{}, *bad = nullptr;
  wr.wr_id = slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_post_recv(s.ud_qp, &wr, &bad);
}

// RESET -> INIT -> RTR -> RTS with the UDP port space's Q_Key (a UD QP needs no peer).
int ud_qp_ready(ibv_qp* qp) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = 1;
  a.qkey = kUdpQkey;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)) {
    return errno;
  }
  a = {};
  a.qp_state = IBV_QPS_RTR;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE)) return errno;
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0;
  return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) ? errno : 0;
}

int setup_dgram(Socket& s) {
  ibv_context* ctx = Service::get().context();
  ibv_pd* pd = Service::get().default_pd();
  if (int err = setup_rings(s, ctx, kDgRxSlots, kDgTxSlots, kDgSlotSize, kDgRxSlots + kDgTxSlots))
    return err;
  ibv_qp_init_attr qa = ring_qp_attr(s, IBV_QPT_UD, kDgTxSlots, kDgRxSlots);
  s.ud_qp = ibv_create_qp(pd, &qa);
  if (!s.ud_qp) return errno;
  if (int err = ud_qp_ready(s.ud_qp)) return err;
  ibv_port_attr pa{};
  ibv_query_port(ctx, 1, &pa);
  const uint32_t mtu = std::min<uint32_t>(128u << pa.active_mtu, kDgMaxMtu);  // IBV_MTU_256 = 1
  s.max_dgram = mtu - sizeof(DgHeader);
  for (uint32_t i = 0; i < kDgRxSlots; ++i) post_dg_recv(s, i);
  for (uint32_t i = kDgTxSlots; i > 0; --i) s.free_tx.push_back(i - 1);
  return 0;
}

// The socket's own address as datagrams carry it: a wildcard bind shows the device's address.
void fill_self(Socket& s) {
  sockaddr* local = rdma_get_local_addr(s.id);
  cm::Endpoint e;
  endpoint_of(local, e);
  bool wildcard = true;
  for (uint8_t b : e.ip) wildcard = wildcard && b == 0;
  if (wildcard) {
    const uint16_t port = e.port;
    e = Service::get().address();
    e.port = port;
  }
  s.self.family = e.ipv6 ? 6 : 4;
  s.self.port = htons(e.port);
  std::memcpy(s.self.addr, e.ip.data(), e.ipv6 ? 16 : 4);
}

PeerKey key_of(const DgHeader& h) {
  PeerKey k{};
  k[0] = h.family;
  std::memcpy(&k[1], h.addr, 16);
  std::memcpy(&k[17], &h.port, 2);
  return k;
}

socklen_t sockaddr_from(const DgHeader& h, sockaddr_storage& out) {
  std::memset(&out, 0, sizeof out);
  if (h.family == 6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&out);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = h.port;
    std::memcpy(&in6->sin6_addr, h.addr, 16);
    return sizeof(sockaddr_in6);
  }
  auto* in = reinterpret_cast<sockaddr_in*>(&out);
  in->sin_family = AF_INET;
  in->sin_port = h.port;
  std::memcpy(&in->sin_addr, h.addr, 4);
  return sizeof(sockaddr_in);
}

// A datagram that arrived: kept if its header is whole (and, on a connected socket, if it
// comes from the peer, as a connected UDP socket filters); otherwise its slot goes back.
void on_dg_recv(Socket& s, const ibv_wc& wc) {
  const auto slot = static_cast<uint32_t>(wc.wr_id);
  DgHeader h;
  bool keep = wc.byte_len >= kGrhSize + sizeof h;
  if (keep) {
    std::memcpy(&h, rx_slot(s, slot) + kGrhSize, sizeof h);
    keep = h.magic == kDgMagic && (h.family == 4 || h.family == 6) &&
           (!s.has_dest || key_of(h) == s.dest) && !s.rd_shut;
  }
  if (!keep) {
    post_dg_recv(s, slot);
    return;
  }
  s.rx.push_back({slot, wc.byte_len - kGrhSize - uint32_t(sizeof h), 0});
}

bool can_send(const Socket& s) { return !s.free_tx.empty() && s.sq_used < kDgTxSlots; }

// Posts the datagram in tx slot `slot` (header and payload written) to the peer.
int post_dgram(Socket& s, uint32_t slot, uint32_t len, const Peer& peer) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(tx_slot(s, slot)), len, s.tx_mr->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = slot;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.wr.ud.ah = peer.ah;
  wr.wr.ud.remote_qpn = peer.qpn;
  wr.wr.ud.remote_qkey = peer.qkey;
  if (ibv_post_send(s.ud_qp, &wr, &bad)) return errno ? errno : EIO;
  ++s.sq_used;
  return 0;
}

}  // namespace

// Binds the UDP-port-space id (a null address: the device's, a free port) and listens on it,
// so that peers' SIDR requests for the address find this socket's QP.
int dgram_bind(Socket& s, const sockaddr* addr) {
  sockaddr_storage any{};
  if (!addr) {
    cm::Endpoint e = Service::get().address();
    e.port = 0;
    sockaddr_of(e, any);
    addr = reinterpret_cast<const sockaddr*>(&any);
  }
  if (rdma_bind_addr(s.id, const_cast<sockaddr*>(addr))) return errno;
  if (rdma_listen(s.id, 64)) {  // the port is taken (EADDRINUSE): a fresh id for another bind
    const int err = errno;
    rdma_destroy_id(s.id);
    s.id = nullptr;
    if (rdma_create_id(Runtime::get().channel(), &s.id, serial_ctx(s.serial), RDMA_PS_UDP)) {
      s.state = State::kError;
    }
    return err;
  }
  if (int err = setup_dgram(s)) return err;
  fill_self(s);
  s.state = State::kBound;
  Runtime::get().watch();
  return 0;
}

// UDP's connect: the default destination, and the only source read from now on. Resolving
// it starts now; a send waits for the answer.
int dgram_connect(Socket& s, const sockaddr* addr) {
  PeerKey key;
  if (!peer_key(addr, sizeof(sockaddr_in6), key)) return EAFNOSUPPORT;
  if (s.state == State::kIdle) {
    if (int err = dgram_bind(s, nullptr)) return err;
  }
  if (!s.ud_qp) return EINVAL;  // its id was lost to a failed bind
  s.has_dest = true;
  s.dest = key;
  std::memcpy(&s.dest_addr, addr, key[0] == 6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
  // Datagrams from others, already queued, are dropped as a connected UDP socket would.
  for (auto it = s.rx.begin(); it != s.rx.end();) {
    DgHeader h;
    std::memcpy(&h, rx_slot(s, it->slot) + kGrhSize, sizeof h);
    if (key_of(h) == key) {
      ++it;
      continue;
    }
    post_dg_recv(s, it->slot);
    it = s.rx.erase(it);
  }
  if (!s.peers.count(key)) return start_resolve(s, key, addr);
  return 0;
}

ssize_t dgram_send(Socket& s, std::unique_lock<std::mutex>& g, const iovec* iov, int iovcnt,
                   int flags, const sockaddr* to, socklen_t tolen) {
  PeerKey key;
  if (!to) {
    if (!s.has_dest) return fail(EDESTADDRREQ);
    key = s.dest;
    to = reinterpret_cast<const sockaddr*>(&s.dest_addr);
  } else if (!peer_key(to, tolen, key)) {
    return fail(tolen < sizeof(sockaddr_in) ? EINVAL : EAFNOSUPPORT);
  }
  if (s.wr_shut) return fail(EPIPE);
  if (s.state == State::kIdle) {  // sendto on an unbound socket binds it, as UDP does
    if (int err = dgram_bind(s, nullptr)) return fail(err);
  }
  if (!s.ud_qp) return fail(EINVAL);  // its id was lost to a failed bind
  const size_t total = total_of(iov, iovcnt);
  if (total > s.max_dgram) return fail(EMSGSIZE);
  const bool dontwait = s.nonblock || (flags & MSG_DONTWAIT);
  for (;;) {
    if (s.closed) return fail(EBADF);
    auto it = s.peers.find(key);
    if (it == s.peers.end()) {
      if (int err = start_resolve(s, key, to)) return fail(err);
      continue;
    }
    if (it->second.error) {  // reported once; the next send resolves again
      const int err = it->second.error;
      s.peers.erase(it);
      return fail(err);
    }
    // A new destination is waited for even without blocking: one SIDR exchange.
    if (!it->second.ah) {
      s.cv.wait(g);  // the CM event wakes it, not the CQ
      continue;
    }
    if (!can_send(s)) dgram_poll_cq(s);  // sends completed since the thread last looked
    if (!can_send(s)) {
      if (!dontwait) {
        dgram_arm(s);
        if (!can_send(s)) s.cv.wait(g);
        continue;
      }
      g.unlock();  // the thread that frees the slots needs the lock
      return would_block();
    }
    const uint32_t slot = s.free_tx.back();
    std::memcpy(tx_slot(s, slot), &s.self, sizeof s.self);
    gather(iov, 0, tx_slot(s, slot) + sizeof s.self, total);
    if (int err = post_dgram(s, slot, uint32_t(sizeof s.self + total), it->second)) {
      return fail(err);
    }
    s.free_tx.pop_back();
    return ssize_t(total);
  }
}

// One datagram per call; the part that does not fit is dropped (MSG_TRUNC in msg_flags, and
// with MSG_TRUNC in flags the datagram's real length is returned, as Linux's UDP does).
ssize_t dgram_recv(Socket& s, std::unique_lock<std::mutex>& g, const iovec* iov, int iovcnt,
                   int flags, sockaddr* from, socklen_t* fromlen, int* msg_flags) {
  const size_t room = total_of(iov, iovcnt);
  const bool dontwait = s.nonblock || (flags & MSG_DONTWAIT);
  if (s.rx.empty()) dgram_poll_cq(s);  // what arrived since the thread last looked
  while (s.rx.empty()) {
    if (s.rd_shut || s.closed) return 0;
    if (dontwait) {
      g.unlock();
      return would_block();
    }
    dgram_arm(s);
    if (s.rx.empty()) s.cv.wait(g);
  }
  const Rx rx = s.rx.front();
  const uint8_t* at = rx_slot(s, rx.slot) + kGrhSize;
  DgHeader h;
  std::memcpy(&h, at, sizeof h);
  const size_t n = std::min<size_t>(room, rx.len);
  scatter(iov, 0, at + sizeof h, n);
  if (from && fromlen) {
    sockaddr_storage a;
    const socklen_t alen = sockaddr_from(h, a);
    std::memcpy(from, &a, std::min(alen, *fromlen));
    *fromlen = alen;
  }
  if (msg_flags && n < rx.len) *msg_flags |= MSG_TRUNC;
  if (!(flags & MSG_PEEK)) {
    s.rx.pop_front();
    post_dg_recv(s, rx.slot);
  }
  return (flags & MSG_TRUNC) ? ssize_t(rx.len) : ssize_t(n);
}

// As a kernel UDP socket: writable while a send slot is free (an unbound socket too),
// readable with a datagram queued or after SHUT_RD.
short dgram_ready(const Socket& s) {
  if (s.state == State::kIdle) return POLLOUT;
  short ev = 0;
  if (!s.rx.empty() || s.rd_shut) ev |= POLLIN;
  if (can_send(s) || s.wr_shut) ev |= POLLOUT;
  if (s.so_error) ev |= POLLERR;
  return ev;
}

void dgram_poll_cq(Socket& s) {
  if (s.closed || !s.cq) return;
  ibv_wc wcs[32];
  int n;
  while ((n = ibv_poll_cq(s.cq, 32, wcs)) > 0) {
    for (int i = 0; i < n; ++i) {
      const ibv_wc& wc = wcs[i];
      if (wc.opcode & IBV_WC_RECV) {
        if (wc.status == IBV_WC_SUCCESS) {
          on_dg_recv(s, wc);
        } else if (wc.status != IBV_WC_WR_FLUSH_ERR) {
          post_dg_recv(s, static_cast<uint32_t>(wc.wr_id));
        }
        continue;
      }
      --s.sq_used;
      s.free_tx.push_back(static_cast<uint32_t>(wc.wr_id));  // a failed send is a lost datagram
    }
  }
}

// The CQ raises an event only when a thread is about to wait (the rsocket thread then polls
// it and wakes the waiters, who arm it again if they wait on): a program that keeps calling
// polls the CQ itself, and no event wakes the rsocket thread per datagram.
void dgram_arm(Socket& s) {
  if (!s.armed && s.cq && !s.closed) {
    ibv_req_notify_cq(s.cq, 0);
    s.armed = true;
  }
  dgram_poll_cq(s);  // what came before the CQ was armed raised no event
}

void dgram_teardown(Socket& s) {
  for (auto& [key, peer] : s.peers) {
    if (peer.resolver) rdma_destroy_id(peer.resolver);
    if (peer.ah) ibv_destroy_ah(peer.ah);
  }
  s.peers.clear();
  if (s.ud_qp) ibv_destroy_qp(s.ud_qp);
  s.ud_qp = nullptr;
}

}  // namespace vrnic::rdmacm::rs
