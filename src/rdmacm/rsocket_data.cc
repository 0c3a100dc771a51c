// The rsocket stream datapath: rsend / rwrite / rsendmsg … copy into the send buffer and
// RDMA-write it into the peer's receive ring as its windows and credits allow; rrecv / rread /
// rrecvmsg … copy out of this side's ring.
// Datagram sockets take the same calls into rsocket_dgram.cc.
#include <rdma/rsocket.h>

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "rdmacm/rsocket.h"
#include "rdmacm/state.h"

using namespace vrnic::rdmacm;
using namespace vrnic::rdmacm::rs;

namespace vrnic::rdmacm::rs {

size_t total_of(const iovec* iov, int n) {
  size_t t = 0;
  for (int i = 0; i < n; ++i) t += iov[i].iov_len;
  return t;
}

// Copies `len` bytes between `buf` and the iovec array at byte offset `at`.
void gather(const iovec* iov, size_t at, uint8_t* buf, size_t len) {
  for (int i = 0; len; ++i) {
    if (at >= iov[i].iov_len) {
      at -= iov[i].iov_len;
      continue;
    }
    const size_t n = std::min(len, iov[i].iov_len - at);
    std::memcpy(buf, static_cast<const uint8_t*>(iov[i].iov_base) + at, n);
    buf += n;
    len -= n;
    at = 0;
  }
}

void scatter(const iovec* iov, size_t at, const uint8_t* buf, size_t len) {
  for (int i = 0; len; ++i) {
    if (at >= iov[i].iov_len) {
      at -= iov[i].iov_len;
      continue;
    }
    const size_t n = std::min(len, iov[i].iov_len - at);
    std::memcpy(static_cast<uint8_t*>(iov[i].iov_base) + at, buf, n);
    buf += n;
    len -= n;
    at = 0;
  }
}

// Nothing to do now for a program that will call again at once: the threads that move the
// data (this library's, the device's) get the CPU first.
ssize_t would_block() {
  sched_yield();
  return fail(EAGAIN);
}

bool CallWait::next(Socket& s, std::unique_lock<std::mutex>& g) {
  if (!polled_) {
    polled_ = true;
    start_ = Clock::now();
    take_completions(s);
    return true;
  }
  if (dontwait_) return false;
  if (Clock::now() - start_ < kSpin) {
    g.unlock();  // the rsocket thread may want the socket meanwhile
    g.lock();
    take_completions(s);
    return true;
  }
  if (!armed_) {
    armed_ = true;
    arm_cq(s);
    return true;
  }
  s.cv.wait(g);
  polled_ = armed_ = false;
  return true;
}

}  // namespace vrnic::rdmacm::rs

namespace {

bool pre_connect(State st) {
  return st == State::kResolving || st == State::kConnecting || st == State::kAccepting;
}

// One data message: up to 64 KiB of what is left, within the peer's window and the send
// buffer, RDMA-written into the peer's receive ring. Returns its length, 0 or an errno < 0.
ssize_t send_piece(Socket& s, const iovec* iov, size_t at, size_t left) {
  const auto want = static_cast<uint32_t>(std::min<size_t>({left, kMaxTransfer, s.flow->window()}));
  const Chunk c = s.ring->take(want, kSendLowWater);
  if (c.length == 0) return 0;
  gather(iov, at, s.tx_buf + c.offset, c.length);
  const Write w = s.flow->data(c.length);
  if (int err = post_write(s, w, c, true, false)) return -err;
  return c.length;
}

ssize_t send_iov(int fd, const iovec* iov, int iovcnt, int flags, const sockaddr* to = nullptr,
                 socklen_t tolen = 0) {
  Ptr p = Runtime::get().find(fd);
  if (!p) return fail(EBADF);
  Socket& s = *p;
  if (s.type == SOCK_DGRAM) {
    std::unique_lock<std::mutex> g(s.mu);
    return dgram_send(s, g, iov, iovcnt, flags, to, tolen);
  }
  const size_t total = total_of(iov, iovcnt);
  CallWait wait(s.nonblock || (flags & MSG_DONTWAIT));
  std::unique_lock<std::mutex> g(s.mu);
  size_t done = 0;
  for (;;) {
    if (s.state == State::kError) return done ? ssize_t(done) : fail(s.conn_error);
    // rdma-core's rsend: ECONNRESET once the connection is no longer writable; after this
    // side's own SHUT_WR vrnic sends nothing more and says EPIPE, as a kernel socket.
    if (s.peer_gone) return done ? ssize_t(done) : fail(ECONNRESET);
    if (s.wr_shut) return done ? ssize_t(done) : fail(EPIPE);
    if (s.state != State::kConnected && !pre_connect(s.state)) return fail(ENOTCONN);
    // I/O maps opened before this call reach the peer before its data.
    const int maps = s.state == State::kConnected ? announce_maps(s) : EAGAIN;
    if (maps && maps != EAGAIN) return done ? ssize_t(done) : fail(maps);
    const bool ready = maps == 0;
    if (ready && done == total) return ssize_t(done);
    if (ready && can_send(s)) {
      const ssize_t n = send_piece(s, iov, done, total - done);
      if (n < 0) return done ? ssize_t(done) : fail(int(-n));
      done += size_t(n);
      continue;
    }
    if (!wait.next(s, g)) return done ? ssize_t(done) : would_block();
  }
}

// Copies up to `want` bytes of the stream out of the receive ring; what was taken is handed
// back to the peer in the credit updates due.
size_t take(Socket& s, const iovec* iov, size_t at, size_t want, bool peek) {
  size_t got = 0;
  for (const Chunk& c : s.flow->chunks(want)) {
    scatter(iov, at + got, s.rbuf + c.offset, c.length);
    got += c.length;
  }
  if (!peek) {
    s.flow->consume(got);
    pump(s);
  }
  return got;
}

ssize_t recv_iov(int fd, const iovec* iov, int iovcnt, int flags, sockaddr* from = nullptr,
                 socklen_t* fromlen = nullptr, int* msg_flags = nullptr) {
  Ptr p = Runtime::get().find(fd);
  if (!p) return fail(EBADF);
  Socket& s = *p;
  if (s.type == SOCK_DGRAM) {
    std::unique_lock<std::mutex> g(s.mu);
    return dgram_recv(s, g, iov, iovcnt, flags, from, fromlen, msg_flags);
  }
  const size_t total = total_of(iov, iovcnt);
  CallWait wait(s.nonblock || (flags & MSG_DONTWAIT));
  const bool waitall = (flags & MSG_WAITALL) && !(flags & MSG_PEEK);
  std::unique_lock<std::mutex> g(s.mu);
  if (s.state != State::kConnected && s.state != State::kError && !pre_connect(s.state)) {
    return fail(ENOTCONN);
  }
  size_t done = 0;
  for (;;) {
    if (s.flow && s.flow->has_data() && total > done) {
      done += take(s, iov, done, total - done, flags & MSG_PEEK);
      if (done == total || !waitall) return ssize_t(done);
      continue;
    }
    if (total == 0) return 0;
    if (s.conn_error && s.state == State::kError) {
      return done ? ssize_t(done) : fail(s.conn_error);
    }
    if (s.peer_fin || s.rd_shut) return ssize_t(done);  // end of stream
    if (!wait.next(s, g)) return done ? ssize_t(done) : would_block();
  }
}

}  // namespace

