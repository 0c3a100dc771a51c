// Datagram rsockets: the UD QP and its slots, binding (a kernel UDP socket and a CM id on the
// address), and the datapath: each datagram a UD SEND of rdma-core's ds_header and the
// payload, read whole or cut to the reader's buffer as UDP's recvmsg does.
#include <arpa/inet.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "rdmacm/rsocket.h"
#include "rdmacm/state.h"

namespace vrnic::rdmacm::rs {
namespace {

uint8_t* rx_slot(const Socket& s, uint32_t slot) { return s.rbuf + size_t(slot) * kDgSlotSize; }
uint8_t* tx_slot(const Socket& s, uint32_t slot) { return s.tx_buf + size_t(slot) * kDsMaxMessage; }

// A receive slot: the 40-byte GRH, then up to 2048 bytes (header and payload), as rdma-core
// posts its receives.
void post_dg_recv(Socket& s, uint32_t slot) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(rx_slot(s, slot)), kDgSlotSize, s.rbuf_mr->lkey};
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

int setup_rings(Socket& s, ibv_context* ctx, ibv_pd* pd) {
  s.rbuf = alloc_pages(size_t(kDgRxSlots) * kDgSlotSize);
  s.tx_buf = alloc_pages(size_t(kDgTxSlots) * kDsMaxMessage);
  if (!s.rbuf || !s.tx_buf) return ENOMEM;
  s.rbuf_mr = ibv_reg_mr(pd, s.rbuf, size_t(kDgRxSlots) * kDgSlotSize, IBV_ACCESS_LOCAL_WRITE);
  s.tx_mr = ibv_reg_mr(pd, s.tx_buf, size_t(kDgTxSlots) * kDsMaxMessage, 0);
  if (!s.rbuf_mr || !s.tx_mr) return errno ? errno : ENOMEM;
  return setup_cq(s, ctx, kDgRxSlots + kDgTxSlots);
}

int setup_dgram(Socket& s) {
  ibv_context* ctx = Service::get().context();
  ibv_pd* pd = Service::get().default_pd();
  if (int err = setup_rings(s, ctx, pd)) return err;
  ibv_qp_init_attr qa{};
  qa.send_cq = qa.recv_cq = s.cq;
  qa.qp_type = IBV_QPT_UD;
  qa.sq_sig_all = 1;
  qa.cap.max_send_wr = kDgTxSlots;
  qa.cap.max_recv_wr = kDgRxSlots;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  s.ud_qp = ibv_create_qp(pd, &qa);
  if (!s.ud_qp) return errno;
  if (int err = ud_qp_ready(s.ud_qp)) return err;
  s.self_ah = ah_to(s, reinterpret_cast<const sockaddr*>(&s.self));
  if (!s.self_ah) return errno ? errno : EHOSTUNREACH;
  ibv_port_attr pa{};
  ibv_query_port(ctx, 1, &pa);
  const uint32_t mtu = std::min<uint32_t>(128u << pa.active_mtu, kDsMaxMessage);  // IBV_MTU_256 = 1
  s.max_dgram = mtu - uint32_t(s.self.ss_family == AF_INET6 ? kDsHeaderV6 : kDsHeaderV4);
  for (uint32_t i = 0; i < kDgRxSlots; ++i) post_dg_recv(s, i);
  for (uint32_t i = kDgTxSlots; i > 0; --i) s.free_tx.push_back(i - 1);
  return 0;
}

bool is_wildcard(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr == htonl(INADDR_ANY);
  }
  const auto& a = reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr;
  return IN6_IS_ADDR_UNSPECIFIED(&a);
}

