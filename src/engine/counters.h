// Per-device counters: one X-macro list gives the struct, the names and the printing order (the layers above publish theirs after them: live/counters_file.h).
#pragma once
#include <cstdint>

namespace vrnic::engine {

#define VRNIC_COUNTERS(X)                                                                  \
  X(tx_packets) X(tx_bytes) X(rx_packets) X(rx_bytes)                                      \
  X(tx_send) X(tx_write) X(tx_read_request) X(tx_read_response) X(tx_atomic)               \
  X(tx_atomic_ack) X(tx_ack) X(tx_cnp)                                                     \
  X(rx_send) X(rx_write) X(rx_read_request) X(rx_read_response) X(rx_atomic)               \
  X(rx_atomic_ack) X(rx_ack) X(rx_cnp)                                                     \
  X(tx_nak_psn_seq) X(tx_nak_rnr) X(tx_nak_inv_req) X(tx_nak_rem_access) X(tx_nak_rem_op)  \
  X(rx_nak_psn_seq) X(rx_nak_rnr) X(rx_nak_inv_req) X(rx_nak_rem_access) X(rx_nak_rem_op)  \
  X(rx_duplicate) X(rx_out_of_sequence) X(retransmitted_packets) X(ack_timeouts)           \
  X(rnr_retries) X(implicit_naks) X(rx_icrc_errors) X(rx_icrc_ip_id_recovered)             \
  X(rx_malformed) X(rx_unknown_qp) X(rx_wrong_source) X(rx_bad_state) X(rx_access_errors)  \
  X(rx_auth_ok) X(rx_auth_failed) X(rx_auth_replayed)                                      \
  X(duplicate_atomics_replayed) X(duplicate_reads_replayed) X(cqe_ok) X(cqe_error)        \
  X(cq_overflows) X(ack_holds_expired)                                                     \
  X(rx_qkey_errors) X(rx_dropped_no_recv) X(rx_uc_dropped) X(rx_mcast_packets)           \
  X(direct_writes) X(direct_reads) X(direct_bytes) X(direct_fallbacks)                    \
  X(tx_gsi) X(rx_gsi)                                                                      \
  X(np_ecn_marked_roce_packets) X(np_cnp_sent) X(rp_cnp_handled) X(rp_cnp_ignored)

struct Counters {
#define VRNIC_COUNTER_FIELD(name) uint64_t name = 0;
  VRNIC_COUNTERS(VRNIC_COUNTER_FIELD)
#undef VRNIC_COUNTER_FIELD
};

}  // namespace vrnic::engine
