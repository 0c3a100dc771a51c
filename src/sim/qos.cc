// DCBX: the settings a NIC adopts and the comparison of a link's two ends (qos.h).
#include "sim/qos.h"

namespace vrnic::sim {
namespace {

std::string priority_set(uint8_t bits) {
  std::string s = "{";
  for (int p = 0; p < kPriorities; ++p) {
    if (!((bits >> p) & 1)) continue;
    if (s.size() > 1) s += ",";
    s += std::to_string(p);
  }
  return s + "}";
}

std::string list(const std::array<uint8_t, kPriorities>& a) {
  std::string s = "[";
  for (int i = 0; i < kPriorities; ++i) s += (i ? "," : "") + std::to_string(a[i]);
  return s + "]";
}

}  // namespace

const QosParams& negotiated(const QosParams& nic, const QosParams& sw) {
  return nic.willing ? sw : nic;
}

std::vector<std::string> dcbx_compare(const QosParams& a, const QosParams& b) {
  std::vector<std::string> out;
  if (a.pfc_priorities != b.pfc_priorities)
    out.push_back("PFC priorities " + priority_set(a.pfc_priorities) + " vs " +
                  priority_set(b.pfc_priorities));
  if (a.ets_share != b.ets_share)
    out.push_back("ETS shares " + list(a.ets_share) + " vs " + list(b.ets_share));
  if (a.prio_to_tc != b.prio_to_tc)
    out.push_back("priority-to-class map " + list(a.prio_to_tc) + " vs " + list(b.prio_to_tc));
  return out;
}

}  // namespace vrnic::sim
