// The kernel's socket(2), recvmmsg(2) and sendmmsg(2), called directly for the device's own UDP
// sockets.
#pragma once
#include <sys/socket.h>

#include <cerrno>
#include <sys/syscall.h>
#include <unistd.h>

namespace vrnic::transport {

// Not through the socket() symbol: under librspreload.so (LD_PRELOAD) that symbol makes UDP
// sockets rsockets, which run on this device, so the device's own would recurse into it.
inline int kernel_socket(int domain, int type, int protocol) {
  return static_cast<int>(::syscall(SYS_socket, domain, type, protocol));
}

// Not through libc's wrappers either: those are thread cancellation points, which a verbs
// provider's ibv_poll_cq never is, and a busy-polling program calls recvmmsg ~10 times per
// round trip: the wrappers' cancellation bookkeeping took 3.7 % of an ib_send_lat client's
// samples (docs/live.md, "poll_cq without a hand-off").
inline int kernel_recvmmsg(int fd, mmsghdr* msgs, unsigned n, int flags) {
  return static_cast<int>(::syscall(SYS_recvmmsg, fd, msgs, n, flags, nullptr));
}
inline int kernel_sendmmsg(int fd, mmsghdr* msgs, unsigned n, int flags) {
  return static_cast<int>(::syscall(SYS_sendmmsg, fd, msgs, n, flags));
}

// The caller's errno, put back at the end of a scope that called the kernel for the device's
// own packets: a verb leaves errno as the program left it, as rdma-core's providers' post and
// poll calls do (no system call there). A program may read a stale errno after a call that
// succeeded: rstream takes rrecv's end of stream (0) with errno EAGAIN as "try again".
struct ErrnoKept {
  int saved = errno;
  ~ErrnoKept() { errno = saved; }
};

}  // namespace vrnic::transport
