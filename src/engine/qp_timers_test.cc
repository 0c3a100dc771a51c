// QpTimers on its own: slots follow removals, due() by the bound, earliest() exact while
// asking only the QPs whose bound lies below the answer.
#include "engine/qp_timers.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <vector>

#include "engine/qp.h"

namespace vrnic::engine {
namespace {

// The true next deadline of each QP (by QPN) and which QPs earliest() asked.
std::map<uint32_t, uint64_t> g_true;
std::vector<uint32_t> g_asked;
uint64_t true_wake(const Qp& qp) {
  g_asked.push_back(qp.qpn);
  return g_true.at(qp.qpn);
}

struct QpTimersTest : ::testing::Test {
  QpTimers t;
  std::vector<std::unique_ptr<Qp>> qps;
  Qp& make(uint32_t qpn) {
    qps.push_back(std::make_unique<Qp>());
    qps.back()->qpn = qpn;
    t.add(*qps.back());
    g_true[qpn] = UINT64_MAX;
    return *qps.back();
  }
  std::vector<uint32_t> due(uint64_t now) {
    std::vector<Qp*> out;
    t.due(now, out);
    std::vector<uint32_t> n;
    for (Qp* q : out) n.push_back(q->qpn);
    return n;
  }
  void SetUp() override { g_true.clear(), g_asked.clear(); }
};

TEST_F(QpTimersTest, removal_moves_the_last_slot_and_keeps_its_bound) {
  Qp& a = make(10);
  Qp& b = make(11);
  Qp& c = make(12);
  t.lower(c, 300);
  t.remove(a);
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(c.timer_slot, 0u);
  EXPECT_EQ(b.timer_slot, 1u);
  EXPECT_EQ(due(299), std::vector<uint32_t>{});
  EXPECT_EQ(due(300), std::vector<uint32_t>{12});
  g_true[12] = 300;
  EXPECT_EQ(t.earliest(UINT64_MAX, true_wake), 300u);
  t.remove(b);  // the last slot itself
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(due(300), std::vector<uint32_t>{12});
}

TEST_F(QpTimersTest, due_by_the_bound_and_only_lowered_by_arming) {
  Qp& a = make(1);
  Qp& b = make(2);
  t.lower(a, 400);
  t.lower(b, 700);
  EXPECT_EQ(due(399), std::vector<uint32_t>{});
  EXPECT_EQ(due(400), std::vector<uint32_t>{1});
  EXPECT_EQ(due(700), (std::vector<uint32_t>{1, 2}));
  t.lower(b, 900);  // a later arming: the bound stays
  EXPECT_EQ(due(700), (std::vector<uint32_t>{1, 2}));
  t.set(a, UINT64_MAX);
  EXPECT_EQ(due(10000), (std::vector<uint32_t>{2}));
}

TEST_F(QpTimersTest, earliest_refines_stale_bounds_below_the_answer_only) {
  Qp& a = make(1);
  Qp& b = make(2);
  Qp& c = make(3);
  Qp& d = make(4);
  t.lower(a, 100);  // armed, then postponed to 800 (a restarted ACK timer)
  t.lower(b, 300);  // armed, then cancelled
  t.lower(c, 500);  // true
  t.lower(d, 600);  // postponed to 900, but above the answer: never asked
  g_true = {{1, 800}, {2, UINT64_MAX}, {3, 500}, {4, 900}};
  EXPECT_EQ(t.earliest(UINT64_MAX, true_wake), 500u);
  EXPECT_EQ(g_asked, (std::vector<uint32_t>{1, 2, 3}));
  g_asked.clear();
  // The bounds below are true now: one look at the smallest.
  EXPECT_EQ(t.earliest(UINT64_MAX, true_wake), 500u);
  EXPECT_EQ(g_asked, std::vector<uint32_t>{3});
  g_asked.clear();
  // A device deadline earlier than every QP's: no QP is asked.
  EXPECT_EQ(t.earliest(200, true_wake), 200u);
  EXPECT_TRUE(g_asked.empty());
  EXPECT_EQ(due(799), (std::vector<uint32_t>{3, 4}));
}

TEST_F(QpTimersTest, no_qps_and_no_deadlines) {
  EXPECT_EQ(t.earliest(UINT64_MAX, true_wake), UINT64_MAX);
  make(5);
  EXPECT_EQ(t.earliest(UINT64_MAX, true_wake), UINT64_MAX);
  EXPECT_TRUE(g_asked.empty());
  EXPECT_TRUE(due(UINT64_MAX - 1).empty());
}

}  // namespace
}  // namespace vrnic::engine
