// Shared receive queues: one receive queue that many RC QPs take their receive WQEs from
// (IBA 10.2.9), with the SRQ limit that raises SRQ_LIMIT_REACHED once when armed.
#pragma once
#include <cstdint>
#include <deque>

#include "engine/device.h"
#include "engine/qp.h"
#include "engine/types.h"

namespace vrnic::engine {

class Core;
class Pd;

// An XRC domain (IBA 10.2.10): XRC SRQs and XRC target QPs of one domain serve each other.
class Xrcd {
 public:
  uint32_t users = 0;  // SRQs and target QPs in it (close_xrcd is EBUSY while > 0)
};

class Srq {
 public:
  Pd* pd = nullptr;
  Xrcd* xrcd = nullptr;  // XRC SRQs only: its domain, its CQ and its number (XRCETH)
  Cq* cq = nullptr;
  uint32_t srqn = 0;
  void* user_context = nullptr;  // returned in SRQ async events
  uint32_t max_wr = 0, max_sge = 0;
  uint32_t limit = 0;  // armed limit; 0 = not armed (IBA 10.2.9: one event, then disarmed)
  uint32_t users = 0;  // QPs attached (destroy_srq is EBUSY while > 0)
  std::deque<RecvWqe> rq;
};

// Moves the oldest WQE of the SRQ into out; false if the SRQ is empty. Raises
// SRQ_LIMIT_REACHED (and disarms) when the WQEs left drop below the armed limit.
bool srq_take(Core& c, Srq& srq, RecvWqe& out);
Errno srq_post(Srq& srq, const RecvWr& wr);
// Checks a requested size against the device limits; fills in the granted values.
Errno srq_check_init(const DeviceLimits& l, Device::SrqAttr& attr);
Errno srq_modify(const DeviceLimits& l, Srq& srq, const Device::SrqAttr& attr, uint32_t mask);
// XRC target: points the QP at the XRC SRQ the request names (its WQEs, PD and CQ); false if
// there is no such SRQ or it is of another XRC domain.
bool xrc_bind_srq(Core& c, Qp& qp, uint32_t srqn);

}  // namespace vrnic::engine
