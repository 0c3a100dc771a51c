// Scenario files: JSON to Scenario (scenario.h); field names in docs/sim.md.
#include "sim/scenario.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <iterator>
#include <stdexcept>

namespace vrnic::sim {
namespace {

using nlohmann::json;

template <typename T>
void get(const json& j, const char* key, T& out) {
  if (!j.contains(key)) return;
  try {
    out = j.at(key).get<T>();
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("scenario: bad value for \"") + key + "\": " + e.what());
  }
}

void get_gbps(const json& j, const char* key, double& bps) {
  double gbps = bps / 1e9;
  get(j, key, gbps);
  if (gbps <= 0) throw std::runtime_error(std::string("scenario: ") + key + " must be > 0");
  bps = gbps * 1e9;
}

int key_int(const std::string& key, const char* field) {
  try {
    size_t used = 0;
    const int v = std::stoi(key, &used);
    if (used == key.size()) return v;
  } catch (const std::exception&) {
  }
  throw std::runtime_error(std::string("scenario: ") + field + ": \"" + key + "\" is no number");
}

uint8_t priority_bits(const json& j, const char* key) {
  uint8_t bits = 0;
  for (const json& p : j.at(key)) {
    const auto prio = p.get<int>();
    if (prio < 0 || prio >= kPriorities)
      throw std::runtime_error(std::string("scenario: ") + key + ": priorities are 0..7");
    bits |= static_cast<uint8_t>(1u << prio);
  }
  return bits;
}

// DCB settings: "dscp_to_priority" {"26": 3}, "priority_to_tc" [8], "ets_shares" {"tc":
// percent}, "pfc_priorities" [..], "willing" (NICs).
void parse_qos(const json& j, QosParams& q) {
  const json none = json::object();
  for (const auto& [dscp, prio] : (j.contains("dscp_to_priority") ? j["dscp_to_priority"] : none).items()) {
    const int d = key_int(dscp, "dscp_to_priority"), p = prio.get<int>();
    if (d < 0 || d > 63 || p < 0 || p >= kPriorities)
      throw std::runtime_error("scenario: dscp_to_priority: DSCP 0..63 to priority 0..7");
    q.dscp_to_prio[d] = static_cast<uint8_t>(p);
  }
  if (j.contains("priority_to_tc")) {
    const auto m = j["priority_to_tc"].get<std::vector<int>>();
    if (m.size() != kPriorities) throw std::runtime_error("scenario: priority_to_tc: 8 classes");
    for (int p = 0; p < kPriorities; ++p) {
      if (m[p] < 0 || m[p] >= kPriorities)
        throw std::runtime_error("scenario: priority_to_tc: classes are 0..7");
      q.prio_to_tc[p] = static_cast<uint8_t>(m[p]);
    }
  }
  int total = 0;
  for (const auto& [tc, share] : (j.contains("ets_shares") ? j["ets_shares"] : none).items()) {
    const int c = key_int(tc, "ets_shares"), pct = share.get<int>();
    if (c < 0 || c >= kPriorities || pct < 0 || pct > 100)
      throw std::runtime_error("scenario: ets_shares: class 0..7 to a percentage");
    q.ets_share[c] = static_cast<uint8_t>(pct);
    total += pct;
  }
  if (total > 100) throw std::runtime_error("scenario: ets_shares add up to more than 100");
  if (j.contains("pfc_priorities")) q.pfc_priorities = priority_bits(j, "pfc_priorities");
  get(j, "willing", q.willing);
}

void parse_watchdog(const json& j, WatchdogParams& w) {
  get(j, "enabled", w.enabled);
  get(j, "detect_ns", w.detect_ns);
  get(j, "restore_ns", w.restore_ns);
  std::string action = w.drop ? "drop" : "forward";
  get(j, "action", action);
  if (action != "drop" && action != "forward")
    throw std::runtime_error("scenario: watchdog action must be \"drop\" or \"forward\"");
  w.drop = action == "drop";
  if (w.detect_ns == 0 || w.restore_ns == 0)
    throw std::runtime_error("scenario: watchdog detect_ns and restore_ns must be > 0");
}

void parse_switch(const json& j, SwitchParams& s) {
  get(j, "buffer_bytes", s.buffer_bytes);
  if (j.contains("ecn")) {
    const json& e = j["ecn"];
    get(e, "enabled", s.red.enabled);
    get(e, "kmin", s.red.kmin);
    get(e, "kmax", s.red.kmax);
    get(e, "pmax", s.red.pmax);
    if (e.contains("per_gbps")) get_gbps(e, "per_gbps", s.red.per_rate_bps);
    if (s.red.kmax <= s.red.kmin) throw std::runtime_error("scenario: ecn kmax must be > kmin");
  }
  if (j.contains("pfc")) {
    const json& p = j["pfc"];
    get(p, "enabled", s.pfc);
    get(p, "xoff", s.xoff);
    get(p, "xon", s.xon);
    get(p, "pause_quanta", s.pause_quanta);
    if (s.xon > s.xoff) throw std::runtime_error("scenario: pfc xon must be <= xoff");
    if (s.pause_quanta == 0) throw std::runtime_error("scenario: pfc pause_quanta must be > 0");
  }
  if (j.contains("qos")) parse_qos(j["qos"], s.qos);
  if (j.contains("watchdog")) parse_watchdog(j["watchdog"], s.watchdog);
  if (j.contains("mmu")) {
    const json& m = j["mmu"];
    s.mmu.enabled = true;
    get(m, "enabled", s.mmu.enabled);
    get(m, "buffer_bytes", s.mmu.buffer_bytes);
    get(m, "reserve_bytes", s.mmu.reserve_bytes);
    get(m, "resume_offset_bytes", s.mmu.resume_offset_bytes);
    get(m, "headroom_bytes", s.mmu.headroom_bytes);
    get(m, "alpha", s.mmu.alpha);
    if (s.mmu.alpha <= 0 || s.mmu.alpha > 64)
      throw std::runtime_error("scenario: mmu alpha must be in (0, 64]");
  }
  for (const json& d : j.contains("drop") ? j["drop"] : json::array()) {
    DropRule r;
    get(d, "opcode", r.opcode);
    get(d, "nth", r.nth);
    if (r.nth == 0) throw std::runtime_error("scenario: a drop rule's nth counts from 1");
    s.drop.push_back(r);
  }
}

// The NIC's receive buffer: "rate_gbps" (absent: the NIC keeps up with any link), its size,
// XOFF/XON thresholds and the quanta of its PAUSE frames.
void parse_nic_rx(const json& j, NicRxParams& r) {
  if (j.contains("rate_gbps")) get_gbps(j, "rate_gbps", r.rate_bps);
  get(j, "buffer_bytes", r.buffer_bytes);
  get(j, "xoff", r.xoff);
  get(j, "xon", r.xon);
  get(j, "pause_quanta", r.pause_quanta);
  if (r.xon > r.xoff || r.xoff > r.buffer_bytes)
    throw std::runtime_error("scenario: nic rx must have xon <= xoff <= buffer_bytes");
  if (r.pause_quanta == 0) throw std::runtime_error("scenario: nic rx pause_quanta must be > 0");
}

void parse_nic(const json& j, NicParams& n) {
  get(j, "processing_delay_ns", n.processing_delay_ns);
  get(j, "mtu", n.mtu);
  get(j, "icrc", n.icrc);
  get(j, "send_window_bytes", n.send_window_bytes);
  get(j, "wqes_in_flight", n.wqes_in_flight);
  get(j, "ack_timeout", n.ack_timeout);
  get(j, "cc", n.cc);
  if (j.contains("scheme")) n.scheme = parse_scheme(j["scheme"].get<std::string>());
  get(j, "cc_window_bytes", n.cc_window_bytes);
  if (j.contains("qos")) parse_qos(j["qos"], n.qos);
  if (j.contains("pcie")) {
    const json& p = j["pcie"];
    n.pcie = true;
    get(p, "enabled", n.pcie);
    get(p, "doorbell_ns", n.doorbell_ns);
    get(p, "dma_read_ns", n.dma_read_ns);
    get(p, "rx_pipeline_ns", n.rx_pipeline_ns);
    get(p, "atomic_rmw_ns", n.atomic_rmw_ns);
    get(p, "cqe_write_ns", n.cqe_write_ns);
    get(p, "inline_bytes", n.inline_bytes);
    get(p, "blueflame", n.blueflame);
    get(p, "doorbell_batching", n.doorbell_batching);
  }
  if (j.contains("rx")) parse_nic_rx(j["rx"], n.rx);
  if (n.mtu != 256 && n.mtu != 512 && n.mtu != 1024 && n.mtu != 2048 && n.mtu != 4096)
    throw std::runtime_error("scenario: nic mtu must be 256, 512, 1024, 2048 or 4096");
  if (n.wqes_in_flight == 0) throw std::runtime_error("scenario: nic wqes_in_flight must be > 0");
}

// DCQCN overrides by the DcqcnParams member names (rates in b/s, times in ns).
void parse_dcqcn(const json& j, engine::DcqcnParams& d) {
  get(j, "first_cnp_rate_bps", d.first_cnp_rate_bps);
  get(j, "g", d.g);
  get(j, "alpha_period_ns", d.alpha_period_ns);
  get(j, "initial_alpha", d.initial_alpha);
  get(j, "rate_reduce_period_ns", d.rate_reduce_period_ns);
  get(j, "min_dec_fraction", d.min_dec_fraction);
  get(j, "min_rate_bps", d.min_rate_bps);
  get(j, "ai_rate_bps", d.ai_rate_bps);
  get(j, "hai_rate_bps", d.hai_rate_bps);
  get(j, "timer_ns", d.timer_ns);
  get(j, "byte_reset", d.byte_reset);
  get(j, "threshold", d.threshold);
  get(j, "min_time_between_cnps_ns", d.min_time_between_cnps_ns);
}

void parse_hpcc(const json& j, HpccParams& h) {
  get(j, "eta", h.eta);
  get(j, "max_stage", h.max_stage);
  get(j, "ai_rate_bps", h.ai_rate_bps);
  get(j, "min_rate_bps", h.min_rate_bps);
  get(j, "base_rtt_ns", h.base_rtt_ns);
  get(j, "ack_interval", h.ack_interval);
  if (!(h.eta > 0 && h.eta <= 1)) throw std::runtime_error("scenario: hpcc eta must be in (0, 1]");
  if (h.min_rate_bps <= 0) throw std::runtime_error("scenario: hpcc min_rate_bps must be > 0");
}

// A 64-bit operand: a JSON number, or a string in hex ("0x...") for values past 2^53.
uint64_t hex_or_number(const json& f, const char* key) {
  if (!f.contains(key)) return 0;
  const json& v = f[key];
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  const std::string s = v.is_string() ? v.get<std::string>() : "";
  size_t used = 0;
  uint64_t out = 0;
  try {
    out = std::stoull(s, &used, 16);
  } catch (const std::exception&) {
    used = 0;
  }
  if (s.size() < 3 || s.compare(0, 2, "0x") != 0 || used != s.size())
    throw std::runtime_error(std::string("scenario: \"") + key + "\" is a number or \"0x...\"");
  return out;
}

// A flow's "verb" (write, read, send, faa) and "transport" (rc, uc, ud): READ and atomics
// need RC, UD carries SENDs only.
void parse_verb(const json& f, FlowSpec& spec) {
  std::string verb = "write", transport = "rc";
  get(f, "verb", verb);
  get(f, "transport", transport);
  if (verb == "write") spec.verb = Verb::kWrite;
  else if (verb == "read") spec.verb = Verb::kRead;
  else if (verb == "send") spec.verb = Verb::kSend;
  else if (verb == "faa") spec.verb = Verb::kFaa;
  else throw std::runtime_error("scenario: a flow's verb is \"write\", \"read\", \"send\" or \"faa\"");
  if (transport == "rc") spec.transport = Transport::kRc;
  else if (transport == "uc") spec.transport = Transport::kUc;
  else if (transport == "ud") spec.transport = Transport::kUd;
  else throw std::runtime_error("scenario: a flow's transport is \"rc\", \"uc\" or \"ud\"");
  if ((spec.verb == Verb::kRead || spec.verb == Verb::kFaa) && spec.transport != Transport::kRc)
    throw std::runtime_error("scenario: READ and Fetch-and-Add flows need transport \"rc\"");
  if (spec.transport == Transport::kUd && spec.verb != Verb::kSend)
    throw std::runtime_error("scenario: a UD flow's verb is \"send\"");
  if (spec.verb != Verb::kFaa) return;
  if (f.contains("bytes") && f["bytes"] != 8)
    throw std::runtime_error("scenario: an faa flow moves 8 bytes");
  spec.bytes = 8;
  spec.add = hex_or_number(f, "add");
  spec.set_initial = f.contains("initial");
  if (spec.set_initial) spec.initial = hex_or_number(f, "initial");
}

// A flow entry; "src" is a host or an inclusive range [first, last] (one flow each).
void parse_flow(const json& f, const Scenario& s, std::vector<FlowSpec>& out) {
  uint32_t first = 0, last = 0;
  if (f.contains("src") && f["src"].is_array() && f["src"].size() == 2) {
    first = f["src"][0].get<uint32_t>();
    last = f["src"][1].get<uint32_t>();
  } else {
    get(f, "src", first);
    last = first;
  }
  FlowSpec spec;
  get(f, "dst", spec.dst);
  get(f, "bytes", spec.bytes);
  get(f, "start_ns", spec.start_ns);
  get(f, "dscp", spec.dscp);
  parse_verb(f, spec);
  if (spec.dscp < -1 || spec.dscp > 63) throw std::runtime_error("scenario: a flow's dscp is 0..63");
  if (spec.bytes == 0) throw std::runtime_error("scenario: a flow needs \"bytes\" > 0");
  for (uint32_t h = first; h <= last; ++h) {
    if (h >= s.host_count() || spec.dst >= s.host_count() || h == spec.dst)
      throw std::runtime_error("scenario: flow " + std::to_string(h) + " -> " +
                               std::to_string(spec.dst) + ": no such pair of hosts");
    spec.src = h;
    out.push_back(spec);
  }
}

// "fat-tree" (k-ary: k pods of k/2 ToRs and k/2 aggregation switches, k/2 hosts per ToR,
// (k/2)^2 cores) and "hpcc-320" (the HPCC paper's: 5 pods of 4 ToRs and 4 aggregation
// switches, 16 hosts per ToR, 16 cores; 100 Gb/s hosts, 400 Gb/s switch links, 1 us) are
// Clos networks with their numbers filled in.
void parse_clos(const json& t, Scenario& s) {
  if (s.topology == "fat-tree") {
    uint32_t k = 4;
    get(t, "k", k);
    if (k < 2 || k % 2 != 0 || k > 64) throw std::runtime_error("scenario: fat-tree k is even, 2..64");
    s.pods = k;
    s.tors_per_pod = s.aggs_per_pod = s.hosts_per_tor = k / 2;
    s.cores = k * k / 4;
  } else if (s.topology == "hpcc-320") {
    s.pods = 5;
    s.tors_per_pod = s.aggs_per_pod = 4;
    s.hosts_per_tor = 16;
    s.cores = 16;
    s.host_rate_bps = 100e9;
    s.core_rate_bps = 400e9;
    s.link_delay_ns = 1000;
  }
  s.topology = "clos";
  get(t, "pods", s.pods);
  get(t, "tors_per_pod", s.tors_per_pod);
  get(t, "aggs_per_pod", s.aggs_per_pod);
  get(t, "hosts_per_tor", s.hosts_per_tor);
  get(t, "cores", s.cores);
  if (s.pods == 0 || s.tors_per_pod == 0 || s.aggs_per_pod == 0 || s.hosts_per_tor == 0 ||
      s.cores == 0 || s.cores % s.aggs_per_pod != 0)
    throw std::runtime_error("scenario: a clos needs pods, ToRs, aggregation switches, hosts "
                             "and cores, the cores a multiple of aggs_per_pod");
}

void parse_topology(const json& t, Scenario& s) {
  get(t, "type", s.topology);
  get(t, "hosts", s.hosts);
  get(t, "senders", s.senders);
  get(t, "receivers", s.receivers);
  get(t, "switches", s.switches);
  get(t, "hosts_per_switch", s.hosts_per_switch);
  const std::string type = s.topology;
  const bool clos = type == "clos" || type == "fat-tree" || type == "hpcc-320";
  if (clos) parse_clos(t, s);
  get_gbps(t, "host_rate_gbps", s.host_rate_bps);
  if (type != "hpcc-320") s.core_rate_bps = s.host_rate_bps;
  get_gbps(t, "core_rate_gbps", s.core_rate_bps);
  get(t, "link_delay_ns", s.link_delay_ns);
  if (s.topology != "star" && s.topology != "dumbbell" && s.topology != "ring" && !clos)
    throw std::runtime_error("scenario: topology type must be \"star\", \"dumbbell\", "
                             "\"ring\", \"fat-tree\", \"hpcc-320\" or \"clos\"");
  if (s.topology == "ring" && (s.switches < 3 || s.hosts_per_switch == 0))
    throw std::runtime_error("scenario: a ring has 3 or more switches, each with hosts");
  if (s.host_count() < 2 || s.host_count() > 4096)
    throw std::runtime_error("scenario: 2 to 4096 hosts");
}

// "traffic": [{"type": "poisson", "cdf": "websearch" | "fb_hadoop" | a file, "load",
// "start_ns", "end_ns", "hosts": [first, last], "dscp", "verb", "transport"}]
PoissonTraffic parse_traffic(const json& j, const Scenario& s) {
  PoissonTraffic t;
  std::string type = "poisson";
  get(j, "type", type);
  if (type != "poisson") throw std::runtime_error("scenario: traffic type must be \"poisson\"");
  get(j, "cdf", t.cdf_name);
  get(j, "load", t.load);
  get(j, "start_ns", t.start_ns);
  get(j, "end_ns", t.end_ns);
  get(j, "dscp", t.dscp);
  FlowSpec kind;
  parse_verb(j, kind);
  if (kind.verb == Verb::kFaa) throw std::runtime_error("scenario: traffic verb is write, read or send");
  t.verb = kind.verb;
  t.transport = kind.transport;
  if (j.contains("hosts")) {
    const auto r = j["hosts"].get<std::vector<uint32_t>>();
    if (r.size() != 2 || r[0] >= r[1] || r[1] >= s.host_count())
      throw std::runtime_error("scenario: traffic hosts: [first, last] of the topology's");
    t.first = r[0];
    t.last = r[1];
  }
  if (t.load <= 0 || t.load > 1) throw std::runtime_error("scenario: traffic load is in (0, 1]");
  if (t.end_ns <= t.start_ns) throw std::runtime_error("scenario: traffic end_ns <= start_ns");
  if (const char* text = builtin_cdf_text(t.cdf_name)) {
    t.cdf_text = text;
  } else {
    std::ifstream f(t.cdf_name);
    if (!f) throw std::runtime_error("scenario: traffic cdf \"" + t.cdf_name +
                                     "\": no built-in (websearch, fb_hadoop) nor file");
    t.cdf_text.assign(std::istreambuf_iterator<char>(f), {});
  }
  try {
    Cdf::parse(t.cdf_text);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("scenario: traffic " + t.cdf_name + ": " + e.what());
  }
  return t;
}

}  // namespace

