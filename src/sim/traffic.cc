// Flow-size CDFs and Poisson arrivals (traffic.h).
#include "sim/traffic.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

namespace vrnic::sim {

Cdf Cdf::parse(const std::string& text) {
  Cdf c;
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    line = line.substr(0, line.find('#'));
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::istringstream f(line);
    double bytes = 0, pct = 0;
    if (!(f >> bytes >> pct) || bytes < 0 || pct < 0 || pct > 100)
      throw std::runtime_error("cdf line " + std::to_string(n) + ": want \"bytes percent\"");
    if (!c.points_.empty() &&
        (bytes < c.points_.back().first || pct / 100 < c.points_.back().second))
      throw std::runtime_error("cdf line " + std::to_string(n) + ": not increasing");
    c.points_.emplace_back(bytes, pct / 100);
  }
  if (c.points_.size() < 2 || c.points_.back().second != 1.0)
    throw std::runtime_error("cdf: two points at least, the last at 100 percent");
  return c;
}

// The mean of the piecewise-linear distribution: each segment's probability times its
// midpoint.
double Cdf::mean_bytes() const {
  double m = points_.front().first * points_.front().second;
  for (size_t i = 1; i < points_.size(); ++i) {
    const auto& [x0, y0] = points_[i - 1];
    const auto& [x1, y1] = points_[i];
    m += (y1 - y0) * (x0 + x1) / 2;
  }
  return m;
}

uint64_t Cdf::sample(Rng& rng) const {
  const double y = rng.uniform();
  if (y <= points_.front().second) return std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(points_.front().first)));
  for (size_t i = 1; i < points_.size(); ++i) {
    const auto& [x0, y0] = points_[i - 1];
    const auto& [x1, y1] = points_[i];
    if (y > y1) continue;
    const double x = y1 > y0 ? x0 + (x1 - x0) * (y - y0) / (y1 - y0) : x1;
    return std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(x)));
  }
  return static_cast<uint64_t>(points_.back().first);
}

std::vector<FlowSpec> poisson_flows(const PoissonTraffic& t, uint32_t hosts,
                                    double host_rate_bps, uint64_t seed) {
  const Cdf cdf = Cdf::parse(t.cdf_text);
  const uint32_t last = std::min(t.last, hosts - 1);
  if (t.first >= last || t.load <= 0) return {};
  const double gap_ns = cdf.mean_bytes() * 8e9 / (t.load * host_rate_bps);
  Rng rng(seed ^ 0x7472616666696331ull);  // its own stream: RED's draws stay as they were
  std::vector<FlowSpec> out;
  for (uint32_t h = t.first; h <= last; ++h) {
    for (double at = t.start_ns;;) {
      at += -std::log(1.0 - rng.uniform()) * gap_ns;  // exponential gaps
      if (at >= static_cast<double>(t.end_ns)) break;
      FlowSpec f;
      f.src = h;
      f.dst = t.first + static_cast<uint32_t>(rng.next() % (last - t.first));
      if (f.dst >= h) ++f.dst;  // any host of the range but the source
      f.bytes = cdf.sample(rng);
      f.start_ns = static_cast<uint64_t>(at);
      f.dscp = t.dscp;
      f.verb = t.verb;
      f.transport = t.transport;
      out.push_back(f);
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const FlowSpec& a, const FlowSpec& b) { return a.start_ns < b.start_ns; });
  return out;
}

}  // namespace vrnic::sim
