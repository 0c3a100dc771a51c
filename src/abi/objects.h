// The shim's objects: each wraps the rdma-core struct a program sees and the engine object behind it.
#pragma once
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>

#include "engine/types.h"

namespace vrnic::live {
class LiveNic;
}
namespace vrnic::engine {
class Mr;
class Qp;
}  // namespace vrnic::engine

namespace vrnic::abi {

// An open device. The program holds &vctx.context; rdma-core's inline wrappers find vctx just
// before it (abi_compat == __VERBS_ABI_IS_EXTENDED), so vctx must be the first member.
struct Context {
  verbs_context vctx;
  live::LiveNic* nic = nullptr;
  std::mutex async_mu;
  std::deque<ibv_async_event> async_events;  // read by ibv_get_async_event
};

struct Pd {
  ibv_pd ibv;
  engine::Pd* pd = nullptr;
};

struct Mr {
  ibv_mr ibv;
  engine::Mr* mr = nullptr;
};

struct Channel {
  ibv_comp_channel ibv;
  std::mutex mu;
  std::deque<ibv_cq*> events;  // armed CQs that got a completion, in order
};

struct Cq {
  ibv_cq ibv;
  engine::Cq* cq = nullptr;
  uint32_t comp_events_delivered = 0;   // ibv_get_cq_event returns; guarded by ibv.mutex
  uint32_t async_events_delivered = 0;  // guarded by ibv.mutex
};

struct Qp {
  ibv_qp ibv;
  engine::Qp* qp = nullptr;
  uint32_t async_events_delivered = 0;  // guarded by ibv.mutex
};

inline Context* to_context(ibv_context* c) {
  return reinterpret_cast<Context*>(reinterpret_cast<char*>(c) - offsetof(verbs_context, context));
}
inline Pd* to_pd(ibv_pd* p) { return reinterpret_cast<Pd*>(p); }
inline Mr* to_mr(ibv_mr* m) { return reinterpret_cast<Mr*>(m); }
inline Cq* to_cq(ibv_cq* c) { return reinterpret_cast<Cq*>(c); }
inline Qp* to_qp(ibv_qp* q) { return reinterpret_cast<Qp*>(q); }
inline Channel* to_channel(ibv_comp_channel* c) { return reinterpret_cast<Channel*>(c); }

// Sets errno and returns null: the failure convention of pointer-returning verbs.
template <typename T = void>
inline T* fail_null(int err) {
  errno = err;
  return nullptr;
}

// Exported symbols; everything else in the library is hidden.
#define VRNIC_EXPORT extern "C" __attribute__((visibility("default")))

}  // namespace vrnic::abi
