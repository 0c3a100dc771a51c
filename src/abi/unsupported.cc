// Every public verb vrnic does not implement: each fails with EOPNOTSUPP, none crashes or
// pretends to succeed. (Verbs reached through verbs_context ops are left null instead, so
// rdma-core's inline wrappers report EOPNOTSUPP themselves; see context.cc.)
#include "abi/objects.h"

using vrnic::abi::fail_null;

// Memory: dma-buf.
VRNIC_EXPORT ibv_mr* ibv_reg_dmabuf_mr(ibv_pd*, uint64_t, size_t, uint64_t, int, int) {
  return fail_null<ibv_mr>(EOPNOTSUPP);
}

// Enhanced connection establishment (a vendor extension).
VRNIC_EXPORT int ibv_query_ece(ibv_qp*, ibv_ece*) { return EOPNOTSUPP; }
VRNIC_EXPORT int ibv_set_ece(ibv_qp*, ibv_ece*) { return EOPNOTSUPP; }
