// The RDMA CM's VRNIC_CM_* settings, parsed and checked in one place; a bad value is refused.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "cm/types.h"

namespace vrnic::rdmacm {

struct Settings {
  // VRNIC_CM_RESPONSE_TIMEOUT: 4.096 us x 2^n; VRNIC_CM_RETRIES: resends of a REQ, REP,
  // DREQ or SIDR_REQ (cm::Config's defaults).
  uint8_t response_timeout = cm::Config{}.cm_response_timeout;
  uint8_t retries = cm::Config{}.max_cm_retries;
  // VRNIC_CM_ACK_TIMEOUT: the local ACK timeout of a connection's QPs unless the program
  // sets one: 17 (537 ms), the kernel CMA's on RoCE: a packet lifetime of 16
  // (CMA_IBOE_PACKET_LIFETIME since Linux 6.2, 18 before) plus one.
  uint8_t ack_timeout = 17;
  bool debug = false;  // VRNIC_CM_DEBUG: a line on stderr per MAD and per event
};

// Reads each setting through `get` (unset or empty: the default stays). False with `error`
// naming the first bad one, its value and what it takes.
bool parse_settings(const std::function<const char*(const char*)>& get, Settings& out,
                    std::string& error);

// The process's, from the environment, read once. `error` (if given) gets the reason when a
// setting was refused; the defaults then stand and the CM refuses to start (state.h).
const Settings& process_settings(std::string* error = nullptr);

}  // namespace vrnic::rdmacm
