// Protection domains and memory registration (every ibv_reg_mr variant of rdma-core v44).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <new>

#include "abi/convert.h"
#include "abi/objects.h"
#include "abi/ops.h"
#include "live/live_nic.h"

using namespace vrnic::abi;
using vrnic::engine::Device;

#ifdef ibv_reg_mr
#undef ibv_reg_mr
#endif
#ifdef ibv_reg_mr_iova
#undef ibv_reg_mr_iova
#endif

VRNIC_EXPORT ibv_pd* ibv_alloc_pd(ibv_context* context) {
  Context* c = to_context(context);
  auto* pd = new (std::nothrow) Pd{};
  if (!pd) return fail_null<ibv_pd>(ENOMEM);
  pd->pd = c->nic->locked([](Device& d) { return d.alloc_pd(); });
  if (!pd->pd) {
    delete pd;
    return fail_null<ibv_pd>(ENOMEM);
  }
  pd->ibv.context = context;
  pd->ibv.handle = c->file->add(Named::Kind::kPd, pd->pd);
  return &pd->ibv;
}

// Destroys the PD whichever handle names it (its own or an imported one, ibv_import_pd).
VRNIC_EXPORT int ibv_dealloc_pd(ibv_pd* ibv) {
  Pd* pd = to_pd(ibv);
  if (pd->base) return dealloc_parent_domain(pd);
  if (pd->refs.load()) return EBUSY;  // parent domains made on it
  Context* c = to_context(ibv->context);
  if (!c->file->names(ibv->handle, pd->pd)) return ENOENT;  // destroyed through another handle
  const int err = c->nic->locked([&](Device& d) { return d.dealloc_pd(pd->pd); });
  if (err) return err;
  c->file->remove(ibv->handle);
  delete pd;
  return 0;
}

namespace {

// Whether every page of [addr, addr+length) is mapped in this process (mincore fails with
// ENOMEM on a hole). The kernel pins the pages of a non-ODP MR at registration and fails with
// EFAULT on a hole; vrnic reads the memory later, so it checks the same thing now.
bool range_mapped(const void* addr, size_t length) {
  static const size_t page = size_t(sysconf(_SC_PAGESIZE));
  uintptr_t start = reinterpret_cast<uintptr_t>(addr) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(addr) + length;
  if (end < start) return false;
  constexpr size_t kChunkPages = 4096;
  unsigned char vec[kChunkPages];
  while (start < end) {
    const size_t len = std::min<uintptr_t>(end - start, kChunkPages * page);
    if (mincore(reinterpret_cast<void*>(start), len, vec) != 0) return false;
    start += len;
  }
  return true;
}

ibv_mr* register_mr(ibv_pd* ibv_pd, void* addr, size_t length, uint64_t iova,
                    unsigned int access) {
  uint32_t engine_access = 0;
  if (int err = to_engine_access(access, engine_access)) return fail_null<ibv_mr>(err);
  // The kernel pins the pages of the range: none is EINVAL (ib_umem_get).
  if (length == 0) return fail_null<ibv_mr>(EINVAL);
  if (!(access & IBV_ACCESS_ON_DEMAND) && !range_mapped(addr, length)) {
    return fail_null<ibv_mr>(EFAULT);
  }
  auto* mr = new (std::nothrow) Mr{};
  if (!mr) return fail_null<ibv_mr>(ENOMEM);
  vrnic::engine::MrInfo info;
  Pd* pd = to_pd(ibv_pd);
  const int err = to_context(ibv_pd->context)->nic->locked([&](Device& d) {
    return d.reg_mr(pd->pd, addr, length, iova, engine_access, info);
  });
  if (err) {
    delete mr;
    return fail_null<ibv_mr>(err);
  }
  hold_domain(ibv_pd);
  mr->mr = info.mr;
  mr->ibv.context = ibv_pd->context;
  mr->ibv.pd = ibv_pd;
  mr->ibv.addr = addr;
  mr->ibv.length = length;
  mr->ibv.lkey = info.lkey;
  mr->ibv.rkey = info.rkey;
  mr->ibv.handle = to_context(ibv_pd->context)->file->add(Named::Kind::kMr, info.mr);
  return &mr->ibv;
}

}  // namespace

VRNIC_EXPORT ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  return register_mr(pd, addr, length, reinterpret_cast<uintptr_t>(addr), unsigned(access));
}

VRNIC_EXPORT ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                     int access) {
  return register_mr(pd, addr, length, iova, unsigned(access));
}

VRNIC_EXPORT ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                      unsigned int access) {
  return register_mr(pd, addr, length, iova, access);
}

// The rdma-core wrapper's input checks (IBV_REREG_MR_ERR_INPUT, errno EINVAL), then the
// device's (IBV_REREG_MR_ERR_CMD, errno from the device). There are no fork ranges to mark.
VRNIC_EXPORT int ibv_rereg_mr(ibv_mr* ibv, int flags, ibv_pd* ibv_pd, void* addr, size_t length,
                              int access) {
  if (!ibv || (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) ||
      ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!length || !addr)) ||
      (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS))) {
    errno = EINVAL;
    return IBV_REREG_MR_ERR_INPUT;
  }
  uint32_t engine_access = 0;
  int bad = to_engine_access(unsigned(access), engine_access);
  Mr* mr = to_mr(ibv);
  if (mr->dm) bad = EINVAL;  // an MR on device memory stays as registered
  if (bad) {
    errno = bad;
    return IBV_REREG_MR_ERR_CMD;
  }
  vrnic::engine::Pd* pd = (flags & IBV_REREG_MR_CHANGE_PD) && ibv_pd ? to_pd(ibv_pd)->pd : nullptr;
  vrnic::engine::MrInfo info;
  const int err = to_context(ibv->context)->nic->locked([&](Device& d) {
    return d.rereg_mr(mr->mr, uint32_t(flags), pd, addr, length,
                      reinterpret_cast<uintptr_t>(addr), engine_access, info);
  });
  if (err) {
    errno = err;
    return IBV_REREG_MR_ERR_CMD;
  }
  if (flags & IBV_REREG_MR_CHANGE_PD) {
    release_domain(ibv->pd);
    hold_domain(ibv_pd);
    ibv->pd = ibv_pd;
  }
  if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
    ibv->addr = addr;
    ibv->length = length;
  }
  ibv->lkey = info.lkey;
  ibv->rkey = info.rkey;
  return 0;
}

int vrnic::abi::op_advise_mr(ibv_pd* ibv_pd, ibv_advise_mr_advice advice, uint32_t flags,
                             ibv_sge* sg_list, uint32_t num_sge) {
  Pd* pd = to_pd(ibv_pd);
  static_assert(sizeof(ibv_sge) == sizeof(vrnic::engine::Sge));
  const auto* sges = reinterpret_cast<const vrnic::engine::Sge*>(sg_list);
  return to_context(ibv_pd->context)->nic->locked(
      [&](Device& d) { return d.advise_mr(pd->pd, uint32_t(advice), flags, sges, num_sge); });
}

// Deregisters the MR whichever handle names it (its own or an imported one, ibv_import_mr).
VRNIC_EXPORT int ibv_dereg_mr(ibv_mr* ibv) {
  Mr* mr = to_mr(ibv);
  Context* c = to_context(ibv->context);
  if (!c->file->names(ibv->handle, mr->mr)) return ENOENT;  // deregistered through another handle
  const int err = c->nic->locked([&](Device& d) { return d.dereg_mr(mr->mr); });
  if (err) return err;
  c->file->remove(ibv->handle);
  release_domain(ibv->pd);
  release_dm_mr(ibv);
  delete mr;
  return 0;
}