Scenario parse_scenario(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("scenario: not JSON: ") + e.what());
  }
  Scenario s;
  get(j, "name", s.name);
  get(j, "description", s.description);
  get(j, "duration_ns", s.duration_ns);
  get(j, "long_flow_bytes", s.long_flow_bytes);
  get(j, "seed", s.seed);
  get(j, "stats_from_ns", s.stats_from_ns);
  if (s.stats_from_ns == UINT64_MAX) s.stats_from_ns = s.duration_ns / 2;
  if (j.contains("topology")) parse_topology(j["topology"], s);
  if (j.contains("switch")) parse_switch(j["switch"], s.sw);
  if (j.contains("nic")) parse_nic(j["nic"], s.nic);
  if (j.contains("dcqcn")) parse_dcqcn(j["dcqcn"], s.dcqcn);
  if (j.contains("hpcc")) parse_hpcc(j["hpcc"], s.hpcc);
  if (j.contains("flows"))
    for (const json& f : j["flows"]) parse_flow(f, s, s.flows);
  if (j.contains("traffic"))
    for (const json& t : j["traffic"]) s.traffic.push_back(parse_traffic(t, s));
  if (s.flows.empty() && s.traffic.empty()) throw std::runtime_error("scenario: no flows");
  return s;
}

}  // namespace vrnic::sim
