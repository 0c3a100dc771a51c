// A switch's shared-buffer MMU, as the HPCC simulator's switch models it: every (ingress
// port, priority) has a reserved allowance, then draws on a buffer shared by the whole
// switch up to a dynamic threshold (alpha times what is left free), then on its port's PFC
// headroom; PAUSE when a queue reaches the threshold or uses headroom, resume once it is
// out of headroom and back below the threshold by an offset. Pure functions over counters.
#pragma once
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

uint64_t mmu_threshold(const MmuParams& p, const MmuSwitch& s);
uint64_t mmu_shared_of(const MmuParams& p, const MmuQueue& q);
// False: the frame finds neither shared room nor headroom and is dropped.
bool mmu_admit(const MmuParams& p, const MmuSwitch& s, const MmuQueue& q, uint64_t port_headroom,
               uint64_t size);
void mmu_add(const MmuParams& p, MmuSwitch& s, MmuQueue& q, uint64_t size);
void mmu_remove(const MmuParams& p, MmuSwitch& s, MmuQueue& q, uint64_t size);
bool mmu_should_pause(const MmuParams& p, const MmuSwitch& s, const MmuQueue& q);
bool mmu_should_resume(const MmuParams& p, const MmuSwitch& s, const MmuQueue& q);

}  // namespace vrnic::sim
