// Completer: responses (ACK, NAK, READ response, atomic ACK) retire send WQEs in order,
// write their CQEs, and drive Go-Back-N, RNR waits and the local ACK timeout.
#pragma once
#include <cstdint>

#include "engine/core.h"

namespace vrnic::engine {

// A response packet for this QP (ACK / NAK / READ response / atomic ACK).
void completer_receive(Core& c, Qp& qp, const wire::Packet& p);
// Local ACK timeout and RNR wait expiry.
void completer_on_timer(Core& c, Qp& qp);
// The front WQE failed locally (memory check): complete it with its error, QP to ERR.
void completer_check_front(Core& c, Qp& qp);
// Retires the bind / local invalidate WQEs at the front that have run (they wait for no
// response, only for the WQEs before them).
void completer_retire_local(Core& c, Qp& qp);

}  // namespace vrnic::engine
