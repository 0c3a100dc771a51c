// Building a scenario's fabric: star, dumbbell, ring and Clos (fat-tree) topologies, and
// the hosts with their engines (simulator.h).
#include <algorithm>

#include "sim/simulator.h"

namespace vrnic::sim {

using namespace engine;

void Simulator::build_topology() {
  const uint32_t n = sc_.host_count();
  for (uint32_t i = 0; i < n; ++i)
    host_node_.push_back(net_.add_host(ipv4_of_host(i), sc_.nic.qos, sc_.nic.rx));
  if (sc_.topology == "ring") return build_ring();
  if (sc_.topology == "clos") return build_clos();
  if (sc_.topology == "dumbbell") {
    const uint32_t left = net_.add_switch(sc_.sw), right = net_.add_switch(sc_.sw);
    for (uint32_t i = 0; i < n; ++i)
      net_.connect(host_node_[i], i < sc_.senders ? left : right, sc_.host_rate_bps,
                   sc_.link_delay_ns);
    net_.connect(left, right, sc_.core_rate_bps, sc_.link_delay_ns);
  } else {
    const uint32_t sw = net_.add_switch(sc_.sw);
    for (uint32_t i = 0; i < n; ++i)
      net_.connect(host_node_[i], sw, sc_.host_rate_bps, sc_.link_delay_ns);
  }
  net_.compute_routes();
  build_hosts();
}

// Switches in a ring, each with its hosts; every switch sends toward another switch's hosts
// out of its clockwise link, so that the ring links' buffers depend on each other in a cycle.
void Simulator::build_ring() {
  std::vector<uint32_t> sw, cw;  // the switches; each one's clockwise port
  for (uint32_t i = 0; i < sc_.switches; ++i) sw.push_back(net_.add_switch(sc_.sw));
  for (uint32_t i = 0; i < host_node_.size(); ++i)
    net_.connect(host_node_[i], sw[i / sc_.hosts_per_switch], sc_.host_rate_bps,
                 sc_.link_delay_ns);
  for (uint32_t i = 0; i < sc_.switches; ++i)
    cw.push_back(net_.connect(sw[i], sw[(i + 1) % sc_.switches], sc_.core_rate_bps,
                              sc_.link_delay_ns));
  net_.compute_routes();
  for (uint32_t i = 0; i < sc_.switches; ++i)
    for (uint32_t h = 0; h < host_node_.size(); ++h)
      if (h / sc_.hosts_per_switch != i) net_.set_route(sw[i], ipv4_of_host(h), cw[i]);
  build_hosts();
}

// A three-tier Clos (scenario.h): ToRs under aggregation switches in pods, the aggregation
// switches under the cores; every tier's links at the core rate, the hosts' at theirs.
void Simulator::build_clos() {
  const uint32_t per_agg = sc_.cores / sc_.aggs_per_pod;
  std::vector<uint32_t> core;
  for (uint32_t c = 0; c < sc_.cores; ++c) core.push_back(net_.add_switch(sc_.sw));
  uint32_t host = 0;
  for (uint32_t p = 0; p < sc_.pods; ++p) {
    std::vector<uint32_t> agg;
    for (uint32_t a = 0; a < sc_.aggs_per_pod; ++a) {
      agg.push_back(net_.add_switch(sc_.sw));
      for (uint32_t c = a * per_agg; c < (a + 1) * per_agg; ++c)
        net_.connect(agg.back(), core[c], sc_.core_rate_bps, sc_.link_delay_ns);
    }
    for (uint32_t t = 0; t < sc_.tors_per_pod; ++t) {
      const uint32_t tor = net_.add_switch(sc_.sw);
      for (uint32_t a : agg) net_.connect(tor, a, sc_.core_rate_bps, sc_.link_delay_ns);
      for (uint32_t h = 0; h < sc_.hosts_per_tor; ++h, ++host)
        net_.connect(host_node_[host], tor, sc_.host_rate_bps, sc_.link_delay_ns);
    }
  }
  net_.compute_routes();
  build_hosts();
}

// The base RTT and BDP the schemes use, as the HPCC simulator's GLOBAL_T: the longest of
// every host pair's, each the propagation both ways plus one full data packet's
// serialisation on every hop out and one ACK's on every hop back.
CcPath Simulator::cc_path() const {
  CcPath c;
  c.line_rate_bps = sc_.host_rate_bps;
  const uint64_t data = sc_.nic.mtu + 16 + 16 + kFrameOverhead, ack = 20 + kFrameOverhead;
  const uint32_t n = sc_.host_count();
  for (uint32_t a = 0; a < n; ++a)
    for (uint32_t b = a + 1; b < n; ++b)
      c.base_rtt_ns = std::max(c.base_rtt_ns, leg_ns(a, b, data) + leg_ns(b, a, ack));
  c.bdp_bytes = static_cast<uint64_t>(c.line_rate_bps / 8e9 * static_cast<double>(c.base_rtt_ns));
  return c;
}

void Simulator::build_hosts() {
  const uint32_t n = sc_.host_count();
  DeviceConfig cfg;
  cfg.cc = sc_.dcqcn;
  cfg.cc.enabled = sc_.nic.cc;
  cfg.cc.line_rate_bps = sc_.host_rate_bps;
  cfg.cc.pace_at_line_rate = true;  // the NIC never outruns its link
  cfg.cc.pacer_burst_ns = 0;        // in virtual time nobody wakes late
  cfg.send_window_bytes = sc_.nic.send_window_bytes;
  cfg.unreliable_pace_bytes_per_us = 0;  // the link serialises; DCQCN paces UC
  cfg.icrc = sc_.nic.icrc;
  const bool hpcc = sc_.nic.scheme == CcScheme::kHpcc;
  if (sc_.nic.scheme != CcScheme::kDcqcn) {
    cc_path_ = cc_path();
    if (sc_.nic.cc_window_bytes != 0) cc_path_.bdp_bytes = sc_.nic.cc_window_bytes;
    rate_control_ = std::make_unique<SchemeFactory>(sc_.nic.scheme, cfg.cc, sc_.hpcc, cc_path_);
    cfg.rate_control = rate_control_.get();
    if (hpcc) cfg.cc.enabled = false;  // HPCC needs no ECN: packets leave not ECN-capable
  }
  std::vector<uint64_t> sending(n, 0);  // flows each host sends (its CQ's share)
  for (const FlowSpec& f : sc_.flows) ++sending[f.src];
  for (uint32_t i = 0; i < n; ++i) {
    const auto cq_entries = static_cast<uint32_t>(
        std::min<uint64_t>(65536, (sc_.nic.wqes_in_flight + 1) * (sending[i] + 1)));
    if (host_of_node_.size() <= host_node_[i]) host_of_node_.resize(host_node_[i] + 1, kNone);
    host_of_node_[host_node_[i]] = i;
    hosts_.push_back(std::make_unique<Host>(net_, clock_, net_.host_port(host_node_[i]),
                                            ipv4_of_host(i), cfg, cq_entries, payload_));
    if (sc_.nic.pcie) hosts_.back()->set_nic_timing(&ev_, i);
    hosts_.back()->set_int(hpcc);
  }
}

}  // namespace vrnic::sim
