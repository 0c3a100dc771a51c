// The kernel's socket(2), recvmmsg(2) and sendmmsg(2), called directly for the device's own UDP
// sockets.
#pragma once
#include <sys/socket.h>
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

}  // namespace vrnic::transport
