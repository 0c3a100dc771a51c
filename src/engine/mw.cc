// Memory windows: bind, local invalidate and remote (SEND with Invalidate) invalidate.
#include "engine/mw.h"

#include "engine/core.h"

namespace vrnic::engine {

namespace {

constexpr uint32_t kIndexShift = MemoryTable::kGenerationBits;

void unbind(Mw& mw) {
  if (mw.bound && mw.mr != nullptr) --mw.mr->windows;
  mw.bound = false;
  mw.mr = nullptr;
  mw.qpn = 0;
}

// Invalidation rules shared by LOCAL_INV and SEND with Invalidate: a bound type 2 window of
// the QP's PD, bound through this QP (type 2B). Type 1 windows cannot be invalidated this way
// (o10-37.2.26), and MRs here are never invalidatable (no fast-register MRs).
Mw* invalidatable(Core& c, const Qp& qp, uint32_t rkey) {
  Mw* mw = c.mem.find_mw(rkey);
  if (mw == nullptr || mw->type != 2 || !mw->bound) return nullptr;
  if (mw->pd != qp.pd || mw->qpn != qp.qpn) return nullptr;
  return mw;
}

}  // namespace

WcStatus mw_bind(Core& c, Qp& qp, const MwBindInfo& b) {
  Mw* mw = b.mw;
  if (!c.mem.has_mw(mw) || mw->pd != qp.pd) return WcStatus::kMwBindErr;  // C10-72
  // Only the 8-bit key part of the rkey is the consumer's (10.6.7.3).
  if ((b.new_rkey >> kIndexShift) != (mw->rkey >> kIndexShift)) return WcStatus::kMwBindErr;
  if (mw->type == 1 && b.mr == nullptr && b.length == 0) {  // unbind a type 1 window
    unbind(*mw);
    mw->rkey = b.new_rkey;
    return WcStatus::kSuccess;
  }
  // A type 2 window is bound from the free state only: invalidate it first (o10-37.2.30).
  if (mw->type == 2 && mw->bound) return WcStatus::kMwBindErr;
  if (mw->type == 1 && (b.access & kZeroBased)) return WcStatus::kMwBindErr;  // o10-36.2.2
  Mr* mr = b.mr;
  if (!c.mem.has_mr(mr) || mr->pd != qp.pd) return WcStatus::kMwBindErr;
  if (!(mr->access & kMwBind)) return WcStatus::kMwBindErr;  // C10-73
  const uint32_t allowed = kRemoteRead | kRemoteWrite | kRemoteAtomic | kZeroBased | kLocalWrite;
  if (b.access & ~allowed) return WcStatus::kMwBindErr;
  // Remote write or atomic through the window needs local write on the MR (C10-74).
  if ((b.access & (kRemoteWrite | kRemoteAtomic)) && !(mr->access & kLocalWrite))
    return WcStatus::kMwBindErr;
  uint64_t end = b.addr + b.length;  // C10-75: the window lies within the MR
  if (end < b.addr || b.addr < mr->iova || end > mr->iova + mr->length) return WcStatus::kMwBindErr;
  unbind(*mw);
  mw->mr = mr;
  ++mr->windows;
  mw->addr = b.addr;
  mw->length = b.length;
  mw->access = b.access & (kRemoteRead | kRemoteWrite | kRemoteAtomic | kZeroBased);
  mw->rkey = b.new_rkey;
  mw->qpn = mw->type == 2 ? qp.qpn : 0;
  mw->bound = true;
  return WcStatus::kSuccess;
}

WcStatus mw_local_invalidate(Core& c, Qp& qp, uint32_t rkey) {
  Mw* mw = invalidatable(c, qp, rkey);
  if (mw == nullptr) return WcStatus::kLocQpOpErr;
  unbind(*mw);
  return WcStatus::kSuccess;
}

bool mw_remote_invalidate(Core& c, Qp& qp, uint32_t rkey) {
  Mw* mw = invalidatable(c, qp, rkey);
  if (mw == nullptr) return false;
  unbind(*mw);
  return true;
}

}  // namespace vrnic::engine
