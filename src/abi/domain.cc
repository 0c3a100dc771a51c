// Thread domains and parent domains (ibv_alloc_td, ibv_alloc_parent_domain), and the memory of
// objects made on a parent domain, taken from the program's allocator when it gave one.
#include <cstdlib>

#include "abi/objects.h"
#include "abi/ops.h"

using namespace vrnic::abi;

ibv_td* vrnic::abi::op_alloc_td(ibv_context* context, ibv_td_init_attr* attr) {
  if (attr->comp_mask) return fail_null<ibv_td>(EINVAL);  // no field past comp_mask (mlx5)
  auto* td = new (std::nothrow) Td;
  if (!td) return fail_null<ibv_td>(ENOMEM);
  td->ibv.context = context;
  return &td->ibv;
}

int vrnic::abi::op_dealloc_td(ibv_td* ibv) {
  Td* td = to_td(ibv);
  if (td->parents.load()) return EBUSY;  // a parent domain still uses it (mlx5)
  delete td;
  return 0;
}

ibv_pd* vrnic::abi::op_alloc_parent_domain(ibv_context* context,
                                          ibv_parent_domain_init_attr* attr) {
  constexpr uint32_t kKnown =
      IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
  // A PD is required (rdma-core's ibv_check_alloc_parent_domain); an unknown comp_mask bit
  // is EINVAL (mlx5). Allocators come in pairs: what one allocates the other frees.
  if (!attr->pd || (attr->comp_mask & ~kKnown)) return fail_null<ibv_pd>(EINVAL);
  if (attr->pd->context != context || (attr->td && attr->td->context != context)) {
    return fail_null<ibv_pd>(EINVAL);
  }
  const bool allocators = attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS;
  if (allocators && (!attr->alloc || !attr->free)) return fail_null<ibv_pd>(EINVAL);
  auto* pd = new (std::nothrow) Pd;
  if (!pd) return fail_null<ibv_pd>(ENOMEM);
  Pd* base = to_pd(attr->pd);
  if (base->base) base = base->base;  // made on a parent domain: protects as its PD does
  pd->base = base;
  pd->pd = base->pd;
  ++base->refs;
  if (attr->td) {
    pd->td = to_td(attr->td);
    ++pd->td->parents;
  }
  if (allocators) {
    pd->alloc = attr->alloc;
    pd->free = attr->free;
  }
  if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT) pd->pd_context = attr->pd_context;
  pd->ibv.context = context;
  pd->ibv.handle = base->ibv.handle;
  return &pd->ibv;
}

// ibv_dealloc_pd of a parent domain: EBUSY while objects made on it exist (mlx5).
int vrnic::abi::dealloc_parent_domain(Pd* pd) {
  if (pd->refs.load()) return EBUSY;
  --pd->base->refs;
  if (pd->td) --pd->td->parents;
  delete pd;
  return 0;
}

void* vrnic::abi::alloc_object(ibv_pd* ibv, size_t size, size_t align, uint64_t type,
                               bool& custom) {
  custom = false;
  Pd* pd = ibv ? to_pd(ibv) : nullptr;
  if (pd && pd->alloc) {
    void* mem = pd->alloc(ibv, pd->pd_context, size, align, type);
    if (!mem) return fail_null(ENOMEM);
    if (mem != IBV_ALLOCATOR_USE_DEFAULT) {
      custom = true;
      return mem;
    }
  }
  void* mem = std::aligned_alloc(align, (size + align - 1) / align * align);
  return mem ? mem : fail_null(ENOMEM);
}

void vrnic::abi::free_object(ibv_pd* ibv, void* mem, uint64_t type, bool custom) {
  if (custom) {
    Pd* pd = to_pd(ibv);
    pd->free(ibv, pd->pd_context, mem, type);
    return;
  }
  std::free(mem);
}

int vrnic::abi::alloc_cq_ring(ibv_pd* parent_domain, uint32_t depth, CqRing& out) {
  out = CqRing{};
  if (!parent_domain || !to_pd(parent_domain)->alloc) return 0;
  using vrnic::engine::WorkCompletion;
  void* mem = alloc_object(parent_domain, size_t(depth) * sizeof(WorkCompletion),
                           alignof(WorkCompletion), kResTypeCqRing, out.custom);
  if (!mem) return ENOMEM;
  out.mem = static_cast<WorkCompletion*>(mem);
  return 0;
}

void vrnic::abi::free_cq_ring(ibv_pd* parent_domain, CqRing& ring) {
  if (ring.mem) free_object(parent_domain, ring.mem, kResTypeCqRing, ring.custom);
  ring = CqRing{};
}
