// On-demand paging: ibv_advise_mr (the page checks themselves go through HostMemory).
#include "engine/odp.h"

#include <cerrno>

#include "engine/memory_table.h"
#include "engine/ports.h"

namespace vrnic::engine {

Errno odp_advise(const MemoryTable& mem, const Pd* pd, uint32_t advice, uint32_t flags,
                 const Sge* sges, size_t n) {
  constexpr uint32_t kPrefetchWrite = 1, kPrefetchNoFault = 2;  // 0: PREFETCH
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
    if (!mem.host().pages_present(mr->host + (s.addr - mr->iova), s.length, write))
      return EFAULT;
  }
  return 0;
}

}  // namespace vrnic::engine
