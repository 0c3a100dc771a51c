// Every public verb vrnic does not implement: each fails with EOPNOTSUPP, none crashes or
// pretends to succeed. (Verbs reached through verbs_context ops are left null instead, so
// rdma-core's inline wrappers report EOPNOTSUPP themselves; see context.cc.)
#include "abi/objects.h"

using vrnic::abi::fail_null;

// Memory: dma-buf.
VRNIC_EXPORT ibv_mr* ibv_reg_dmabuf_mr(ibv_pd*, uint64_t, size_t, uint64_t, int, int) {
  return fail_null<ibv_mr>(EOPNOTSUPP);
}

// Sharing objects between processes through a kernel command fd: there is no kernel object.
VRNIC_EXPORT ibv_context* ibv_import_device(int) { return fail_null<ibv_context>(EOPNOTSUPP); }
VRNIC_EXPORT ibv_pd* ibv_import_pd(ibv_context*, uint32_t) { return fail_null<ibv_pd>(EOPNOTSUPP); }
VRNIC_EXPORT ibv_mr* ibv_import_mr(ibv_pd*, uint32_t) { return fail_null<ibv_mr>(EOPNOTSUPP); }
VRNIC_EXPORT ibv_dm* ibv_import_dm(ibv_context*, uint32_t) { return fail_null<ibv_dm>(EOPNOTSUPP); }
// Nothing can have been imported, so there is nothing to release.
VRNIC_EXPORT void ibv_unimport_pd(ibv_pd*) {}
VRNIC_EXPORT void ibv_unimport_mr(ibv_mr*) {}
VRNIC_EXPORT void ibv_unimport_dm(ibv_dm*) {}

// Enhanced connection establishment (a vendor extension).
VRNIC_EXPORT int ibv_query_ece(ibv_qp*, ibv_ece*) { return EOPNOTSUPP; }
VRNIC_EXPORT int ibv_set_ece(ibv_qp*, ibv_ece*) { return EOPNOTSUPP; }
