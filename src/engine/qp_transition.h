// qp_transition: the one function that changes a QP's state (IBA 10.3.1).
#pragma once
#include <cstdint>

#include "engine/core.h"
#include "engine/qp.h"

namespace vrnic::engine {

// Moves qp to `to`: the edge is checked against the state diagram (transition_allowed,
// qp.cc), then what entering the state implies is done (queues reset, PSNs loaded, WQEs
// flushed, ...). mask: the Modify QP attribute mask (kModify only; attributes are applied
// before). A modify to the current state changes attributes only. Returns 0, or EINVAL for
// an edge the diagram does not have (the QP is left as it was).
Errno qp_transition(Core& c, Qp& qp, QpState to, QpCause cause, uint32_t mask = 0);

}  // namespace vrnic::engine