RDMACM_EXPORT ssize_t rsend(int fd, const void* buf, size_t len, int flags) {
  iovec v{const_cast<void*>(buf), len};
  return send_iov(fd, &v, 1, flags);
}

// A connected stream ignores the address, as TCP does; a datagram goes to it.
RDMACM_EXPORT ssize_t rsendto(int fd, const void* buf, size_t len, int flags, const sockaddr* to,
                              socklen_t tolen) {
  iovec v{const_cast<void*>(buf), len};
  return send_iov(fd, &v, 1, flags, to, tolen);
}

RDMACM_EXPORT ssize_t rsendmsg(int fd, const msghdr* msg, int flags) {
  if (!msg) return fail(EFAULT);
  return send_iov(fd, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags,
                  static_cast<const sockaddr*>(msg->msg_name), msg->msg_namelen);
}

RDMACM_EXPORT ssize_t rwrite(int fd, const void* buf, size_t len) { return rsend(fd, buf, len, 0); }

RDMACM_EXPORT ssize_t rwritev(int fd, const iovec* iov, int iovcnt) {
  return send_iov(fd, iov, iovcnt, 0);
}

RDMACM_EXPORT ssize_t rrecv(int fd, void* buf, size_t len, int flags) {
  iovec v{buf, len};
  return recv_iov(fd, &v, 1, flags);
}

// A stream reports its peer; a datagram socket the datagram's sender.
RDMACM_EXPORT ssize_t rrecvfrom(int fd, void* buf, size_t len, int flags, sockaddr* from,
                                socklen_t* fromlen) {
  iovec v{buf, len};
  Ptr p = Runtime::get().find(fd);
  if (p && p->type == SOCK_DGRAM) return recv_iov(fd, &v, 1, flags, from, fromlen);
  const ssize_t n = recv_iov(fd, &v, 1, flags);
  if (n >= 0 && from && fromlen) rgetpeername(fd, from, fromlen);
  return n;
}

RDMACM_EXPORT ssize_t rrecvmsg(int fd, msghdr* msg, int flags) {
  if (!msg) return fail(EFAULT);
  msg->msg_flags = 0;
  msg->msg_controllen = 0;
  auto* from = static_cast<sockaddr*>(msg->msg_name);
  return recv_iov(fd, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags, from,
                  from ? &msg->msg_namelen : nullptr, &msg->msg_flags);
}

RDMACM_EXPORT ssize_t rread(int fd, void* buf, size_t len) { return rrecv(fd, buf, len, 0); }

RDMACM_EXPORT ssize_t rreadv(int fd, const iovec* iov, int iovcnt) {
  return recv_iov(fd, iov, iovcnt, 0);
}
