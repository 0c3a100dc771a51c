// Page presence of on-demand regions through the kernel: process_vm_readv / writev on this
// process, or a pipe where those are refused.
#include "live/host_memory.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

namespace vrnic::live {

namespace {

uint64_t page_size() {
  static const uint64_t size = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return size;
}

constexpr size_t kBatch = 64;  // pages per system call

// Fallback where a seccomp policy refuses process_vm_readv/writev: one byte per page through
// a pipe. write(2) from the page fails with EFAULT if it is not readable; reading the same
// byte back into the page fails if it is not writable.
bool pages_present_by_pipe(uint64_t start, uint64_t end, uint64_t ps, bool write) {
  if (end < start) return false;
  struct Pipe {
    int fd[2] = {-1, -1};
    Pipe() {
      if (pipe2(fd, O_CLOEXEC | O_NONBLOCK) != 0) fd[0] = fd[1] = -1;
    }
    ~Pipe() {
      if (fd[0] >= 0) close(fd[0]);
      if (fd[1] >= 0) close(fd[1]);
    }
  };
  thread_local Pipe p;
  if (p.fd[0] < 0) return false;
  for (uint64_t at = start; at < end; at = (at & ~(ps - 1)) + ps) {
    auto* b = reinterpret_cast<uint8_t*>(at);
    if (::write(p.fd[1], b, 1) != 1) return false;
    uint8_t tmp;
    ssize_t n = ::read(p.fd[0], write ? b : &tmp, 1);
    if (n != 1) {
      if (write) (void)!::read(p.fd[0], &tmp, 1);  // keep the pipe empty
      return false;
    }
  }
  return true;
}

}  // namespace

bool ProcessMemory::pages_present_by_pipe(const uint8_t* p, uint64_t len, bool write) {
  const uint64_t start = reinterpret_cast<uintptr_t>(p);
  return len == 0 || live::pages_present_by_pipe(start, start + len, page_size(), write);
}

bool ProcessMemory::pages_present(const uint8_t* p, uint64_t len, bool write) {
  if (len == 0) return true;
  const uint64_t ps = page_size();
  const uint64_t start = reinterpret_cast<uintptr_t>(p);
  const uint64_t end = start + len;
  if (end < start) return false;
  static const pid_t self = getpid();
  thread_local uint8_t scratch[kBatch];
  iovec local[kBatch], remote[kBatch];
  // One byte per page, the first byte of the range in that page: for a write that byte is
  // part of what is about to be written, and it is copied onto itself (same value).
  uint64_t at = start;
  while (at < end) {
    size_t k = 0;
    for (; k < kBatch && at < end; ++k) {
      auto* b = reinterpret_cast<uint8_t*>(at);
      remote[k] = {b, 1};
      local[k] = write ? iovec{b, 1} : iovec{&scratch[k], 1};
      at = (at & ~(ps - 1)) + ps;
    }
    ssize_t n = write ? process_vm_writev(self, local, k, remote, k, 0)
                      : process_vm_readv(self, local, k, remote, k, 0);
    if (n < 0 && (errno == EPERM || errno == ENOSYS))
      return live::pages_present_by_pipe(start, end, ps, write);
    if (n != static_cast<ssize_t>(k)) return false;
  }
  return true;
}

}  // namespace vrnic::live
