// The RDMA CM's VRNIC_CM_* settings from the environment (settings.h).
#include "rdmacm/settings.h"

#include <charconv>
#include <cstdlib>
#include <cstring>

namespace vrnic::rdmacm {
namespace {

// A whole decimal number from 0 to `max`: no sign, base prefix, space or unit.
bool parse_exponent(const char* name, const char* v, unsigned max, const char* what,
                    uint8_t& out, std::string& error) {
  const char* end = v + std::strlen(v);
  unsigned n = 0;
  const auto [p, ec] = std::from_chars(v, end, n);
  if (ec != std::errc() || p != end || n > max) {
    error = std::string(name) + ": '" + v + "' is not " + what + " from 0 to " +
            std::to_string(max);
    return false;
  }
  out = static_cast<uint8_t>(n);
  return true;
}

}  // namespace

bool parse_settings(const std::function<const char*(const char*)>& get, Settings& out,
                    std::string& error) {
  struct Knob {
    const char* name;
    unsigned max;
    const char* what;
    uint8_t* value;
  };
  const Knob knobs[] = {
      {"VRNIC_CM_RESPONSE_TIMEOUT", 31, "a timeout exponent", &out.response_timeout},
      {"VRNIC_CM_RETRIES", 15, "a number of retries", &out.retries},
      {"VRNIC_CM_ACK_TIMEOUT", 31, "a timeout exponent", &out.ack_timeout}};
  for (const Knob& k : knobs) {
    const char* v = get(k.name);
    if (v && *v && !parse_exponent(k.name, v, k.max, k.what, *k.value, error)) return false;
  }
  if (const char* v = get("VRNIC_CM_DEBUG"); v && *v) {
    if (std::strcmp(v, "0") != 0 && std::strcmp(v, "1") != 0) {
      error = std::string("VRNIC_CM_DEBUG: '") + v + "' is not 0 or 1";
      return false;
    }
    out.debug = *v == '1';
  }
  return true;
}

const Settings& process_settings(std::string* error) {
  static std::string why;
  static const Settings s = [] {
    Settings p;
    if (!parse_settings([](const char* n) { return std::getenv(n); }, p, why)) p = Settings{};
    return p;
  }();
  if (error) *error = why;
  return s;
}

}  // namespace vrnic::rdmacm
