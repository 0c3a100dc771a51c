// The connection manager's counters as the device's counters show them: one X-macro list gives their names, order and values.
#pragma once
#include <cstddef>
#include <cstdint>

#include "cm/types.h"

namespace vrnic::cm {

// X(name, field of Counters): MADs sent and received by attribute (REQ 0x10 .. SIDR_REP 0x18),
// then retries, timeouts, rejects, duplicates, drops. librdmacm.so.1 keeps the Manager and
// publishes these after the device's own counters (`vrnic stats`, `vrnic run --stats`).
#define VRNIC_CM_COUNTERS(X)                                                                \
  X(cm_tx_req, tx[0]) X(cm_tx_mra, tx[1]) X(cm_tx_rej, tx[2]) X(cm_tx_rep, tx[3])           \
  X(cm_tx_rtu, tx[4]) X(cm_tx_dreq, tx[5]) X(cm_tx_drep, tx[6]) X(cm_tx_sidr_req, tx[7])    \
  X(cm_tx_sidr_rep, tx[8])                                                                  \
  X(cm_rx_req, rx[0]) X(cm_rx_mra, rx[1]) X(cm_rx_rej, rx[2]) X(cm_rx_rep, rx[3])           \
  X(cm_rx_rtu, rx[4]) X(cm_rx_dreq, rx[5]) X(cm_rx_drep, rx[6]) X(cm_rx_sidr_req, rx[7])    \
  X(cm_rx_sidr_rep, rx[8])                                                                  \
  X(cm_retries, retries) X(cm_timeouts, timeouts) X(cm_rejects_sent, rejects_sent)          \
  X(cm_rejects_received, rejects_received) X(cm_duplicates, duplicates)                     \
  X(cm_rx_malformed, rx_malformed) X(cm_rx_unmatched, rx_unmatched)                         \
  X(cm_rx_bad_state, rx_bad_state) X(cm_parked, parked) X(cm_backlog_drops, backlog_drops)

inline constexpr const char* kCounterNames[] = {
#define VRNIC_CM_COUNTER_NAME(name, field) #name,
    VRNIC_CM_COUNTERS(VRNIC_CM_COUNTER_NAME)
#undef VRNIC_CM_COUNTER_NAME
};
inline constexpr size_t kCounterCount = sizeof kCounterNames / sizeof kCounterNames[0];

// The values of `c` in kCounterNames' order; `out` holds kCounterCount of them.
inline void counter_values(const Counters& c, uint64_t* out) {
  size_t i = 0;
#define VRNIC_CM_COUNTER_VALUE(name, field) out[i++] = c.field;
  VRNIC_CM_COUNTERS(VRNIC_CM_COUNTER_VALUE)
#undef VRNIC_CM_COUNTER_VALUE
}

}  // namespace vrnic::cm
