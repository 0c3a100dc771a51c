// On-demand paging: page presence checks through the kernel, and ibv_advise_mr.
#include "engine/odp.h"

#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>

#include "engine/memory_table.h"

namespace vrnic::engine {

namespace {

uint64_t page_size() {
  static const uint64_t size = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return size;
}

constexpr size_t kBatch = 64;  // pages per system call

}  // namespace

bool odp_pages_present(const uint8_t* p, uint64_t len, bool write) {
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
    if (n != static_cast<ssize_t>(k)) return false;
  }
  return true;
}

Errno odp_advise(const MemoryTable& mem, const Pd* pd, uint32_t advice, uint32_t flags,
                 const Sge* sges, size_t n) {
  constexpr uint32_t kPrefetch = 0, kPrefetchWrite = 1, kPrefetchNoFault = 2;
  constexpr uint32_t kFlagFlush = 1;
  if (advice > kPrefetchNoFault) return EOPNOTSUPP;
  if (flags & ~kFlagFlush) return EINVAL;
  if (n > 0 && sges == nullptr) return EINVAL;
  const bool write = advice == kPrefetchWrite;
  for (size_t i = 0; i < n; ++i) {
    const Sge& s = sges[i];
    Mr* mr = mem.find(s.lkey);
    if (mr == nullptr) return EFAULT;
    if (mr->pd != pd || !(mr->access & kOnDemand)) return EINVAL;  // as mlx5
    if (write && !(mr->access & kLocalWrite)) return EFAULT;
    // The range only, not the pages: checked by hand so a missing page is not an error here.
    uint64_t end = s.addr + s.length;
    if (end < s.addr || s.addr < mr->iova || end > mr->iova + mr->length) return EFAULT;
    if (advice == kPrefetchNoFault) continue;  // nothing to fault in
    if (!odp_pages_present(mr->host + (s.addr - mr->iova), s.length, write)) return EFAULT;
  }
  return 0;
}

}  // namespace vrnic::engine
