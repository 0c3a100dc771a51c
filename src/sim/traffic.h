// Flows and traffic generators: a flow's spec, flow-size CDFs (the built-in WebSearch and
// FB_Hadoop, or a file of "bytes percent" lines) and Poisson arrivals at a given load.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sim/event_queue.h"

namespace vrnic::sim {

// What a flow's messages are: RDMA WRITEs into dst, RDMA READs from dst, SENDs into RECVs
// dst posts, or one Fetch-and-Add on dst's atomic word; over an RC, UC or UD QP pair.
enum class Verb : uint8_t { kWrite, kRead, kSend, kFaa };
enum class Transport : uint8_t { kRc, kUc, kUd };

struct FlowSpec {
  uint32_t src = 0, dst = 0;  // host indices
  uint64_t bytes = 0;         // moved in all (READ: from dst to src)
  uint64_t start_ns = 0;
  int dscp = -1;  // the QPs' traffic class DSCP; -1: the engine's default (data_dscp)
  Verb verb = Verb::kWrite;
  Transport transport = Transport::kRc;
  uint64_t add = 0;  // kFaa
  bool set_initial = false;  // the word's value when the flow starts, if given
  uint64_t initial = 0;
};

// A piecewise-linear flow-size distribution: points (bytes, cumulative fraction), both
// non-decreasing, the last at 1. Sampling interpolates between points (as the HPCC
// simulator's traffic generator does).
class Cdf {
 public:
  // "bytes percent" per line, '#' comments; throws std::runtime_error saying what is wrong.
  static Cdf parse(const std::string& text);
  double mean_bytes() const;
  uint64_t sample(Rng& rng) const;  // at least 1 byte

 private:
  std::vector<std::pair<double, double>> points_;
};

// The built-in CDFs by name ("websearch", "fb_hadoop"); null if there is none.
const char* builtin_cdf_text(const std::string& name);

// Every host in [first, last] starts flows at Poisson arrivals, the mean gap the one that
// fills `load` of its link with the CDF's mean size, each to a host of the range other than
// itself, chosen uniformly; from start_ns until end_ns.
struct PoissonTraffic {
  std::string cdf_name = "websearch";
  std::string cdf_text;  // what cdf_name names (a built-in, or a file's contents)
  double load = 0.3;
  uint64_t start_ns = 0, end_ns = 10'000'000;
  uint32_t first = 0, last = UINT32_MAX;  // hosts; UINT32_MAX: the last host
  int dscp = -1;
  Verb verb = Verb::kWrite;  // write, read or send
  Transport transport = Transport::kRc;
};

std::vector<FlowSpec> poisson_flows(const PoissonTraffic& t, uint32_t hosts,
                                    double host_rate_bps, uint64_t seed);

}  // namespace vrnic::sim
