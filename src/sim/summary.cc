// The summary of a run: FCT slowdowns by size, fairness of the long flows, fabric and NIC
// counters (Simulator::summarise), and its JSON form (summary_json).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "sim/simulator.h"

namespace vrnic::sim {

namespace {

const std::string& size_bucket(uint64_t bytes) {
  const auto& b = size_buckets();
  if (bytes <= 64 * 1024) return b[0];
  if (bytes <= 1024 * 1024) return b[1];
  return bytes <= 10 * 1024 * 1024 ? b[2] : b[3];
}

// Nearest rank (the smallest value with at least q of the sample at or below it).
double percentile(const std::vector<double>& sorted, double q) {
  const auto rank = static_cast<size_t>(std::ceil(q * sorted.size()));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

}  // namespace

const std::vector<std::string>& size_buckets() {
  static const std::vector<std::string> all = {"0-64KiB", "64KiB-1MiB", "1MiB-10MiB", "10MiB+"};
  return all;
}

// Fairness window: the second half of [0, end), where end is the run's end or the first
// completion of a long flow, whichever is first (all long flows are then still running).
Summary Simulator::summarise(uint64_t events, double wall_s) {
  Summary s;
  s.scenario = sc_.name;
  s.scheme = scheme_name(sc_.nic.scheme);
  s.seed = sc_.seed;
  s.sim_time_ns = clock_.now_ns();
  s.events = events;
  s.wall_s = wall_s;
  s.flows_total = flows_.size();
  std::map<std::string, std::vector<double>> slow;
  uint64_t end = s.sim_time_ns;
  for (const Flow& f : flows_) {
    s.fct_ns.push_back(f.fct_ns);
    s.flows.push_back({f.spec.src, f.spec.dst, f.spec.bytes, f.spec.start_ns,
                       f.finished && !f.failed ? f.fct_ns : 0, f.ideal_ns, f.spec.verb,
                       f.spec.transport});
    s.flows_failed += f.failed;
    if (!f.finished || f.failed) continue;
    ++s.flows_completed;
    slow[size_bucket(f.spec.bytes)].push_back(static_cast<double>(f.fct_ns) / f.ideal_ns);
    if (!f.bins.empty()) end = std::min(end, f.spec.start_ns + f.fct_ns);
  }
  for (auto& [bucket, v] : slow) {
    std::sort(v.begin(), v.end());
    s.fct_slowdown[bucket] = {percentile(v, 0.5), percentile(v, 0.95), percentile(v, 0.99),
                              v.size()};
  }
  const uint64_t b0 = end / 2 / bin_ns_, b1 = end / bin_ns_;  // whole bins within the window
  double sum = 0, sq = 0;
  for (const Flow& f : flows_) {
    if (f.bins.empty() || b1 <= b0) continue;
    uint64_t bytes = 0;
    for (uint64_t b = b0; b < b1; ++b) bytes += f.bins[b];
    const double gbps = bytes * 8.0 / ((b1 - b0) * bin_ns_);
    s.long_flow_gbps.push_back(gbps);
    sum += gbps;
    sq += gbps * gbps;
  }
  const auto n = static_cast<double>(s.long_flow_gbps.size());
  if (n >= 2 && sq > 0) s.jain_fairness = sum * sum / (n * sq);  // Jain: (sum x)^2 / (n sum x^2)
  summarise_fabric(s);
  s.queue_series = queue_series_;
  s.bin_ns = bin_ns_;
  for (const Flow& f : flows_)
    if (!f.bins.empty()) {
      s.long_flow_series_gbps.emplace_back();
      for (uint64_t b = 0; b < f.bins.size() && b * bin_ns_ < s.sim_time_ns; ++b)
        s.long_flow_series_gbps.back().push_back(f.bins[b] * 8.0 / bin_ns_);
    }
  s.atomics = atomics_;
  for (const auto& [h, in] : atomic_in_) {
    const std::vector<uint64_t>& out = hosts_[h]->atomic_acks_out();
    for (size_t i = 0; i < in.size() && i < out.size(); ++i)
      s.atomic_responder_ns.push_back(out[i] - in[i]);
  }
  return s;
}

// The engines' counters, the switches' drops, pauses and marks, and their queues.
void Simulator::summarise_fabric(Summary& s) const {
  for (const auto& h : hosts_) {
    const engine::Counters& c = h->dev().counters();
    s.cnps_sent += c.np_cnp_sent;
    s.retransmitted_packets += c.retransmitted_packets;
    s.ack_timeouts += c.ack_timeouts;
  }
  s.drops = net_.drops();
  s.pfc_pause_frames = net_.pause_frames();
  s.nic_pause_frames = net_.nic_pause_frames();
  const auto by_prio = net_.pause_frames_by_prio();
  for (int q = 0; q < kPriorities; ++q)
    if (by_prio[q] > 0) s.pfc_pause_frames_by_priority[q] = by_prio[q];
  s.ecn_marked = net_.marked();
  s.watchdog_storms = net_.storms();
  s.dcbx_mismatches = net_.dcbx_check();
  summarise_ets(s);
  uint64_t busiest = 0;  // the bottleneck: the port with the most queue summed at dequeue
  for (uint32_t i = 0; i < net_.port_count(); ++i) {
    const Port& p = net_.port(i);
    s.watchdog_drops += p.storm_drops;
    s.pauses_ignored += p.pauses_ignored;  // a NIC's, or a switch's
    for (uint32_t q = 0; q < kPriorities; ++q) {
      s.pfc_resume_frames += p.resumes_by_prio[q];
      s.pfc_pauses_expired += p.pauses_expired[q];
      if (p.pauses_by_prio[q] == 0 && p.resumes_by_prio[q] == 0 && p.pauses_expired[q] == 0)
        continue;
      s.pfc_ports.push_back({i, p.node, q, net_.is_switch(p.node), p.pauses_by_prio[q],
                             p.resumes_by_prio[q], p.pauses_expired[q]});
    }
    if (!net_.is_switch(p.node)) continue;
    s.queue_max_bytes = std::max(s.queue_max_bytes, p.queue_max);
    if (p.queue_samples > 0 && p.queue_sum >= busiest) {
      busiest = p.queue_sum;
      s.bottleneck_queue_mean_bytes = p.queue_sum / p.queue_samples;
    }
  }
}

// ETS at the bottleneck: the switch port that sent the most bytes after stats_from_ns, and
// each traffic class's part of them.
void Simulator::summarise_ets(Summary& s) const {
  uint64_t most = 0;
  const Port* bottleneck = nullptr;
  for (uint32_t i = 0; i < net_.port_count(); ++i) {
    const Port& p = net_.port(i);
    uint64_t sent = 0;
    for (uint64_t b : p.tc_bytes) sent += b;
    if (net_.is_switch(p.node) && sent > most) most = sent, bottleneck = &p;
  }
  if (bottleneck == nullptr) return;
  for (int tc = 0; tc < kPriorities; ++tc)
    if (bottleneck->tc_bytes[tc] > 0)
      s.ets_shares[tc] = static_cast<double>(bottleneck->tc_bytes[tc]) / static_cast<double>(most);
}

std::string summary_json(const Summary& s, bool with_wall) {
  nlohmann::ordered_json j;
  j["scenario"] = s.scenario;
  j["scheme"] = s.scheme;
  j["seed"] = s.seed;
  j["sim_time_ns"] = s.sim_time_ns;
  j["events"] = s.events;
  if (with_wall) {
    j["wall_s"] = s.wall_s;
    j["events_per_s"] = s.wall_s > 0 ? s.events / s.wall_s : 0.0;
  }
  j["flows_total"] = s.flows_total;
  j["flows_completed"] = s.flows_completed;
  j["flows_failed"] = s.flows_failed;
  j["drops"] = s.drops;
  j["pfc_pause_frames"] = s.pfc_pause_frames;
  auto& pp = j["pfc_pause_frames_by_priority"] = nlohmann::ordered_json::object();
  for (const auto& [prio, n] : s.pfc_pause_frames_by_priority) pp[std::to_string(prio)] = n;
  j["nic_pause_frames"] = s.nic_pause_frames;
  j["pfc_resume_frames"] = s.pfc_resume_frames;
  j["pfc_pauses_expired"] = s.pfc_pauses_expired;
  j["cnps_sent"] = s.cnps_sent;
  j["ecn_marked"] = s.ecn_marked;
  j["retransmitted_packets"] = s.retransmitted_packets;
  j["ack_timeouts"] = s.ack_timeouts;
  j["watchdog_storms"] = s.watchdog_storms;
  j["watchdog_drops"] = s.watchdog_drops;
  j["pauses_ignored"] = s.pauses_ignored;
  j["dcbx_mismatches"] = s.dcbx_mismatches.size();
  j["dcbx_report"] = s.dcbx_mismatches;
  auto& ets = j["ets_shares"] = nlohmann::ordered_json::object();
  for (const auto& [tc, share] : s.ets_shares) ets[std::to_string(tc)] = share;
  j["jain_fairness"] = nullptr;  // fewer than two long flows
  if (s.jain_fairness >= 0) j["jain_fairness"] = s.jain_fairness;
  j["long_flow_gbps"] = s.long_flow_gbps;
  j["queue_max_bytes"] = s.queue_max_bytes;
  j["bottleneck_queue_mean_bytes"] = s.bottleneck_queue_mean_bytes;
  auto& fs = j["fct_slowdown"] = nlohmann::ordered_json::object();
  for (const std::string& bucket : size_buckets()) {
    const auto it = s.fct_slowdown.find(bucket);
    if (it == s.fct_slowdown.end()) continue;
    const Percentiles& p = it->second;
    fs[bucket] = {{"count", p.count}, {"p50", p.p50}, {"p95", p.p95}, {"p99", p.p99}};
  }
  j["fct_ns"] = s.fct_ns;
  auto& atomics = j["atomics"] = nlohmann::ordered_json::array();
  for (const AtomicResult& a : s.atomics) {
    char fetched[19], memory[19];
    std::snprintf(fetched, sizeof fetched, "0x%016llx", static_cast<unsigned long long>(a.fetched));
    std::snprintf(memory, sizeof memory, "0x%016llx", static_cast<unsigned long long>(a.memory));
    atomics.push_back({{"flow", a.flow}, {"fetched", fetched}, {"memory", memory}});
  }
  j["atomic_responder_ns"] = s.atomic_responder_ns;
  return j.dump(2) + "\n";
}

}  // namespace vrnic::sim
