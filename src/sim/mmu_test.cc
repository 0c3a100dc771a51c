// The shared-buffer MMU: the dynamic threshold, admission to the shared pool, then headroom,
// then a drop; PAUSE and resume with their hysteresis; removal in the reverse order.
#include "sim/mmu.h"

#include <gtest/gtest.h>

namespace vrnic::sim {
namespace {

MmuParams params() {
  MmuParams p;
  p.enabled = true;
  p.buffer_bytes = 1'000'000;
  p.reserve_bytes = 4000;
  p.resume_offset_bytes = 3000;
  p.alpha = 0.5;
  return p;
}

TEST(SimMmu, the_threshold_is_alpha_times_the_free_shared_buffer) {
  const MmuParams p = params();
  MmuSwitch s{100'000, 100'000, 0};
  EXPECT_EQ(mmu_threshold(p, s), 400'000u);  // (1 MB - 200 KB) / 2
  s.shared_used = 200'000;
  EXPECT_EQ(mmu_threshold(p, s), 300'000u);  // it shrinks as the pool fills
  s.shared_used = 900'000;
  EXPECT_EQ(mmu_threshold(p, s), 0u);
}

// One queue fills: its reserve, then the shared pool to the threshold (where it pauses),
// then headroom, then drops.
TEST(SimMmu, reserve_then_shared_then_headroom_then_drop) {
  const MmuParams p = params();
  MmuSwitch s{100'000, 100'000, 0};
  MmuQueue q;
  const uint64_t headroom = 20'000, frame = 1000;
  uint64_t admitted = 0;
  bool paused_at_threshold = false;
  for (int i = 0; i < 2000; ++i) {
    if (!mmu_admit(p, s, q, headroom, frame)) break;
    mmu_add(p, s, q, frame);
    admitted += frame;
    if (!paused_at_threshold && mmu_should_pause(p, s, q)) {
      paused_at_threshold = true;
      // Pause where shared use meets the shrinking threshold: x = (800 KB - x) / 2.
      EXPECT_NEAR(static_cast<double>(mmu_shared_of(p, q)), 800'000 / 3.0, 1000);
      EXPECT_EQ(q.headroom, 0u);
    }
  }
  EXPECT_TRUE(paused_at_threshold);
  EXPECT_EQ(q.headroom, headroom);  // headroom full: the next frame was refused
  EXPECT_EQ(admitted, q.bytes + q.headroom);
  EXPECT_EQ(s.shared_used, mmu_shared_of(p, q));
  EXPECT_FALSE(mmu_should_resume(p, s, q));
  // Draining: headroom first; resume only once the shared part is an offset below the
  // threshold.
  mmu_remove(p, s, q, headroom);
  EXPECT_EQ(q.headroom, 0u);
  EXPECT_FALSE(mmu_should_resume(p, s, q));
  while (!mmu_should_resume(p, s, q)) mmu_remove(p, s, q, frame);
  EXPECT_LE(mmu_shared_of(p, q) + p.resume_offset_bytes, mmu_threshold(p, s));
  mmu_remove(p, s, q, q.bytes);
  EXPECT_EQ(s.shared_used, 0u);
  EXPECT_EQ(q.bytes, 0u);
}

// A second queue sees the threshold the first one lowered: dynamic sharing.
TEST(SimMmu, a_busy_queue_lowers_the_others_threshold) {
  const MmuParams p = params();
  MmuSwitch s{100'000, 100'000, 0};
  MmuQueue a, b;
  const uint64_t empty = mmu_threshold(p, s);
  for (int i = 0; i < 200; ++i) mmu_add(p, s, a, 1000);
  EXPECT_LT(mmu_threshold(p, s), empty);
  EXPECT_FALSE(mmu_should_pause(p, s, b));
  EXPECT_TRUE(mmu_admit(p, s, b, 0, 1000));
}

}  // namespace
}  // namespace vrnic::sim