// The kernel UDP socket on the address (the wildcard stands for the device's: each vrnic
// device is a host of its own), made with the system call so that librspreload.so, which
// turns the program's UDP sockets into rsockets, never sees it. `addr` gets its port.
int open_udp(Socket& s, sockaddr_storage& addr) {
  s.udp_fd = int(syscall(SYS_socket, addr.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (s.udp_fd < 0) return errno;
  socklen_t len = addr_len(addr.ss_family);
  if (bind(s.udp_fd, reinterpret_cast<sockaddr*>(&addr), len) ||
      getsockname(s.udp_fd, reinterpret_cast<sockaddr*>(&addr), &len)) {
    const int err = errno;
    close(s.udp_fd);
    s.udp_fd = -1;
    return err;
  }
  return 0;
}

PeerKey key_of(const sockaddr_storage& a) {
  PeerKey k{};
  peer_key(reinterpret_cast<const sockaddr*>(&a), sizeof a, k);
  return k;
}

// A datagram that arrived: kept if its header is valid (and, on a connected socket, if it
// comes from the peer, as a connected UDP socket filters); otherwise its slot goes back.
void on_dg_recv(Socket& s, const ibv_wc& wc) {
  const auto slot = static_cast<uint32_t>(wc.wr_id);
  sockaddr_storage from;
  size_t header = 0;
  if (wc.byte_len >= kGrhSize) {
    header = get_ds_header({rx_slot(s, slot) + kGrhSize, wc.byte_len - kGrhSize}, from);
  }
  if (!header || (s.has_dest && key_of(from) != s.dest) || s.rd_shut) {
    post_dg_recv(s, slot);
    return;
  }
  s.rx.push_back({slot, uint32_t(header), wc.byte_len - kGrhSize - uint32_t(header)});
}

bool slot_free(const Socket& s) { return !s.free_tx.empty() && s.sq_used < kDgTxSlots; }

}  // namespace

int dgram_slot(Socket& s) {
  if (!slot_free(s)) return -1;
  const uint32_t slot = s.free_tx.back();
  s.free_tx.pop_back();
  return int(slot);
}

int post_dgram(Socket& s, uint32_t slot, uint32_t len, ibv_ah* ah, uint32_t qpn) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(tx_slot(s, slot)), len, s.tx_mr->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = slot;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.wr.ud.ah = ah;
  wr.wr.ud.remote_qpn = qpn;
  wr.wr.ud.remote_qkey = kUdpQkey;
  if (ibv_post_send(s.ud_qp, &wr, &bad)) {
    s.free_tx.push_back(slot);
    return errno ? errno : EIO;
  }
  ++s.sq_used;
  return 0;
}

uint8_t* dgram_tx(const Socket& s, uint32_t slot) { return tx_slot(s, slot); }

// Binds the kernel UDP socket (a null address: the device's, a free port), then a CM id of
// the UDP port space on the address the program gave and the same port (as rdma-core
// does), then makes the QP. sin_port and sin6_port lie at the same place.
int dgram_bind(Socket& s, const sockaddr* addr) {
  sockaddr_storage at{}, given{};
  if (addr) {
    std::memcpy(&given, addr, addr_len(addr->sa_family));
  } else {
    cm::Endpoint e = Service::get().address();
    e.port = 0;
    sockaddr_of(e, given);
  }
  at = given;
  if (is_wildcard(reinterpret_cast<sockaddr*>(&given))) {
    cm::Endpoint e = Service::get().address();
    e.port = ntohs(reinterpret_cast<sockaddr_in*>(&given)->sin_port);
    sockaddr_of(e, at);
  }
  if (int err = open_udp(s, at)) return err;
  reinterpret_cast<sockaddr_in*>(&given)->sin_port = reinterpret_cast<sockaddr_in*>(&at)->sin_port;
  if (rdma_bind_addr(s.id, reinterpret_cast<sockaddr*>(&given))) {
    const int err = errno;
    close(s.udp_fd);
    s.udp_fd = -1;
    return err;
  }
  s.self = at;
  if (int err = setup_dgram(s)) return err;
  s.state = State::kBound;
  Runtime::get().watch();
  return 0;
}

// UDP's connect: the default destination, and the only source read from now on (the kernel
// socket is connected too, so it takes resolution datagrams from the peer only and reports
// its ICMP errors).
int dgram_connect(Socket& s, const sockaddr* addr) {
  PeerKey key;
  if (!peer_key(addr, sizeof(sockaddr_in6), key)) return EAFNOSUPPORT;
  if (s.state == State::kIdle) {
    if (int err = dgram_bind(s, nullptr)) return err;
  }
  if (!s.ud_qp) return EINVAL;
  const socklen_t len = addr_len(addr->sa_family);
  if (connect(s.udp_fd, addr, len)) return errno;
  s.has_dest = true;
  s.dest = key;
  std::memcpy(&s.dest_addr, addr, len);
  Peer& p = s.peers[key];
  std::memcpy(&p.addr, addr, len);
  // Datagrams from others, already queued, are dropped as a connected UDP socket would.
  for (auto it = s.rx.begin(); it != s.rx.end();) {
    sockaddr_storage from;
    get_ds_header({rx_slot(s, it->slot) + kGrhSize, it->header}, from);
    if (key_of(from) == key) {
      ++it;
      continue;
    }
    post_dg_recv(s, it->slot);
    it = s.rx.erase(it);
  }
  return 0;
}

