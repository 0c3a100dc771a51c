// Sweep specs, their cells and the gathered CSV (sweep.h).
#include "sim/sweep.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "sim/simulator.h"

namespace vrnic::sim {

using json = nlohmann::json;

std::string SweepCell::name() const {
  std::string n = std::filesystem::path(scenario).stem().string();
  if (load) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "-load%g", *load);
    n += buf;
  }
  if (scheme) n += "-" + *scheme;
  if (seed) n += "-seed" + std::to_string(*seed);
  return n;
}

SweepSpec parse_sweep(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("sweep: not JSON: ") + e.what());
  }
  if (!j.is_object()) throw std::runtime_error("sweep: not a JSON object");
  SweepSpec s;
  for (const auto& [key, v] : j.items()) {
    try {
      if (key == "scenarios") s.scenarios = v.get<std::vector<std::string>>();
      else if (key == "loads") s.loads = v.get<std::vector<double>>();
      else if (key == "schemes") s.schemes = v.get<std::vector<std::string>>();
      else if (key == "seeds") s.seeds = v.get<std::vector<uint64_t>>();
      else if (key == "outputs") s.outputs = v.get<bool>();
      else if (key != "description") throw std::runtime_error("sweep: unknown field \"" + key + "\"");
    } catch (const json::exception& e) {
      throw std::runtime_error("sweep: field \"" + key + "\": " + e.what());
    }
  }
  if (s.scenarios.empty()) throw std::runtime_error("sweep: \"scenarios\" is empty");
  for (double l : s.loads)
    if (!(l > 0 && l <= 1)) throw std::runtime_error("sweep: a load must be in (0, 1]");
  for (const std::string& name : s.schemes) parse_scheme(name);  // throws if unknown
  return s;
}

std::vector<SweepCell> sweep_cells(const SweepSpec& s) {
  std::vector<SweepCell> out;
  auto opt = [](const auto& v) {
    using T = typename std::decay_t<decltype(v)>::value_type;
    std::vector<std::optional<T>> o(v.begin(), v.end());
    if (o.empty()) o.push_back(std::nullopt);
    return o;
  };
  for (const std::string& sc : s.scenarios)
    for (const auto& load : opt(s.loads))
      for (const auto& scheme : opt(s.schemes))
        for (const auto& seed : opt(s.seeds))
          out.push_back({static_cast<uint32_t>(out.size()), sc, load, scheme, seed});
  return out;
}

std::string scenario_text(const std::string& name_or_file) {
  if (const char* text = builtin_text(name_or_file)) return text;
  std::ifstream in(name_or_file);
  if (!in)
    throw std::runtime_error("no built-in scenario or readable file \"" + name_or_file + "\"");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void apply_cell(Scenario& sc, std::optional<double> load, std::optional<std::string> scheme,
                std::optional<uint64_t> seed) {
  if (load) {
    if (!(*load > 0 && *load <= 1)) throw std::runtime_error("a load must be in (0, 1]");
    if (sc.traffic.empty()) throw std::runtime_error("scenario " + sc.name + " has no traffic to load");
    for (PoissonTraffic& t : sc.traffic) t.load = *load;
  }
  if (scheme) sc.nic.scheme = parse_scheme(*scheme);
  if (seed) sc.seed = *seed;
}

Scenario cell_scenario(const SweepCell& c) {
  Scenario sc = parse_scenario(scenario_text(c.scenario));
  if (sc.name.empty()) sc.name = std::filesystem::path(c.scenario).stem().string();
  apply_cell(sc, c.load, c.scheme, c.seed);
  return sc;
}

std::string sweep_csv_header() {
  std::string h = "cell,name,scenario,load,scheme,seed,rank,sim_time_ns,events,wall_s,"
                  "events_per_s,flows_total,flows_completed,flows_failed,drops,"
                  "pfc_pause_frames,ecn_marked,cnps_sent,retransmitted_packets,queue_max_bytes";
  for (const std::string& b : size_buckets())
    for (const char* f : {"count", "p50", "p95", "p99"}) h += "," + b + "_" + f;
  return h + "\n";
}

std::string sweep_csv_row(const SweepCell& c, const std::string& summary, int rank) {
  const json j = json::parse(summary);
  std::ostringstream o;
  o << c.index << ',' << c.name() << ',' << j.value("scenario", "") << ',';
  if (c.load) o << *c.load;
  o << ',' << j.value("scheme", "") << ',' << j.value("seed", 0ull) << ',' << rank;
  for (const char* k : {"sim_time_ns", "events", "wall_s", "events_per_s", "flows_total",
                        "flows_completed", "flows_failed", "drops", "pfc_pause_frames",
                        "ecn_marked", "cnps_sent", "retransmitted_packets", "queue_max_bytes"})
    o << ',' << (j.contains(k) ? j[k].dump() : "");
  const json& slow = j.contains("fct_slowdown") ? j["fct_slowdown"] : json::object();
  for (const std::string& b : size_buckets())
    for (const char* f : {"count", "p50", "p95", "p99"})
      o << ',' << (slow.contains(b) && slow[b].contains(f) ? slow[b][f].dump() : "");
  o << '\n';
  return o.str();
}

}  // namespace vrnic::sim
