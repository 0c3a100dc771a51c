// A switch's shared-buffer MMU, as the HPCC simulator's switch models it: every (ingress
// port, priority) has a reserved allowance, then draws on a buffer shared by the whole
// switch up to a dynamic threshold (alpha times what is left free), then on its port's PFC
// headroom; PAUSE when a queue reaches the threshold or uses headroom, resume once it is
// out of headroom and back below the threshold by an offset. Pure functions over counters,
// inline: a switch runs them for every frame.
#pragma once
#include <algorithm>
#include <cstdint>

namespace vrnic::sim {

struct MmuParams {
  bool enabled = false;            // off: per-egress buffer_bytes and static XOFF/XON
  uint64_t buffer_bytes = 32 << 20;  // the whole switch
  uint64_t reserve_bytes = 4096;     // per ingress port and priority
  uint64_t resume_offset_bytes = 3072;
  uint64_t headroom_bytes = 0;       // per ingress port; 0: 3 x its link's rate x delay
  double alpha = 0.125;              // the dynamic threshold's share of the free buffer
};

// Switch-wide counters: what the ports' reserves and headrooms set aside, and the shared
// bytes in use.
struct MmuSwitch {
  uint64_t total_reserve = 0, total_headroom = 0, shared_used = 0;
};

// One (ingress port, priority): bytes held in its reserve and the shared pool, and in its
// port's headroom.
struct MmuQueue {
  uint64_t bytes = 0, headroom = 0;
};

inline uint64_t mmu_threshold(const MmuParams& p, const MmuSwitch& s) {
  const uint64_t set_aside = s.total_reserve + s.total_headroom + s.shared_used;
  if (set_aside >= p.buffer_bytes) return 0;
  // Through int64_t: a signed conversion is one instruction each way, an unsigned one
  // several (a buffer is far below 2^53 bytes, so the value is the same).
  const double free_bytes = static_cast<double>(static_cast<int64_t>(p.buffer_bytes - set_aside));
  return static_cast<uint64_t>(static_cast<int64_t>(free_bytes * p.alpha));
}

inline uint64_t mmu_shared_of(const MmuParams& p, const MmuQueue& q) {
  return q.bytes > p.reserve_bytes ? q.bytes - p.reserve_bytes : 0;
}

// False: the frame finds neither shared room nor headroom and is dropped.
inline bool mmu_admit(const MmuParams& p, const MmuSwitch& s, const MmuQueue& q,
                      uint64_t port_headroom, uint64_t size) {
  const bool headroom_full = q.headroom + size > port_headroom;
  const bool over_threshold = mmu_shared_of(p, q) + size > mmu_threshold(p, s);
  return !(headroom_full && over_threshold);
}

// Within the reserve: the reserve. Past the threshold: headroom. Else the shared pool,
// for the part beyond the reserve.
inline void mmu_add(const MmuParams& p, MmuSwitch& s, MmuQueue& q, uint64_t size) {
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
inline void mmu_remove(const MmuParams& p, MmuSwitch& s, MmuQueue& q, uint64_t size) {
  const uint64_t from_headroom = std::min(q.headroom, size);
  const uint64_t rest = size - from_headroom;
  const uint64_t from_shared = std::min(rest, mmu_shared_of(p, q));
  q.headroom -= from_headroom;
  q.bytes -= std::min(q.bytes, rest);
  s.shared_used -= std::min(s.shared_used, from_shared);
}

inline bool mmu_should_pause(const MmuParams& p, const MmuSwitch& s, const MmuQueue& q) {
  return q.headroom > 0 || mmu_shared_of(p, q) >= mmu_threshold(p, s);
}

inline bool mmu_should_resume(const MmuParams& p, const MmuSwitch& s, const MmuQueue& q) {
  const uint64_t shared = mmu_shared_of(p, q);
  return q.headroom == 0 && (shared == 0 || shared + p.resume_offset_bytes <= mmu_threshold(p, s));
}

}  // namespace vrnic::sim
