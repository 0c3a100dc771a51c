// LiveConfig: the VRNIC_* settings parsed and checked in one place (config.h).
#include "live/config.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "live/address.h"
#include "live/cc_config.h"

namespace vrnic::live {
namespace {

// A setting as it was given, for messages.
std::string quoted(const char* v) { return std::string("'") + v + "'"; }

// 0/1 and their spellings; anything else is refused rather than guessed.
bool parse_flag(const char* name, const char* v, bool& out, std::string& error) {
  static constexpr const char* kOn[] = {"1", "yes", "true", "on"};
  static constexpr const char* kOff[] = {"0", "no", "false", "off"};
  for (const char* s : kOn)
    if (std::strcmp(v, s) == 0) return out = true, true;
  for (const char* s : kOff)
    if (std::strcmp(v, s) == 0) return out = false, true;
  error = std::string(name) + ": " + quoted(v) + " is not 0 or 1";
  return false;
}

// A whole decimal number in [lo, hi] (no sign, no unit, no trailing text).
bool parse_number(const char* name, const char* v, uint64_t lo, uint64_t hi, const char* unit,
                  uint64_t& out, std::string& error) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(v, &end, 10);
  if (*v < '0' || *v > '9' || *end != '\0' || errno == ERANGE || n < lo || n > hi) {
    error = std::string(name) + ": " + quoted(v) + " is not a number of " + unit + " from " +
            std::to_string(lo) + " to " + std::to_string(hi);
    return false;
  }
  out = n;
  return true;
}

bool parse_timing(const LiveConfig::Lookup& get, Timing& t, std::string& error) {
  struct Knob {
    const char* name;
    uint64_t* ns;
  };
  const Knob knobs[] = {{"VRNIC_DEFER_US", &t.defer_ns},
                        {"VRNIC_RECHECK_MAX_US", &t.recheck_max_ns},
                        {"VRNIC_SPIN_US", &t.spin_ns},
                        {"VRNIC_ACK_HOLD_US", &t.ack_hold_ns},
                        {"VRNIC_EVENT_SPIN_US", &t.event_spin_ns},
                        {"VRNIC_IDLE_YIELD_US", &t.idle_yield_ns}};
  for (const Knob& k : knobs) {
    const char* v = get(k.name);
    if (v == nullptr || *v == '\0') continue;
    uint64_t us = 0;
    if (!parse_number(k.name, v, 0, 10'000'000, "microseconds", us, error)) return false;
    *k.ns = us * 1000;
  }
  return true;
}

bool parse_transport(const LiveConfig::Lookup& get, LiveConfig& c, std::string& error) {
  if (const char* v = get("VRNIC_FAULTS"); v && *v) {
    transport::FaultConfig f;
    std::string why;
    if (!transport::parse_fault_config(v, f, why)) {
      error = "VRNIC_FAULTS: " + why;
      return false;
    }
    c.faults = f;
  }
  if (const char* v = get("VRNIC_OFFLOAD"); v && *v && !parse_flag("VRNIC_OFFLOAD", v, c.offload, error))
    return false;
  if (const char* v = get("VRNIC_RX_QUEUES"); v && *v) {
    uint64_t n = 0;
    if (!parse_number("VRNIC_RX_QUEUES", v, 1, transport::UdpPortOptions::kMaxRxQueues,
                      "queues", n, error))
      return false;
    c.rx_queues = n;
  }
  if (const char* v = get("VRNIC_SEND_WINDOW_KB"); v && *v) {
    uint64_t kb = 0;
    if (!parse_number("VRNIC_SEND_WINDOW_KB", v, 1, 1 << 20, "KiB", kb, error)) return false;
    c.send_window_bytes = static_cast<uint32_t>(kb * 1024);
  }
  return true;
}

}  // namespace

bool LiveConfig::parse(const Lookup& get, LiveConfig& out, std::string& error) {
  LiveConfig c;
  auto text = [&](const char* name) {
    const char* v = get(name);
    return std::string(v ? v : "");
  };
  c.ip = text("VRNIC_IP");
  c.reserved = text(kReservationEnv);
  c.pcap = text("VRNIC_PCAP");
  struct Flag {
    const char* name;
    bool* value;
  };
  for (const Flag& f : {Flag{"VRNIC_DIRECT", &c.direct}, Flag{"VRNIC_AUTH", &c.auth},
                        Flag{"VRNIC_STATS", &c.stats},
                        Flag{"VRNIC_DEBUG", &c.debug}}) {
    const char* v = get(f.name);
    if (v && *v && !parse_flag(f.name, v, *f.value, error)) return false;
  }
  if (!parse_transport(get, c, error) || !parse_timing(get, c.timing, error)) return false;
  if (const char* v = get("VRNIC_CC"); v && *v) {
    std::string why;
    if (!parse_cc_spec(v, c.cc, why)) {
      error = "VRNIC_CC: " + why;
      return false;
    }
  }
  out = std::move(c);
  return true;
}

bool LiveConfig::from_environment(LiveConfig& out, std::string& error) {
  return parse([](const char* name) { return std::getenv(name); }, out, error);
}

}  // namespace vrnic::live
