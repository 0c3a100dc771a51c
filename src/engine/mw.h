// Memory windows: the bind and invalidate operations a send queue executes (IBA 10.6.7),
// and SEND with Invalidate at the responder.
#pragma once
#include <cstdint>

#include "engine/types.h"

namespace vrnic::engine {

class Core;
class Qp;

// Binds (or, for a type 1 window given no MR and length 0, unbinds) as the bind WQE reaches
// execution. Returns kSuccess or kMwBindErr (the QP then goes to ERR).
WcStatus mw_bind(Core& c, Qp& qp, const MwBindInfo& b);
// IBV_WR_LOCAL_INV: invalidates a bound type 2 window of this QP. kLocQpOpErr otherwise.
WcStatus mw_local_invalidate(Core& c, Qp& qp, uint32_t rkey);
// SEND with Invalidate: the same rules (o10-37.2.26: never a type 1 window) for the IETH rkey;
// false when it names no window this QP may invalidate.
bool mw_remote_invalidate(Core& c, Qp& qp, uint32_t rkey);

}  // namespace vrnic::engine
