// 24-bit packet sequence number arithmetic with wrap (IBA 9.7.1: half the space is "ahead").
#pragma once
#include <cstdint>

namespace vrnic::wire {

inline constexpr uint32_t kPsnMask = 0xffffff;

constexpr uint32_t psn_add(uint32_t psn, int64_t n) {
  return static_cast<uint32_t>((static_cast<int64_t>(psn) + n) & kPsnMask);
}
// Signed distance a - b in (-2^23, 2^23]. Exactly half the space apart counts as ahead in
// both directions, so neither PSN is psn_lt the other.
constexpr int32_t psn_diff(uint32_t a, uint32_t b) {
  int32_t d = static_cast<int32_t>((a - b) & kPsnMask);
  return d > (1 << 23) ? d - (1 << 24) : d;
}
constexpr bool psn_lt(uint32_t a, uint32_t b) { return psn_diff(a, b) < 0; }
constexpr bool psn_le(uint32_t a, uint32_t b) { return psn_diff(a, b) <= 0; }

}  // namespace vrnic::wire
