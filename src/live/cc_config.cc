// VRNIC_CC parsing: NVIDIA's DCQCN parameter names and units onto engine::DcqcnParams.
#include "live/cc_config.h"

#include <cerrno>
#include <cstdlib>
#include <functional>
#include <map>
#include <sstream>

namespace vrnic::live {

namespace {

struct Setting {
  double min, max;
  std::function<void(engine::DcqcnParams&, double)> apply;
};

constexpr double kMbps = 1e6, kUs = 1000;

// name -> range (in the name's unit) and where it goes.
const std::map<std::string, Setting>& settings() {
  using P = engine::DcqcnParams;
  static const std::map<std::string, Setting> s = {
      {"enable", {0, 1, [](P& p, double v) { p.enabled = v != 0; }}},
      {"dce_tcp_g", {0, 1023, [](P& p, double v) { p.g = (1024 - v) / 1024; }}},
      {"dce_tcp_rtt", {1, 131071, [](P& p, double v) { p.alpha_period_ns = uint64_t(v * kUs); }}},
      {"initial_alpha_value", {1, 1023, [](P& p, double v) { p.initial_alpha = v / 1024; }}},
      {"rate_to_set_on_first_cnp",
       {0, 1e6, [](P& p, double v) { p.first_cnp_rate_bps = v * kMbps; }}},
      {"rpg_min_dec_fac", {0, 100, [](P& p, double v) { p.min_dec_fraction = v / 100; }}},
      {"rpg_min_rate", {1, 1e6, [](P& p, double v) { p.min_rate_bps = v * kMbps; }}},
      {"rate_reduce_monitor_period",
       {1, 4e9, [](P& p, double v) { p.rate_reduce_period_ns = uint64_t(v * kUs); }}},
      {"rpg_time_reset", {1, 131071, [](P& p, double v) { p.timer_ns = uint64_t(v * kUs); }}},
      {"rpg_byte_reset", {0, 32767, [](P& p, double v) { p.byte_reset = uint64_t(v); }}},
      {"rpg_threshold", {1, 31, [](P& p, double v) { p.threshold = uint32_t(v); }}},
      {"rpg_ai_rate", {1, 1e6, [](P& p, double v) { p.ai_rate_bps = v * kMbps; }}},
      {"rpg_hai_rate", {1, 1e6, [](P& p, double v) { p.hai_rate_bps = v * kMbps; }}},
      {"min_time_between_cnps",
       {0, 4e9, [](P& p, double v) { p.min_time_between_cnps_ns = uint64_t(v * kUs); }}},
      {"cnp_dscp", {0, 63, [](P& p, double v) { p.cnp_dscp = uint8_t(v); }}},
      // vrnic's own: the port's rate, the DSCP of QPs without a traffic class, the pacer.
      {"line_rate", {1, 1e6, [](P& p, double v) { p.line_rate_bps = v * kMbps; }}},
      {"data_dscp", {0, 63, [](P& p, double v) { p.data_dscp = uint8_t(v); }}},
      {"pacer_burst", {0, 1e6, [](P& p, double v) { p.pacer_burst_ns = uint64_t(v * kUs); }}},
  };
  return s;
}

}  // namespace

bool parse_cc_spec(const std::string& spec, engine::DcqcnParams& p, std::string& error) {
  engine::DcqcnParams out = p;
  std::stringstream in(spec);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const std::string name = item.substr(0, eq);
    auto it = settings().find(name);
    if (it == settings().end() || eq == std::string::npos) {
      error = "unknown setting '" + item + "' (name=value, NVIDIA names: docs/live.md)";
      return false;
    }
    const std::string text = item.substr(eq + 1);
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || errno != 0 || v < it->second.min || v > it->second.max) {
      std::ostringstream m;
      m << name << "=" << text << ": want a number in [" << it->second.min << ", "
        << it->second.max << "]";
      error = m.str();
      return false;
    }
    it->second.apply(out, v);
  }
  p = out;
  return true;
}

}  // namespace vrnic::live
