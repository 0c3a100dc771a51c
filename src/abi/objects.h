// The shim's objects: each wraps the rdma-core struct a program sees and the engine object behind it.
#pragma once
#include <infiniband/verbs.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <new>

#include "abi/cmd_file.h"
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
  std::shared_ptr<CmdFile> file;  // the handles of its PDs, MRs and DMs (cmd_fd's file)
  std::mutex async_mu;
  std::deque<ibv_async_event> async_events;  // read by ibv_get_async_event
};

// A thread domain: vrnic has no doorbell registers to dedicate, so it only counts its users.
struct Td {
  ibv_td ibv;
  std::atomic<uint32_t> parents{0};  // parent domains made with it (dealloc: EBUSY)
};

// A protection domain, or a parent domain (ibv_alloc_parent_domain): one that protects as
// its `base` PD does (same engine PD), with a thread domain and the program's allocators.
struct Pd {
  ibv_pd ibv;
  engine::Pd* pd = nullptr;
  Pd* base = nullptr;  // set for a parent domain
  Td* td = nullptr;
  void* (*alloc)(ibv_pd*, void*, size_t, size_t, uint64_t) = nullptr;
  void (*free)(ibv_pd*, void*, void*, uint64_t) = nullptr;
  void* pd_context = nullptr;
  // A PD: the parent domains made on it. A parent domain: the objects made on it.
  std::atomic<uint32_t> refs{0};
};

// The resource_type a parent domain's allocator is called with (vrnic's vendor id above the
// low 32 bits, as mlx5dv puts its driver id there): the memory of a QP / a CQ.
constexpr uint64_t kResTypeQp = (uint64_t(0x027672) << 32) | 1;
constexpr uint64_t kResTypeCq = (uint64_t(0x027672) << 32) | 2;
constexpr uint64_t kResTypeCqRing = (uint64_t(0x027672) << 32) | 3;  // a CQ's CQEs

// The CQE ring of a CQ on a parent domain with allocators (null mem: the engine's own).
struct CqRing {
  engine::WorkCompletion* mem = nullptr;
  bool custom = false;  // from the allocator (else the heap, IBV_ALLOCATOR_USE_DEFAULT)
};

// The device memory ibv_alloc_dm hands out, in all (ibv_query_device_ex's max_dm_size).
constexpr size_t kMaxDmSize = 256 * 1024;

// Device memory (ibv_alloc_dm): a page-aligned block of the library's memory, counted
// against the device's max_dm_size; MRs on it are zero-based (dm.cc). One block may be
// held by several ibv_dm handles (ibv_import_dm); ibv_free_dm through any of them frees it.
struct DmBlock {
  uint8_t* mem = nullptr;
  size_t length = 0;  // as allocated (ibv_alloc_dm_attr.length)
  size_t reserved = 0;  // counted against max_dm_size: length rounded up to pages
  std::atomic<uint32_t> mrs{0};  // ibv_free_dm: EBUSY while MRs use it
};

struct Mr {
  ibv_mr ibv;
  engine::Mr* mr = nullptr;
  DmBlock* dm = nullptr;  // an MR on device memory (ibv_reg_dm_mr)
};

struct Dm {
  ibv_dm ibv;
  DmBlock* block = nullptr;
};

// The fd holds one token per queued event, except for events that came while a thread of
// this process moved packets for them in ibv_get_cq_event (`spinners`): such a thread takes
// them without a token, and the last one to stop writes the tokens of those left.
// Invariant (mu): the fd's count == events.size() - untokened.
struct Channel {
  ibv_comp_channel ibv;
  std::mutex mu;
  std::deque<ibv_cq*> events;  // armed CQs that got a completion, in order
  int spinners = 0;            // threads waiting in ibv_get_cq_event that move packets
  size_t untokened = 0;        // events queued while spinners > 0, their tokens not written
};

// ibv_cq_ex begins with the fields of ibv_cq (rdma-core's ibv_cq_ex_to_cq casts), so one
// object serves both views: ibv for the classic verbs, ex for ibv_create_cq_ex programs.
struct Cq {
  union {
    ibv_cq ibv;
    ibv_cq_ex ex;
  };
  engine::Cq* cq = nullptr;
  ibv_pd* parent_domain = nullptr;  // ibv_create_cq_ex with IBV_CQ_INIT_ATTR_MASK_PD
  CqRing ring;  // where the engine keeps this CQ's CQEs, when the parent domain supplies it
  bool custom_mem = false;  // this object's memory came from parent_domain's allocator
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
  bool custom_mem = false;  // this object's memory came from its parent domain's allocator
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
inline Td* to_td(ibv_td* t) { return reinterpret_cast<Td*>(t); }
inline Dm* to_dm(ibv_dm* d) { return reinterpret_cast<Dm*>(d); }
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

// Objects made on a parent domain keep it (ibv_dealloc_pd is EBUSY until they are gone);
// on a plain PD these do nothing (the engine counts a PD's users).
inline void hold_domain(ibv_pd* pd) {
  if (to_pd(pd)->base) ++to_pd(pd)->refs;
}
inline void release_domain(ibv_pd* pd) {
  if (to_pd(pd)->base) --to_pd(pd)->refs;
}

// Memory for a QP or CQ object made on pd: from the parent domain's allocator when it has
// one that does not answer IBV_ALLOCATOR_USE_DEFAULT (custom is then set), else the heap.
// Null (ENOMEM) if the allocator fails.
void* alloc_object(ibv_pd* pd, size_t size, size_t align, uint64_t type, bool& custom);
void free_object(ibv_pd* pd, void* mem, uint64_t type, bool custom);

// A ring of `depth` CQEs from a parent domain's allocators: 0 (out.mem stays null without
// allocators: the engine allocates), or ENOMEM.
int alloc_cq_ring(ibv_pd* parent_domain, uint32_t depth, CqRing& out);
void free_cq_ring(ibv_pd* parent_domain, CqRing& ring);

template <typename T>
T* new_object(ibv_pd* pd, uint64_t type) {
  bool custom = false;
  void* mem = alloc_object(pd, sizeof(T), alignof(T), type, custom);
  if (!mem) return nullptr;
  T* obj = new (mem) T{};
  obj->custom_mem = custom;
  return obj;
}
template <typename T>
void delete_object(T* obj, ibv_pd* pd, uint64_t type) {
  const bool custom = obj->custom_mem;
  obj->~T();
  free_object(pd, obj, type, custom);
}

// Exported symbols; everything else in the library is hidden.
#define VRNIC_EXPORT extern "C" __attribute__((visibility("default")))

}  // namespace vrnic::abi