// Until the destination's QP is known the datagram goes over kernel UDP (the peer answers
// with its QP's number and hands the payload to its reader); after, as a UD SEND.
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
  if (const int err = s.so_error) {  // the kernel's error for the peer, reported once
    s.so_error = 0;
    return fail(err);
  }
  if (s.state == State::kIdle) {  // sendto on an unbound socket binds it, as UDP does
    if (int err = dgram_bind(s, nullptr)) return fail(err);
  }
  if (!s.ud_qp) return fail(EINVAL);  // a failed bind left it without one
  const size_t total = total_of(iov, iovcnt);
  if (total > s.max_dgram) return fail(EMSGSIZE);
  auto [it, fresh] = s.peers.try_emplace(key);
  if (fresh) std::memcpy(&it->second.addr, to, addr_len(to->sa_family));
  if (!it->second.ah) return udp_send(s, it->second, Op::kData, iov, iovcnt, flags);
  CallWait wait(s.nonblock || (flags & MSG_DONTWAIT));
  for (;;) {
    if (s.closed) return fail(EBADF);
    if (slot_free(s)) break;
    if (!wait.next(s, g)) {  // polled: sends completed since the thread last looked
      g.unlock();  // the thread that frees the slots needs the lock
      return would_block();
    }
  }
  const Peer& peer = s.peers[key];
  const auto slot = uint32_t(dgram_slot(s));
  const size_t header = put_ds_header(tx_slot(s, slot), reinterpret_cast<const sockaddr*>(&s.self));
  gather(iov, 0, tx_slot(s, slot) + header, total);
  if (int err = post_dgram(s, slot, uint32_t(header + total), peer.ah, peer.qpn)) return fail(err);
  return ssize_t(total);
}

// One datagram per call; the part that does not fit is dropped (MSG_TRUNC in msg_flags, and
// with MSG_TRUNC in flags the datagram's real length is returned, as Linux's UDP does).
ssize_t dgram_recv(Socket& s, std::unique_lock<std::mutex>& g, const iovec* iov, int iovcnt,
                   int flags, sockaddr* from, socklen_t* fromlen, int* msg_flags) {
  const size_t room = total_of(iov, iovcnt);
  CallWait wait(s.nonblock || (flags & MSG_DONTWAIT));
  if (s.rx.empty()) dgram_poll_cq(s);  // what arrived since the thread last looked
  while (s.rx.empty()) {
    if (s.rd_shut || s.closed) return 0;
    if (!wait.next(s, g)) {
      g.unlock();
      return would_block();
    }
  }
  const DgRx rx = s.rx.front();
  const uint8_t* at = rx_slot(s, rx.slot) + kGrhSize;
  const size_t n = std::min<size_t>(room, rx.len);
  scatter(iov, 0, at + rx.header, n);
  if (from && fromlen) {
    sockaddr_storage a;
    get_ds_header({at, rx.header}, a);
    const socklen_t alen = addr_len(a.ss_family);
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
  if (slot_free(s) || s.wr_shut) ev |= POLLOUT;
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

void dgram_teardown(Socket& s) {
  for (auto& [key, peer] : s.peers) {
    if (peer.ah) ibv_destroy_ah(peer.ah);
  }
  s.peers.clear();
  if (s.self_ah) ibv_destroy_ah(s.self_ah);
  s.self_ah = nullptr;
  if (s.ud_qp) ibv_destroy_qp(s.ud_qp);
  s.ud_qp = nullptr;
  if (s.udp_fd >= 0) close(s.udp_fd);
  s.udp_fd = -1;
}

}  // namespace vrnic::rdmacm::rs
