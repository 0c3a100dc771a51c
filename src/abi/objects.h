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
class Ah;
class Mr;
class Mw;
class Qp;
class Srq;
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

// ibv_cq_ex begins with the fields of ibv_cq (rdma-core's ibv_cq_ex_to_cq casts), so one
// object serves both views: ibv for the classic verbs, ex for ibv_create_cq_ex programs.
struct Cq {
  union {
    ibv_cq ibv;
    ibv_cq_ex ex;
  };
  engine::Cq* cq = nullptr;
  uint32_t comp_events_delivered = 0;   // ibv_get_cq_event returns; guarded by ibv.mutex
  uint32_t async_events_delivered = 0;  // guarded by ibv.mutex
  engine::WorkCompletion polled{};  // the CQE ibv_start_poll / ibv_next_poll stands on
  std::mutex poll_mu;  // ibv_create_cq_ex CQs: held from ibv_start_poll to ibv_end_poll
  bool poll_locks = false;  // false with IBV_CREATE_CQ_ATTR_SINGLE_THREADED
};

// ibv_qp_ex starts with the ibv_qp (qp_base): ibv_qp_to_qp_ex returns &ex of the same object.
struct Qp {
  union {
    ibv_qp ibv;
    ibv_qp_ex ex;
  };
  engine::Qp* qp = nullptr;
  uint32_t async_events_delivered = 0;  // guarded by ibv.mutex
  struct WrBuilder* wr = nullptr;  // ibv_create_qp_ex QPs: the ibv_wr_* state (qp_ex.cc)
};

struct Ah {
  ibv_ah ibv;
  engine::Ah* ah = nullptr;
};

struct Srq {
  ibv_srq ibv;
  engine::Srq* srq = nullptr;
  uint32_t async_events_delivered = 0;  // guarded by ibv.mutex
};

struct Mw {
  ibv_mw ibv;
  engine::Mw* mw = nullptr;
};

inline Context* to_context(ibv_context* c) {
  return reinterpret_cast<Context*>(reinterpret_cast<char*>(c) - offsetof(verbs_context, context));
}
inline Pd* to_pd(ibv_pd* p) { return reinterpret_cast<Pd*>(p); }
inline Mr* to_mr(ibv_mr* m) { return reinterpret_cast<Mr*>(m); }
inline Cq* to_cq(ibv_cq* c) { return reinterpret_cast<Cq*>(c); }
inline Qp* to_qp(ibv_qp* q) { return reinterpret_cast<Qp*>(q); }
inline Ah* to_ah(ibv_ah* a) { return reinterpret_cast<Ah*>(a); }
inline Srq* to_srq(ibv_srq* s) { return reinterpret_cast<Srq*>(s); }
inline Mw* to_mw(ibv_mw* m) { return reinterpret_cast<Mw*>(m); }
inline Cq* to_cq(ibv_cq_ex* c) { return reinterpret_cast<Cq*>(c); }
inline Qp* to_qp(ibv_qp_ex* q) { return reinterpret_cast<Qp*>(q); }
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
