// A device's DCB settings (DSCP -> priority -> traffic class maps, ETS shares with
// strict-priority classes, PFC-enabled priorities, DCBX willingness), the ETS egress
// scheduler's choice of the next frame (DWRR), and the DCBX comparison of a link's two ends.
#pragma once
#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace vrnic::sim {

inline constexpr int kPriorities = 8;  // 802.1Qbb: eight priorities, 802.1Qaz: eight classes

struct QosParams {
  std::array<uint8_t, 64> dscp_to_prio{};      // default: DSCP >> 3 (CS0..CS7)
  std::array<uint8_t, kPriorities> prio_to_tc{};  // default: priority n in class n
  // ETS: a class's share of the link in percent; 0 makes it a strict-priority class, served
  // before every ETS class (higher class first). All 0 (the default): strict priority.
  std::array<uint8_t, kPriorities> ets_share{};
  bool all_strict() const {  // no class has an ETS share: strict priority by class
    uint64_t v;
    std::memcpy(&v, ets_share.data(), sizeof v);
    return v == 0;
  }
  uint8_t pfc_priorities = 0xff;  // bit n: PFC on priority n (sent and honoured)
  bool willing = true;            // DCBX (NICs only): take the switch's settings

  QosParams() {
    for (int d = 0; d < 64; ++d) dscp_to_prio[d] = static_cast<uint8_t>(d >> 3);
    for (int p = 0; p < kPriorities; ++p) prio_to_tc[p] = static_cast<uint8_t>(p);
  }
  bool pfc_on(uint8_t prio) const { return (pfc_priorities >> prio) & 1; }
  uint8_t prio_of_tos(uint8_t tos) const { return dscp_to_prio[tos >> 2]; }
};

// ETS (802.1Qaz) at one egress port: deficit weighted round robin over the classes with a
// share, each round adding share x kQuantumPerPercent bytes to a class's deficit.
struct EtsState {
  static constexpr int64_t kQuantumPerPercent = 256;
  std::array<int64_t, kPriorities> deficit{};
  int next = 0;  // the class the round robin looks at first
};

// The priority whose head frame leaves next, or -1 when none may. head(prio) gives the size
// of that priority's head frame, 0 when it is empty or paused. Strict classes first (the
// highest class first); within a class the highest priority.
template <typename Head>
int pick_priority(const QosParams& q, EtsState& s, Head head) {
  if (q.all_strict()) {  // the common case, in one pass: no class keeps credit
    int best = -1, best_tc = -1;
    for (int p = kPriorities - 1; p >= 0; --p)
      if (q.prio_to_tc[p] > best_tc && head(p) > 0) best = p, best_tc = q.prio_to_tc[p];
    return best;
  }
  std::array<int, kPriorities> best;   // per class: its highest priority with a frame
  std::array<uint64_t, kPriorities> size{};
  best.fill(-1);
  for (int p = kPriorities - 1; p >= 0; --p) {
    const uint64_t n = head(p);
    const uint8_t tc = q.prio_to_tc[p];
    if (n > 0 && best[tc] < 0) best[tc] = p, size[tc] = n;
  }
  bool ets = false;
  for (int tc = kPriorities - 1; tc >= 0; --tc) {
    if (best[tc] < 0) {
      s.deficit[tc] = 0;  // an idle class keeps no credit (DRR)
    } else if (q.ets_share[tc] == 0) {
      return best[tc];
    } else {
      ets = true;
    }
  }
  if (!ets) return -1;
  for (;; s.next = (s.next + 1) % kPriorities) {
    const int tc = s.next;
    if (best[tc] < 0 || q.ets_share[tc] == 0) continue;
    if (s.deficit[tc] >= static_cast<int64_t>(size[tc])) {
      s.deficit[tc] -= static_cast<int64_t>(size[tc]);
      return best[tc];
    }
    s.deficit[tc] += q.ets_share[tc] * EtsState::kQuantumPerPercent;
  }
}

// The settings a NIC runs with after DCBX: the switch's when the NIC is willing, else its own.
const QosParams& negotiated(const QosParams& nic, const QosParams& sw);

// DCBX (802.1Qaz, LLDP): where the two ends of a link disagree on PFC priorities or ETS
// (shares, priority-to-class map), one line each; empty when they agree.
std::vector<std::string> dcbx_compare(const QosParams& a, const QosParams& b);

}  // namespace vrnic::sim
