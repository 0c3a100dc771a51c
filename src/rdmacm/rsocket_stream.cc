// The rsocket calls that make, connect and end sockets: rsocket, rbind, rlisten, raccept,
// rconnect, rshutdown, rclose, rgetpeername, rgetsockname.
#include <rdma/rsocket.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "rdmacm/rsocket.h"
#include "rdmacm/state.h"

using namespace vrnic::rdmacm;
using namespace vrnic::rdmacm::rs;

namespace {

constexpr int kResolveMs = 2000;
constexpr auto kCloseDrain = std::chrono::seconds(10);  // rclose waits for the peer's ACKs
constexpr auto kDgramDrain = std::chrono::seconds(1);

bool connected_or_failed(const Socket& s) {
  return s.state == State::kConnected || s.state == State::kError;
}

// Returns the socket error of a failed connection (reported once, as SO_ERROR would be).
int take_error(Socket& s) {
  const int err = s.so_error ? s.so_error : s.conn_error;
  s.so_error = 0;
  return err ? err : ECONNABORTED;
}

int copy_addr(const sockaddr* sa, sockaddr* addr, socklen_t* len) {
  if (!addr || !len) return fail(EFAULT);
  const socklen_t have = addr_len(sa->sa_family);
  std::memcpy(addr, sa, std::min(have, *len));
  *len = have;
  return 0;
}

// The socket of a request: buffers and QP (sized as the listener's, as rdma-core inherits
// them), the request's connection data taken in, this side's sent back in the REP.
Ptr accepted_socket(Pending req, const Sizes& sizes, bool nonblock) {
  Ptr s = Runtime::get().create(SOCK_STREAM);
  if (!s) return nullptr;
  std::unique_lock<std::mutex> g(s->mu);
  s->id = req.id;
  s->nonblock = nonblock;
  s->sizes = sizes;
  req.id->context = serial_ctx(s->serial);
  int err = setup_conn(*s);
  if (!err && !start_conn(*s, req.private_data)) err = EPROTO;
  const auto mine = err ? std::array<uint8_t, kConnDataSize>{} : conn_data_of(*s);
  rdma_conn_param p;
  conn_param(p, mine.data());
  if (!err && rdma_accept(req.id, &p)) err = errno;
  if (err) {
    g.unlock();
    rdma_reject(req.id, nullptr, 0);
    Runtime::get().remove(s);
    errno = err;
    return nullptr;
  }
  s->state = State::kAccepting;
  Runtime::get().watch();
  s->cv.wait(g, [&] { return connected_or_failed(*s); });
  return s;
}

// Blocks until the control message the closed halves call for is posted (or the connection
// ends); `until`: how long at most.
void close_ctrl(Socket& s, std::unique_lock<std::mutex>& g, Clock::time_point until) {
  while (send_close_ctrl(s) == EAGAIN && s.state == State::kConnected) {
    arm_cq(s);  // the control window frees as sends complete
    if (send_close_ctrl(s) != EAGAIN) return;
    if (s.cv.wait_until(g, until) == std::cv_status::timeout) return;
  }
}

}  // namespace

RDMACM_EXPORT int rsocket(int domain, int type, int protocol) {
  if (domain != AF_INET && domain != AF_INET6) return fail(EAFNOSUPPORT);
  const int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
  const bool stream = base == SOCK_STREAM && (!protocol || protocol == IPPROTO_TCP);
  const bool dgram = base == SOCK_DGRAM && (!protocol || protocol == IPPROTO_UDP);
  if (!stream && !dgram) return fail(EPROTONOSUPPORT);
  Runtime& rt = Runtime::get();
  Ptr s = rt.create(base);
  if (!s) return -1;
  s->domain = domain;
  if (rdma_create_id(rt.channel(), &s->id, serial_ctx(s->serial),
                     dgram ? RDMA_PS_UDP : RDMA_PS_TCP)) {
    const int err = errno;
    rt.remove(s);
    return fail(err);
  }
  s->nonblock = type & SOCK_NONBLOCK;
  return s->fd;
}

RDMACM_EXPORT int rbind(int fd, const sockaddr* addr, socklen_t len) {
  Ptr s = Runtime::get().find(fd);
  if (!s) return fail(EBADF);
  if (!addr || len < sizeof(sockaddr_in)) return fail(EINVAL);
  std::lock_guard<std::mutex> g(s->mu);
  if (s->state != State::kIdle) return fail(EINVAL);
  if (s->type == SOCK_DGRAM) {
    const int err = dgram_bind(*s, addr);
    return err ? fail(err) : 0;
  }
  if (rdma_bind_addr(s->id, const_cast<sockaddr*>(addr))) return -1;
  s->state = State::kBound;
  return 0;
}

RDMACM_EXPORT int rlisten(int fd, int backlog) {
  Ptr s = Runtime::get().find(fd);
  if (!s) return fail(EBADF);
  std::lock_guard<std::mutex> g(s->mu);
  if (s->type == SOCK_DGRAM) return fail(EOPNOTSUPP);
  if (s->state == State::kListening) return 0;
  if (s->state != State::kBound) return fail(EINVAL);
  if (rdma_listen(s->id, backlog)) return -1;
  s->state = State::kListening;
  return 0;
}

