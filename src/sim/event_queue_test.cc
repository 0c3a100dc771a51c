// The event core: events leave in time order, ties in scheduling order; the clock never
// moves back; the seeded generator repeats its stream for a seed and only for it.
#include <gtest/gtest.h>

#include <vector>

#include "sim/event_queue.h"

namespace vrnic::sim {
namespace {

TEST(SimEventQueue, time_order_then_scheduling_order) {
  EventQueue q;
  q.push(300, EventKind::kArrive, 1);
  q.push(100, EventKind::kArrive, 2);
  q.push(300, EventKind::kTxDone, 3);
  q.push(100, EventKind::kPause, 4);
  q.push(200, EventKind::kArrive, 5);
  q.push(300, EventKind::kArrive, 6);
  std::vector<uint32_t> order;
  std::vector<uint64_t> times;
  while (!q.empty()) {
    const Event e = q.pop();
    order.push_back(e.a);
    times.push_back(e.time);
  }
  EXPECT_EQ(order, (std::vector<uint32_t>{2, 4, 5, 1, 3, 6}));
  EXPECT_EQ(times, (std::vector<uint64_t>{100, 100, 200, 300, 300, 300}));
  EXPECT_EQ(q.scheduled(), 6u);
}

TEST(SimEventQueue, many_ties_keep_their_order) {
  EventQueue q;
  for (uint32_t i = 0; i < 1000; ++i) q.push(i % 3, EventKind::kArrive, i);
  uint64_t last_time = 0;
  int64_t last_a[3] = {-1, -1, -1};
  while (!q.empty()) {
    const Event e = q.pop();
    ASSERT_GE(e.time, last_time);
    last_time = e.time;
    ASSERT_GT(static_cast<int64_t>(e.a), last_a[e.time]);  // FIFO within one instant
    last_a[e.time] = e.a;
  }
}

TEST(SimClock, moves_forward_only) {
  SimClock c;
  EXPECT_EQ(c.now_ns(), 0u);
  c.advance_to(500);
  c.advance_to(200);
  EXPECT_EQ(c.now_ns(), 500u);
}

TEST(SimRng, same_seed_same_stream_other_seed_other_stream) {
  Rng a(42), b(42), c(43);
  int differ = 0;
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.next();
    EXPECT_EQ(x, b.next());
    differ += x != c.next();
  }
  EXPECT_EQ(differ, 100);
  Rng u(7);
  double sum = 0;
  for (int i = 0; i < 10000; ++i) {
    const double x = u.uniform();
    ASSERT_GE(x, 0.0);
    ASSERT_LT(x, 1.0);
    sum += x;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.02);
}

}  // namespace
}  // namespace vrnic::sim
