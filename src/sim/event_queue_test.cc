// The event core: events leave in time order, ties in scheduling order; the clock never
// moves back; the seeded generator repeats its stream for a seed and only for it.
#include <gtest/gtest.h>

#include <queue>
#include <stdexcept>
#include <tuple>
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

// As the simulator uses it: each event taken schedules more at or after its time (ties
// included, far and near); the order must be that of a heap on (time, scheduling order).
TEST(SimEventQueue, matches_a_heap_on_time_then_order_under_interleaving) {
  EventQueue q;
  using Key = std::tuple<uint64_t, uint64_t, uint32_t>;  // time, seq, a
  std::priority_queue<Key, std::vector<Key>, std::greater<Key>> ref;
  Rng rng(5);
  uint64_t seq = 0;
  for (uint32_t i = 0; i < 64; ++i) {
    const uint64_t t = rng.next() % 5000;
    q.push(t, EventKind::kArrive, i);
    ref.emplace(t, seq++, i);
  }
  uint32_t next_a = 64;
  for (int steps = 0; steps < 200000 && !ref.empty(); ++steps) {
    ASSERT_FALSE(q.empty());
    const Event e = q.pop();
    const auto [t, s, a] = ref.top();
    ref.pop();
    ASSERT_EQ(e.time, t);
    ASSERT_EQ(e.a, a);
    const int more = steps < 150000 ? static_cast<int>(rng.next() % 3) : 0;
    for (int k = 0; k < more; ++k) {
      const uint64_t r = rng.next();
      const uint64_t dt = r % 4 == 0 ? 0 : r % 4 == 1 ? r % 100 : r % 4 == 2 ? r % 100000 : r % (1ull << 40);
      q.push(e.time + dt, EventKind::kTxDone, next_a);
      ref.emplace(e.time + dt, seq++, next_a++);
    }
  }
  EXPECT_TRUE(ref.empty());
  EXPECT_TRUE(q.empty());
}

TEST(SimEventQueue, peek_names_the_next_event_in_its_instant_a_later_slot_or_the_far_heap) {
  EventQueue q;
  EXPECT_EQ(q.peek(), nullptr);  // empty
  q.push(10, EventKind::kArrive, 1);
  q.push(10, EventKind::kArrive, 2);
  q.push(20, EventKind::kArrive, 3);
  q.push(20 + EventQueue::kWindow, EventKind::kArrive, 4);  // beyond the wheel
  EXPECT_EQ(q.pop().a, 1u);
  ASSERT_NE(q.peek(), nullptr);  // the next one at 10
  EXPECT_EQ(q.peek()->a, 2u);
  EXPECT_EQ(q.pop().a, 2u);
  ASSERT_NE(q.peek(), nullptr);  // the instant is done: the next slot's first
  EXPECT_EQ(q.peek()->a, 3u);
  q.push(15, EventKind::kArrive, 5);  // scheduled meanwhile, earlier: the hint follows
  EXPECT_EQ(q.peek()->a, 5u);
  EXPECT_EQ(q.pop().a, 5u);
  EXPECT_EQ(q.pop().a, 3u);
  ASSERT_NE(q.peek(), nullptr);  // only the far event is left
  EXPECT_EQ(q.peek()->a, 4u);
  EXPECT_EQ(q.size(), 1u);  // peeking moved nothing
  EXPECT_EQ(q.pop().a, 4u);
  EXPECT_EQ(q.peek(), nullptr);
  EXPECT_TRUE(q.empty());
}

TEST(SimEventQueue, refuses_an_event_before_the_last_one_taken) {
  EventQueue q;
  q.push(100, EventKind::kArrive, 1);
  q.pop();
  EXPECT_THROW(q.push(99, EventKind::kArrive, 2), std::logic_error);
  q.push(100, EventKind::kArrive, 3);
  EXPECT_EQ(q.pop().a, 3u);
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
