// Direct mode in the requester: when a send WQE is copied by the DirectLink, when held copies go.
#pragma once
#include <cstddef>

#include "engine/core.h"

namespace vrnic::engine {

// What requester_progress does with the WQE at its cursor after direct mode had its say.
enum class DirectStep : uint8_t {
  kWire,   // go on as without direct mode (Go-Back-N: send, wait, or fail the WQE)
  kAgain,  // a copy was submitted, or the held copies were performed: look at the queue again
};

// Direct mode's decision for the WQE at the cursor (with a DirectLink). An RDMA WRITE or
// READ at the front of an idle send queue is submitted as a copy; held copies are performed
// when something behind them must not wait for a poll: a bind or local invalidate, a fenced
// or rd/atomic-limited WQE they hold up, a full link, or a WQE that goes on the wire.
DirectStep requester_direct_step(Core& c, Qp& qp, SendWqe& w);

// Shared by requester.cc and requester_direct.cc.
// Local memory check when a WQE starts (10.6.3): every SGE a valid region of the QP's PD.
bool requester_check_local_sges(Core& c, const Qp& qp, const SendWqe& w);
// A WQE that must wait for the READs / atomics outstanding before it: a fence (10.8.3.3) or
// the QP's rd/atomic limit (max_rd_atomic).
bool requester_waits_for_rd_atomic(const Qp& qp, const SendWqe& w);

}  // namespace vrnic::engine
