// The rsocket calls of librdmacm (<rdma/rsocket.h>): present so that programs and librspreload
// load, each failing with ENOSYS. librspreload then keeps the program on kernel sockets.
#include <rdma/rsocket.h>

#include <cerrno>

#include "rdmacm/state.h"

namespace {
template <typename R = int>
R not_yet() {
  errno = ENOSYS;
  return static_cast<R>(-1);
}
}  // namespace

RDMACM_EXPORT int rsocket(int, int, int) { return not_yet(); }
RDMACM_EXPORT int rbind(int, const sockaddr*, socklen_t) { return not_yet(); }
RDMACM_EXPORT int rlisten(int, int) { return not_yet(); }
RDMACM_EXPORT int raccept(int, sockaddr*, socklen_t*) { return not_yet(); }
RDMACM_EXPORT int rconnect(int, const sockaddr*, socklen_t) { return not_yet(); }
RDMACM_EXPORT int rshutdown(int, int) { return not_yet(); }
RDMACM_EXPORT int rclose(int) { return not_yet(); }
RDMACM_EXPORT ssize_t rrecv(int, void*, size_t, int) { return not_yet<ssize_t>(); }
RDMACM_EXPORT ssize_t rrecvfrom(int, void*, size_t, int, sockaddr*, socklen_t*) {
  return not_yet<ssize_t>();
}
RDMACM_EXPORT ssize_t rrecvmsg(int, msghdr*, int) { return not_yet<ssize_t>(); }
RDMACM_EXPORT ssize_t rsend(int, const void*, size_t, int) { return not_yet<ssize_t>(); }
RDMACM_EXPORT ssize_t rsendto(int, const void*, size_t, int, const sockaddr*, socklen_t) {
  return not_yet<ssize_t>();
}
RDMACM_EXPORT ssize_t rsendmsg(int, const msghdr*, int) { return not_yet<ssize_t>(); }
RDMACM_EXPORT ssize_t rread(int, void*, size_t) { return not_yet<ssize_t>(); }
RDMACM_EXPORT ssize_t rreadv(int, const iovec*, int) { return not_yet<ssize_t>(); }
RDMACM_EXPORT ssize_t rwrite(int, const void*, size_t) { return not_yet<ssize_t>(); }
RDMACM_EXPORT ssize_t rwritev(int, const iovec*, int) { return not_yet<ssize_t>(); }
RDMACM_EXPORT int rpoll(pollfd*, nfds_t, int) { return not_yet(); }
RDMACM_EXPORT int rselect(int, fd_set*, fd_set*, fd_set*, timeval*) { return not_yet(); }
RDMACM_EXPORT int rgetpeername(int, sockaddr*, socklen_t*) { return not_yet(); }
RDMACM_EXPORT int rgetsockname(int, sockaddr*, socklen_t*) { return not_yet(); }
RDMACM_EXPORT int rsetsockopt(int, int, int, const void*, socklen_t) { return not_yet(); }
RDMACM_EXPORT int rgetsockopt(int, int, int, void*, socklen_t*) { return not_yet(); }
RDMACM_EXPORT int rfcntl(int, int, ...) { return not_yet(); }
RDMACM_EXPORT off_t riomap(int, void*, size_t, int, int, off_t) { return not_yet<off_t>(); }
RDMACM_EXPORT int riounmap(int, void*, size_t) { return not_yet(); }
RDMACM_EXPORT size_t riowrite(int, const void*, size_t, off_t, int) {
  errno = ENOSYS;
  return 0;
}
