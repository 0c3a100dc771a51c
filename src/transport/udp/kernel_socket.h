// The kernel's socket(2), called directly for the device's own UDP sockets.
#pragma once
#include <sys/syscall.h>
#include <unistd.h>

namespace vrnic::transport {

// Not through the socket() symbol: under librspreload.so (LD_PRELOAD) that symbol makes UDP
// sockets rsockets, which run on this device, so the device's own would recurse into it.
inline int kernel_socket(int domain, int type, int protocol) {
  return static_cast<int>(::syscall(SYS_socket, domain, type, protocol));
}

}  // namespace vrnic::transport
