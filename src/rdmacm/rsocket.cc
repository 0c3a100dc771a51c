// The rsocket I/O-map calls (riomap, riounmap, riowrite): not offered yet, each fails with
// ENOSYS.
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

RDMACM_EXPORT off_t riomap(int, void*, size_t, int, int, off_t) { return not_yet<off_t>(); }
RDMACM_EXPORT int riounmap(int, void*, size_t) { return not_yet(); }
RDMACM_EXPORT size_t riowrite(int, const void*, size_t, off_t, int) {
  errno = ENOSYS;
  return 0;
}
