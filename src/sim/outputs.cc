// A run's CSV outputs: per-flow FCTs, the switch queues' time series, the long flows' rates,
// PFC per port and priority (simulator.h write_outputs; docs/sim.md "Outputs").
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "sim/simulator.h"

namespace vrnic::sim {
namespace {

constexpr const char* kVerbNames[] = {"write", "read", "send", "faa"};
constexpr const char* kTransportNames[] = {"rc", "uc", "ud"};

std::ofstream open_csv(const std::string& dir, const char* name, const char* header) {
  std::ofstream out(std::filesystem::path(dir) / name);
  if (!out) throw std::runtime_error("cannot write " + dir + "/" + name);
  out << header << "\n";
  return out;
}

}  // namespace

void write_outputs(const Summary& s, const std::string& dir) {
  std::filesystem::create_directories(dir);
  std::ofstream fct = open_csv(dir, "fct.csv",
                               "flow,src,dst,bytes,start_ns,fct_ns,ideal_ns,slowdown,verb,transport");
  for (size_t i = 0; i < s.flows.size(); ++i) {
    const FlowRecord& f = s.flows[i];
    fct << i << ',' << f.src << ',' << f.dst << ',' << f.bytes << ',' << f.start_ns << ','
        << f.fct_ns << ',' << f.ideal_ns << ',';
    if (f.fct_ns > 0 && f.ideal_ns > 0) fct << static_cast<double>(f.fct_ns) / f.ideal_ns;
    fct << ',' << kVerbNames[static_cast<int>(f.verb)] << ','
        << kTransportNames[static_cast<int>(f.transport)] << "\n";
  }
  std::ofstream queues = open_csv(dir, "queues.csv", "t_ns,port,bytes");
  for (const QueueSample& q : s.queue_series) queues << q.t_ns << ',' << q.port << ',' << q.bytes << "\n";
  std::ofstream rates = open_csv(dir, "rates.csv", "t_ns,long_flow,gbps");
  for (size_t k = 0; k < s.long_flow_series_gbps.size(); ++k)
    for (size_t b = 0; b < s.long_flow_series_gbps[k].size(); ++b)
      rates << b * s.bin_ns << ',' << k << ',' << s.long_flow_series_gbps[k][b] << "\n";
  std::ofstream pfc = open_csv(dir, "pfc.csv",
                               "port,node,device,priority,pause_frames,resume_frames,pauses_expired");
  for (const PfcRecord& r : s.pfc_ports)
    pfc << r.port << ',' << r.node << ',' << (r.is_switch ? "switch" : "host") << ','
        << r.priority << ',' << r.pause_frames << ',' << r.resume_frames << ','
        << r.pauses_expired << "\n";
  if (!fct || !queues || !rates || !pfc) throw std::runtime_error("cannot write the CSVs in " + dir);
}

}  // namespace vrnic::sim
