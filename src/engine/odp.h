// On-demand paging: an ODP memory region is not pinned or checked when registered; each
// access first makes sure the pages it touches are mapped (and writable for a write) in this
// process, so an unmapped page turns into an access error instead of a crash.
#pragma once
#include <cstddef>
#include <cstdint>

#include "engine/types.h"

namespace vrnic::engine {

class MemoryTable;
class Pd;

// True if every page of [p, p+len) is mapped readable (and writable when `write`). Touching
// the pages through the kernel (process_vm_readv / process_vm_writev on this process) also
// faults them in, as the device's page fault would. Never raises a signal.
bool odp_pages_present(const uint8_t* p, uint64_t len, bool write);
// The same through a pipe (write(2) from the page, read(2) back into it): used when a
// seccomp policy refuses process_vm_readv / process_vm_writev.
bool odp_pages_present_by_pipe(const uint8_t* p, uint64_t len, bool write);

// ibv_advise_mr on the ODP regions named by sges (advice as IBV_ADVISE_MR_ADVICE_*).
// EINVAL bad flags / a region that is not ODP or of another PD; EFAULT an unknown lkey, a
// range outside its region, a PREFETCH_WRITE without local write access, or (unless
// PREFETCH_NO_FAULT) a page that is not mapped; EOPNOTSUPP an unknown advice.
Errno odp_advise(const MemoryTable& mem, const Pd* pd, uint32_t advice, uint32_t flags,
                 const Sge* sges, size_t n);

}  // namespace vrnic::engine
