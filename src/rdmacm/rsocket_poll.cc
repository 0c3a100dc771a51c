// rpoll and rselect over a mix of rsockets and ordinary fds, and the option calls:
// rsetsockopt, rgetsockopt, rfcntl.
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <chrono>
#include <cstdarg>
#include <cstring>

#include "rdmacm/rsocket.h"
#include "rdmacm/state.h"

using namespace vrnic::rdmacm;
using namespace vrnic::rdmacm::rs;

namespace {

constexpr auto kBusyPoll = std::chrono::milliseconds(1);

// What poll would report for the socket now (as a kernel TCP socket does: an unconnected one
// is writable and hung up; a failed connect is writable with an error).
// `arm`: the caller will sleep unless something is ready (a datagram socket's CQ must then
// raise an event).
short ready_events(Socket& s, bool arm) {
  std::lock_guard<std::mutex> g(s.mu);
  if (s.type == SOCK_DGRAM) {
    if (arm) {
      arm_cq(s);
    } else {
      dgram_poll_cq(s);  // datagrams that arrived since the thread last looked
    }
    return dgram_ready(s);
  }
  switch (s.state) {
    case State::kListening: return s.pending.empty() ? 0 : POLLIN;
    case State::kResolving:
    case State::kConnecting:
    case State::kAccepting: return 0;
    case State::kError: return POLLIN | POLLOUT | POLLERR | POLLHUP;
    case State::kConnected: break;
    default: return POLLOUT | POLLHUP;
  }
  // The completions that came since the thread last looked, taken here (as rdma-core's
  // rpoll does).
  if (arm) {
    arm_cq(s);
  } else {
    poll_cq(s);
  }
  short ev = 0;
  if ((s.flow && s.flow->has_data()) || s.peer_fin || s.rd_shut) ev |= POLLIN;
  if (s.peer_fin) ev |= POLLRDHUP;
  if (can_send(s) || s.wr_shut || s.peer_gone) ev |= POLLOUT;
  // The connection is over (the peer's DISCONNECT, its SHUTDOWN after ours, the CM's
  // DISCONNECTED: rdma-core's rs_disconnected): POLLHUP, as its rs_poll_rs reports it, but
  // only once what arrived before has been read (or this side's writing is shut too).
  // rdma-core reports it with data still unread, and `rstream -T a`, which ends on any
  // POLLHUP, then fails at the end of a good run whenever the peer's DISCONNECT overtakes its
  // last read. A peer's SHUTDOWN alone ends only the reading: POLLIN and POLLRDHUP.
  const bool unread = s.flow && s.flow->has_data();
  if (s.peer_gone && (s.wr_shut || !unread)) ev |= POLLHUP;
  return ev;
}

void drain(int fd) {
  uint64_t v;
  (void)!read(fd, &v, sizeof v);
}

// Rounded up, as poll's timeout: a part of a millisecond left is still waited for (rounded
// down, rpoll(…, 1) would give up after one look).
int remaining_ms(std::chrono::steady_clock::time_point deadline, int timeout) {
  if (timeout < 0) return -1;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

}  // namespace

// Each round: clear the rsockets' eventfds, read their state, then poll everything (without
// waiting if an rsocket is ready). A change after the state was read writes its eventfd, so
// the poll wakes for it. With an rsocket in the set the first kBusyPoll are spent polling
// (as Linux's SO_BUSY_POLL): reading a socket's state polls its CQ, which receives the
// device's packets in this thread, so a reply is seen without waking the device's and the
// rsocket thread in turn.
RDMACM_EXPORT int rpoll(pollfd* fds, nfds_t nfds, int timeout) {
  if (!fds && nfds) return fail(EFAULT);
  std::vector<Ptr> socks(nfds);
  bool any = false;
  for (nfds_t i = 0; i < nfds; ++i) {
    socks[i] = Runtime::get().find(fds[i].fd);
    any = any || socks[i];
  }
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::milliseconds(timeout);
  std::vector<pollfd> os(fds, fds + nfds);
  const auto scan = [&](bool arm) {
    int ready = 0;
    for (nfds_t i = 0; i < nfds; ++i) {
      if (!socks[i]) continue;
      drain(socks[i]->fd);
      const short mask = fds[i].events | POLLERR | POLLHUP;
      fds[i].revents = ready_events(*socks[i], arm) & mask;
      os[i].events = POLLIN;
      ready += fds[i].revents != 0;
    }
    return ready;
  };
  for (;;) {
    int ready = scan(false);
    int wait = ready ? 0 : remaining_ms(deadline, timeout);
    const bool busy = wait != 0 && any && std::chrono::steady_clock::now() < start + kBusyPoll;
    if (wait != 0 && !busy && any && (ready = scan(true))) wait = 0;
    const int n = poll(os.data(), nfds, busy ? 0 : wait);
    if (n < 0) return -1;
    for (nfds_t i = 0; i < nfds; ++i) {
      if (socks[i]) continue;
      fds[i].revents = os[i].revents;
      ready += os[i].revents != 0;
    }
    if (ready || wait == 0) return ready;
    if (busy) sched_yield();
  }
}

RDMACM_EXPORT int rselect(int nfds, fd_set* rd, fd_set* wr, fd_set* ex, timeval* tv) {
  if (nfds < 0 || nfds > FD_SETSIZE) return fail(EINVAL);
  std::vector<pollfd> fds;
  for (int fd = 0; fd < nfds; ++fd) {
    short ev = 0;
    if (rd && FD_ISSET(fd, rd)) ev |= POLLIN;
    if (wr && FD_ISSET(fd, wr)) ev |= POLLOUT;
    if (ev || (ex && FD_ISSET(fd, ex))) fds.push_back({fd, ev, 0});
  }
  const int timeout = tv ? static_cast<int>(tv->tv_sec * 1000 + tv->tv_usec / 1000) : -1;
  const int n = rpoll(fds.data(), fds.size(), timeout);
  if (n < 0) return -1;
  if (rd) FD_ZERO(rd);
  if (wr) FD_ZERO(wr);
  if (ex) FD_ZERO(ex);
  int count = 0;
  for (const pollfd& p : fds) {
    if (rd && (p.revents & (POLLIN | POLLHUP | POLLERR))) FD_SET(p.fd, rd), ++count;
    if (wr && (p.revents & (POLLOUT | POLLERR))) FD_SET(p.fd, wr), ++count;
    if (ex && (p.revents & POLLPRI)) FD_SET(p.fd, ex), ++count;
  }
  return count;
}

namespace {

int* int_option(Socket& s, int level, int name) {
  if (level == SOL_SOCKET) {
    switch (name) {
      case SO_REUSEADDR: return &s.reuseaddr;
      case SO_KEEPALIVE: return &s.keepalive;
      case SO_SNDBUF: return &s.sizes.sndbuf;
      case SO_RCVBUF: return &s.sizes.rcvbuf;
    }
  } else if (level == IPPROTO_TCP) {
    switch (name) {
      case TCP_NODELAY: return &s.nodelay;
      case TCP_KEEPIDLE: return &s.keepidle;
    }
  } else if (level == SOL_RDMA) {
    switch (name) {
      case RDMA_SQSIZE: return &s.sizes.sqsize;
      case RDMA_RQSIZE: return &s.sizes.rqsize;
      case RDMA_INLINE: return &s.sizes.inline_size;
      case RDMA_IOMAPSIZE: return &s.sizes.iomapsize;
    }
  }
  return nullptr;
}

}  // namespace

// Buffer sizes as rdma-core keeps them (SO_SNDBUF / SO_RCVBUF twice the value given, as
// Linux does); the SOL_RDMA sizes only before connecting (EINVAL after). SO_KEEPALIVE starts
// the keepalive writes of a connected socket, every TCP_KEEPIDLE seconds.
RDMACM_EXPORT int rsetsockopt(int fd, int level, int name, const void* val, socklen_t len) {
  Ptr s = Runtime::get().find(fd);
  if (!s) return fail(EBADF);
  if (!val) return fail(EFAULT);
  std::lock_guard<std::mutex> g(s->mu);
  if (level == SOL_RDMA && name == RDMA_ROUTE) return 0;  // the route comes from the IP route
  if (level == SOL_SOCKET && name == SO_LINGER) {
    if (len < sizeof(linger)) return fail(EINVAL);
    std::memcpy(&s->lin, val, sizeof(linger));
    return 0;
  }
  int* opt = int_option(*s, level, name);
  if (!opt) return fail(ENOPROTOOPT);
  if (len < sizeof(int)) return fail(EINVAL);
  int v;
  std::memcpy(&v, val, sizeof v);
  if (level == SOL_RDMA && (s->state >= State::kResolving || s->ud_qp)) return fail(EINVAL);
  if (level == IPPROTO_TCP && name == TCP_KEEPIDLE && v <= 0) return fail(EINVAL);
  if (level == SOL_SOCKET && (name == SO_SNDBUF || name == SO_RCVBUF)) {
    v = std::clamp(v, 0, INT_MAX / 2) * 2;
  }
  *opt = v;
  if (level == SOL_SOCKET && name == SO_REUSEADDR && s->id) {
    int on = v != 0;
    rdma_set_option(s->id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &on, sizeof on);
  }
  const bool keepalive = (level == SOL_SOCKET && name == SO_KEEPALIVE) ||
                         (level == IPPROTO_TCP && name == TCP_KEEPIDLE);
  if (keepalive) {
    s->next_keepalive = Clock::now() + std::chrono::seconds(s->keepidle);
    Runtime::get().watch();
  }
  return 0;
}

RDMACM_EXPORT int rgetsockopt(int fd, int level, int name, void* val, socklen_t* len) {
  Ptr s = Runtime::get().find(fd);
  if (!s) return fail(EBADF);
  if (!val || !len) return fail(EFAULT);
  std::lock_guard<std::mutex> g(s->mu);
  int v = 0;
  if (level == SOL_SOCKET && name == SO_LINGER) {
    *len = std::min<socklen_t>(*len, sizeof(linger));
    std::memcpy(val, &s->lin, *len);
    return 0;
  }
  if (level == SOL_SOCKET && name == SO_ERROR) {
    v = s->so_error;
    s->so_error = 0;
  } else if (level == SOL_SOCKET && name == SO_TYPE) {
    v = s->type;
  } else if (int* opt = int_option(*s, level, name)) {
    v = *opt;
  } else {
    return fail(ENOPROTOOPT);
  }
  *len = std::min<socklen_t>(*len, sizeof v);
  std::memcpy(val, &v, *len);
  return 0;
}

RDMACM_EXPORT int rfcntl(int fd, int cmd, ...) {
  Ptr s = Runtime::get().find(fd);
  if (!s) return fail(EBADF);
  std::lock_guard<std::mutex> g(s->mu);
  switch (cmd) {
    case F_GETFL: return O_RDWR | (s->nonblock ? O_NONBLOCK : 0);
    case F_SETFL: {
      va_list ap;
      va_start(ap, cmd);
      const int flags = va_arg(ap, int);
      va_end(ap);
      s->nonblock = flags & O_NONBLOCK;
      return 0;
    }
    default: return fail(EINVAL);
  }
}
