// LiveConfig: every VRNIC_* setting of the live device, read from the environment and
// checked once, when the device opens (docs/live.md "Environment").
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "engine/dcqcn.h"
#include "transport/udp/fault_injector.h"

namespace vrnic::live {

// The timing rules' parameters (live/scheduler.h says what each does).
struct Timing {
  uint64_t defer_ns = 200'000;         // VRNIC_DEFER_US
  uint64_t recheck_max_ns = 4'000'000; // VRNIC_RECHECK_MAX_US
  uint64_t spin_ns = 50'000;           // VRNIC_SPIN_US
  uint64_t ack_hold_ns = 250'000;      // VRNIC_ACK_HOLD_US
  uint64_t ack_hold_crossed_ns = 20'000;  // the hold of a QP whose own packets await an ACK
  uint64_t event_spin_ns = 50'000;     // VRNIC_EVENT_SPIN_US
  uint64_t idle_yield_ns = 2'000;      // VRNIC_IDLE_YIELD_US
};

struct LiveConfig {
  std::string ip;          // VRNIC_IP: the device address; empty: the first free loopback one
  std::string reserved;    // VRNIC_RESERVED: the address `vrnic run` picked for the program
  std::string pcap;        // VRNIC_PCAP: capture file; empty: none
  std::optional<transport::FaultConfig> faults;  // VRNIC_FAULTS
  bool offload = true;     // VRNIC_OFFLOAD=0: no UDP_SEGMENT / UDP_GRO
  size_t rx_queues = 1;    // VRNIC_RX_QUEUES
  std::optional<uint32_t> send_window_bytes;  // VRNIC_SEND_WINDOW_KB
  engine::DcqcnParams cc;  // VRNIC_CC (NVIDIA's parameter names)
  bool direct = false;     // VRNIC_DIRECT
  bool auth = false;       // VRNIC_AUTH: authenticated connections (docs/protocol.md)
  bool stats = false;      // VRNIC_STATS: print the counters at exit
  bool debug = false;      // VRNIC_DEBUG: diagnostics on stderr
  Timing timing;

  // Reads every setting through `lookup` (the environment: null or "" for one that is not
  // set). False with `error` naming the first bad setting, its value and what it takes.
  using Lookup = std::function<const char*(const char* name)>;
  static bool parse(const Lookup& lookup, LiveConfig& out, std::string& error);
  // The same from this process's environment: the one place of the live layer that reads it.
  static bool from_environment(LiveConfig& out, std::string& error);
};

}  // namespace vrnic::live