RDMACM_EXPORT int raccept(int fd, sockaddr* addr, socklen_t* len) {
  Ptr l = Runtime::get().find(fd);
  if (!l) return fail(EBADF);
  Pending req;
  Sizes sizes;
  bool nonblock;
  {
    std::unique_lock<std::mutex> g(l->mu);
    if (l->type == SOCK_DGRAM) return fail(EOPNOTSUPP);
    if (l->state != State::kListening) return fail(EINVAL);
    while (l->pending.empty()) {
      if (l->nonblock) return fail(EAGAIN);
      l->cv.wait(g);
      if (l->closed) return fail(EBADF);
    }
    req = std::move(l->pending.front());
    l->pending.pop_front();
    sizes = l->sizes;
    nonblock = l->nonblock;
  }
  Ptr s = accepted_socket(std::move(req), sizes, nonblock);
  if (!s) return -1;
  std::lock_guard<std::mutex> g(s->mu);
  if (s->state == State::kError) {
    const int err = take_error(*s);
    s->closed = true;
    Runtime::get().remove(s);
    return fail(err);
  }
  if (addr && copy_addr(rdma_get_peer_addr(s->id), addr, len)) return -1;
  return s->fd;
}

RDMACM_EXPORT int rconnect(int fd, const sockaddr* addr, socklen_t len) {
  Ptr s = Runtime::get().find(fd);
  if (!s) return fail(EBADF);
  if (!addr || len < sizeof(sockaddr_in)) return fail(EINVAL);
  std::unique_lock<std::mutex> g(s->mu);
  if (s->type == SOCK_DGRAM) {
    const int err = dgram_connect(*s, addr);
    return err ? fail(err) : 0;
  }
  switch (s->state) {
    case State::kIdle:
    case State::kBound: break;
    case State::kConnected: return fail(EISCONN);
    case State::kResolving:
    case State::kConnecting: return fail(EALREADY);
    default: return fail(EINVAL);
  }
  sockaddr* src = s->state == State::kBound ? &s->id->route.addr.src_addr : nullptr;
  if (rdma_resolve_addr(s->id, src, const_cast<sockaddr*>(addr), kResolveMs)) return -1;
  s->state = State::kResolving;
  if (s->nonblock) return fail(EINPROGRESS);
  s->cv.wait(g, [&] { return connected_or_failed(*s); });
  return s->state == State::kConnected ? 0 : fail(take_error(*s));
}

// SHUT_WR sends SHUTDOWN after everything written so far (the peer reads end of stream);
// both halves closed send DISCONNECT.
RDMACM_EXPORT int rshutdown(int fd, int how) {
  Ptr s = Runtime::get().find(fd);
  if (!s) return fail(EBADF);
  if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) return fail(EINVAL);
  std::unique_lock<std::mutex> g(s->mu);
  if (s->type == SOCK_DGRAM && !s->has_dest) return fail(ENOTCONN);  // as UDP
  if (s->type == SOCK_DGRAM) {
    s->rd_shut |= how != SHUT_WR;
    s->wr_shut |= how != SHUT_RD;
    s->wake();
    return 0;
  }
  if (s->state != State::kConnected) return fail(ENOTCONN);
  if (how != SHUT_WR) s->rd_shut = true;
  if (how != SHUT_RD) s->wr_shut = true;
  close_ctrl(*s, g, Clock::now() + kCloseDrain);
  s->wake();
  return 0;
}

// Nothing written before rclose is lost: DISCONNECT follows the data, and the connection is
// only torn down once the peer's NIC has acknowledged every write.
RDMACM_EXPORT int rclose(int fd) {
  Runtime& rt = Runtime::get();
  Ptr s = rt.find(fd);
  if (!s) return fail(EBADF);
  {
    std::unique_lock<std::mutex> g(s->mu);
    // Datagrams posted leave before the QP goes (a send completes once it is on the wire).
    const auto drain_end = Clock::now() + kDgramDrain;
    while (s->type == SOCK_DGRAM && s->sq_used && Clock::now() < drain_end) {
      arm_cq(*s);
      if (s->sq_used) s->cv.wait_until(g, drain_end);
    }
    const auto live = [&] { return s->state == State::kConnected && !s->peer_gone; };
    const auto until = Clock::now() + kCloseDrain;
    if (s->type == SOCK_STREAM && live()) {
      s->rd_shut = s->wr_shut = true;
      close_ctrl(*s, g, until);
    }
    const auto drained = [&] { return s->sq_used == 0 || !live(); };
    while (!drained() && Clock::now() < until) {
      arm_cq(*s);  // the sends' completions
      if (!drained()) s->cv.wait_until(g, until);
    }
    if (s->state == State::kConnected || s->state == State::kAccepting) rdma_disconnect(s->id);
    s->closed = true;
    s->cv.notify_all();
  }
  rt.remove(s);
  return 0;
}

RDMACM_EXPORT int rgetpeername(int fd, sockaddr* addr, socklen_t* len) {
  Ptr s = Runtime::get().find(fd);
  if (!s) return fail(EBADF);
  std::lock_guard<std::mutex> g(s->mu);
  if (s->type == SOCK_DGRAM) {
    if (!s->has_dest) return fail(ENOTCONN);
    return copy_addr(reinterpret_cast<const sockaddr*>(&s->dest_addr), addr, len);
  }
  if (s->state != State::kConnected) return fail(ENOTCONN);
  return copy_addr(rdma_get_peer_addr(s->id), addr, len);
}

RDMACM_EXPORT int rgetsockname(int fd, sockaddr* addr, socklen_t* len) {
  Ptr s = Runtime::get().find(fd);
  if (!s) return fail(EBADF);
  std::lock_guard<std::mutex> g(s->mu);
  if (!s->id) return fail(EINVAL);  // a datagram socket whose id a failed bind lost
  return copy_addr(rdma_get_local_addr(s->id), addr, len);
}
