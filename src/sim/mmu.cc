// The shared-buffer MMU's accounting (mmu.h).
#include "sim/mmu.h"

#include <algorithm>

namespace vrnic::sim {

uint64_t mmu_threshold(const MmuParams& p, const MmuSwitch& s) {
  const uint64_t set_aside = s.total_reserve + s.total_headroom + s.shared_used;
  if (set_aside >= p.buffer_bytes) return 0;
  return static_cast<uint64_t>(static_cast<double>(p.buffer_bytes - set_aside) * p.alpha);
}

uint64_t mmu_shared_of(const MmuParams& p, const MmuQueue& q) {
  return q.bytes > p.reserve_bytes ? q.bytes - p.reserve_bytes : 0;
}

bool mmu_admit(const MmuParams& p, const MmuSwitch& s, const MmuQueue& q, uint64_t port_headroom,
               uint64_t size) {
  const bool headroom_full = q.headroom + size > port_headroom;
  const bool over_threshold = mmu_shared_of(p, q) + size > mmu_threshold(p, s);
  return !(headroom_full && over_threshold);
}

// Within the reserve: the reserve. Past the threshold: headroom. Else the shared pool,
// for the part beyond the reserve.
void mmu_add(const MmuParams& p, MmuSwitch& s, MmuQueue& q, uint64_t size) {
  const uint64_t after = q.bytes + size;
  if (after <= p.reserve_bytes) {
    q.bytes = after;
  } else if (after - p.reserve_bytes > mmu_threshold(p, s)) {
    q.headroom += size;
  } else {
    q.bytes = after;
    s.shared_used += std::min(size, after - p.reserve_bytes);
  }
}

// Headroom empties first, then the shared part, then the reserve.
void mmu_remove(const MmuParams& p, MmuSwitch& s, MmuQueue& q, uint64_t size) {
  const uint64_t from_headroom = std::min(q.headroom, size);
  const uint64_t rest = size - from_headroom;
  const uint64_t from_shared = std::min(rest, mmu_shared_of(p, q));
  q.headroom -= from_headroom;
  q.bytes -= std::min(q.bytes, rest);
  s.shared_used -= std::min(s.shared_used, from_shared);
}

bool mmu_should_pause(const MmuParams& p, const MmuSwitch& s, const MmuQueue& q) {
  return q.headroom > 0 || mmu_shared_of(p, q) >= mmu_threshold(p, s);
}

bool mmu_should_resume(const MmuParams& p, const MmuSwitch& s, const MmuQueue& q) {
  const uint64_t shared = mmu_shared_of(p, q);
  return q.headroom == 0 && (shared == 0 || shared + p.resume_offset_bytes <= mmu_threshold(p, s));
}

}  // namespace vrnic::sim
