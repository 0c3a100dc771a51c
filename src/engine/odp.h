// On-demand paging: an ODP memory region is not pinned or checked when registered; each
// access first asks the device's HostMemory (ports.h) whether the pages it touches are
// present (and writable for a write), so an unmapped page turns into an access error
// instead of a crash. MemoryTable::check_* makes that check; this file holds ibv_advise_mr.
#pragma once
#include <cstddef>
#include <cstdint>

#include "engine/types.h"

namespace vrnic::engine {

class MemoryTable;
class Pd;

// ibv_advise_mr on the ODP regions named by sges (advice as IBV_ADVISE_MR_ADVICE_*).
// EINVAL bad flags / a region that is not ODP or of another PD; EFAULT an unknown lkey, a
// range outside its region, a PREFETCH_WRITE without local write access, or (unless
// PREFETCH_NO_FAULT) a page that is not present; EOPNOTSUPP an unknown advice.
Errno odp_advise(const MemoryTable& mem, const Pd* pd, uint32_t advice, uint32_t flags,
                 const Sge* sges, size_t n);

}  // namespace vrnic::engine
