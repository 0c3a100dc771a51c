// A simulation scenario: topology, link, switch, NIC and DCQCN parameters, and the flows;
// read from JSON (docs/sim.md "Scenario files"), and the built-in scenarios by name.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/dcqcn.h"
#include "sim/congestion.h"
#include "sim/network.h"
#include "sim/traffic.h"

namespace vrnic::sim {

struct NicParams {
  uint64_t processing_delay_ns = 1000;  // between a flow's start and its first post
  uint32_t mtu = 4096;                  // path MTU of the QPs: 256..4096
  uint32_t send_window_bytes = 256 * 1024;
  uint32_t wqes_in_flight = 16;         // WRITEs of 64 KiB a flow keeps posted
  uint8_t ack_timeout = 10;             // local ACK timeout exponent: 4.096 us * 2^n
  // The engines compute and check each packet's ICRC. Off by default: the simulated links
  // corrupt nothing, so it changes no result; captures fill the ICRC in either way.
  bool icrc = false;
  bool cc = true;                       // ECN + DCQCN (DcqcnParams::enabled)
  // The congestion control: the engine's DCQCN, DCQCN+w or HPCC (congestion.h).
  CcScheme scheme = CcScheme::kDcqcn;
  uint64_t cc_window_bytes = 0;         // DCQCN+w's window at line rate; 0: one BDP
  QosParams qos;                        // DCB settings (willing: the switch's apply)
  // PCIe timing of the NIC (docs/sim.md "NIC model"); off: the engine's work takes no time.
  bool pcie = false;
  uint64_t doorbell_ns = 150;     // the MMIO doorbell write reaching the NIC
  uint64_t dma_read_ns = 125;     // one DMA read round trip, as measured in "RDMA Networking - Message TX" (2024)
  uint64_t rx_pipeline_ns = 500;  // a received packet through the NIC to its answer
  uint64_t atomic_rmw_ns = 250;   // an atomic's read and write of host memory
  uint64_t cqe_write_ns = 60;     // a CQE's posted DMA write until the program can poll it
  uint32_t inline_bytes = 0;      // messages this small ride in the WQE: no payload read
  bool blueflame = false;         // WQEs written by MMIO with the doorbell: no WQE read
  bool doorbell_batching = true;  // one doorbell for a post of several WQEs (else one each)
  NicRxParams rx;                 // the receive buffer and the PAUSE frames the NIC sends
};

struct Scenario {
  std::string name, description;
  // "star": hosts on one switch; "dumbbell": two switches; "ring": switches in a ring, each
  // with hosts_per_switch hosts, every route going clockwise (a cyclic buffer dependency)
  std::string topology = "star";
  uint32_t hosts = 2;             // star
  uint32_t senders = 1, receivers = 1;  // dumbbell: hosts 0..N-1 left, N..N+M-1 right
  uint32_t switches = 4, hosts_per_switch = 1;  // ring: host h on switch h / hosts_per_switch
  // "clos" (also "fat-tree" with k, and "hpcc-320"): pods of ToRs and aggregation switches,
  // every ToR of a pod linked to every aggregation switch of it, aggregation switch j of
  // each pod to cores j * cores / aggs_per_pod onward (cores / aggs_per_pod of them);
  // hosts_per_tor hosts under each ToR. Switch links at core_rate_bps.
  uint32_t pods = 4, tors_per_pod = 2, aggs_per_pod = 2, hosts_per_tor = 2, cores = 4;
  double host_rate_bps = 100e9, core_rate_bps = 100e9;  // host links; the switch-switch link
  uint64_t link_delay_ns = 1000;
  SwitchParams sw;
  NicParams nic;
  engine::DcqcnParams dcqcn;  // line_rate_bps is set from the host link
  HpccParams hpcc;
  std::vector<FlowSpec> flows;
  std::vector<PoissonTraffic> traffic;  // generated at the run, from the seed
  uint64_t duration_ns = 100'000'000;  // the simulation stops here at the latest
  uint64_t long_flow_bytes = 10'000'000;  // flows this large count for fairness
  uint64_t stats_from_ns = UINT64_MAX;  // queue means from here; default duration_ns / 2
  uint64_t seed = 1;

  uint32_t host_count() const {
    if (topology == "ring") return switches * hosts_per_switch;
    if (topology == "clos") return pods * tors_per_pod * hosts_per_tor;
    return topology == "dumbbell" ? senders + receivers : hosts;
  }
};

// Parses a scenario; throws std::runtime_error naming the bad field.
Scenario parse_scenario(const std::string& json_text);
// The built-in scenarios (src/sim/scenarios/*.json, compiled in): names and texts.
std::vector<std::string> builtin_names();
const char* builtin_text(const std::string& name);  // null: no such scenario

}  // namespace vrnic::sim
