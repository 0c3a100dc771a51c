// Shared receive queues: posting, taking WQEs for the responder, the limit event, and the
// Device entry points (create / modify / query / destroy / post).
#include "engine/srq.h"

#include <cerrno>

#include "engine/core.h"

namespace vrnic::engine {

Errno srq_check_init(const DeviceLimits& l, Device::SrqAttr& attr) {
  if (attr.max_wr > l.max_srq_wr || attr.max_sge > l.max_srq_sge) return EINVAL;
  if (attr.max_wr == 0) attr.max_wr = 1;
  if (attr.max_sge == 0) attr.max_sge = 1;
  attr.srq_limit = 0;  // ibv_create_srq ignores srq_limit: the SRQ starts disarmed
  return 0;
}

Errno srq_modify(const DeviceLimits& l, Srq& srq, const Device::SrqAttr& attr, uint32_t mask) {
  constexpr uint32_t kMaxWr = 1, kLimit = 2;
  if (mask == 0 || (mask & ~(kMaxWr | kLimit))) return EINVAL;
  uint32_t new_max = (mask & kMaxWr) ? attr.max_wr : srq.max_wr;
  if (mask & kMaxWr) {
    // Resizing: never below the WQEs it holds or the limit it will be armed with.
    if (new_max == 0 || new_max > l.max_srq_wr || new_max < srq.rq.size()) return EINVAL;
    uint32_t limit = (mask & kLimit) ? attr.srq_limit : srq.limit;
    if (new_max < limit) return EINVAL;
  }
  if ((mask & kLimit) && attr.srq_limit > new_max) return EINVAL;
  srq.max_wr = new_max;
  if (mask & kLimit) srq.limit = attr.srq_limit;  // 0 disarms
  return 0;
}

Errno srq_post(Srq& srq, const RecvWr& wr) {
  if (wr.num_sge > srq.max_sge) return EINVAL;
  if (wr.num_sge > 0 && wr.sg_list == nullptr) return EINVAL;
  if (srq.rq.size() >= srq.max_wr) return ENOMEM;
  RecvWqe r;
  r.wr_id = wr.wr_id;
  r.sges.assign(wr.sg_list, wr.sg_list + wr.num_sge);
  for (const Sge& sg : r.sges) r.length += sg.length;
  srq.rq.push_back(std::move(r));
  return 0;
}

bool srq_take(Core& c, Srq& srq, RecvWqe& out) {
  if (srq.rq.empty()) return false;
  out = std::move(srq.rq.front());
  srq.rq.pop_front();
  if (srq.limit != 0 && srq.rq.size() < srq.limit) {
    srq.limit = 0;  // one event per arming
    c.async_event(AsyncEventType::kSrqLimitReached, srq.user_context);
  }
  return true;
}

}  // namespace vrnic::engine
