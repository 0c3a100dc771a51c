// Protocol tests of how connections end (the kernel CM's rules): DREQ answered or timed out, set-ups abandoned, the process exiting, COMM_EST.
#include "cm/manager_test_wire.h"

namespace vrnic::cm {
namespace {

// The side that disconnects first is told too: DISCONNECTED on the DREP, not timed out.
TEST(CmRelease, disconnect__the_disconnecting_side_gets_disconnected_on_the_drep) {
  Wire w;
  listen_on_a(w);
  const Connected c = connect_both(w);
  ASSERT_EQ(w.cm[1]->disconnect(c.b), 0);
  ASSERT_TRUE(w.run([&] { return w.got(0, EventType::kDisconnected); }));
  EXPECT_FALSE(w.got(1, EventType::kDisconnected));  // not before the DREP
  ASSERT_EQ(w.cm[0]->disconnect(c.a), 0);
  ASSERT_TRUE(w.run([&] { return w.got(1, EventType::kDisconnected); }));
  EXPECT_FALSE(w.first(1, EventType::kDisconnected).timed_out);
  EXPECT_FALSE(w.first(0, EventType::kDisconnected).timed_out);
  EXPECT_EQ(w.count(1, EventType::kDisconnected), 1);
  EXPECT_EQ(w.cm[1]->state(c.b), State::kTimewait);
  EXPECT_EQ(w.cm[1]->disconnect(c.b), 0);  // again: nothing more to do
  EXPECT_EQ(w.sent_of(wc::Attr::kDreq), 1);
}

// A DREQ nobody answers: resent max_cm_retries times, then DISCONNECTED marked timed out (the
// kernel CMA's IB_CM_DREQ_ERROR: status -ETIMEDOUT), and time-wait all the same.
TEST(CmRelease, disconnect__dreq_never_answered__disconnected_timed_out) {
  Wire w;
  listen_on_a(w);
  const Connected c = connect_both(w);
  w.drop = [](const Mad& m) { return m.attr() == wc::Attr::kDreq; };
  ASSERT_EQ(w.cm[1]->disconnect(c.b), 0);
  ASSERT_TRUE(w.run([&] { return w.got(1, EventType::kDisconnected); }));
  EXPECT_TRUE(w.first(1, EventType::kDisconnected).timed_out);
  EXPECT_EQ(w.sent_of(wc::Attr::kDreq), 16);
  EXPECT_EQ(w.clock.t, 16 * (4096ull << 20));
  EXPECT_EQ(w.cm[1]->state(c.b), State::kTimewait);
  ASSERT_TRUE(w.run([&] { return w.got(1, EventType::kTimewaitExit); }));
}

// The requester's own REJ for a set-up it abandons (REJ "other", no comm ID of ours yet):
// the passive side's request ends with REJECTED, and its backlog place is freed.
TEST(CmRelease, reject__requester_abandons_its_req__passive_side_rejected) {
  Wire w;
  uint32_t l = 0;
  ASSERT_EQ(w.cm[0]->listen(kTcp, kPort, w.addr[0], false, 1, &l), 0);
  uint32_t b = 0;
  ASSERT_EQ(w.cm[1]->connect(args_from_b(w), &b), 0);
  ASSERT_TRUE(w.run([&] { return w.got(0, EventType::kConnectRequest); }));
  ASSERT_EQ(w.cm[1]->reject(b, {}), 0);
  EXPECT_EQ(w.cm[1]->state(b), State::kClosed);
  ASSERT_TRUE(w.run([&] { return w.got(0, EventType::kRejected); }));
  EXPECT_EQ(w.first(0, EventType::kRejected).reason,
            uint16_t(wc::RejReason::kConsumerReject));
  uint32_t b2 = 0;  // the backlog of one is free again
  ASSERT_EQ(w.cm[1]->connect(args_from_b(w), &b2), 0);
  ASSERT_TRUE(w.run([&] { return w.count(0, EventType::kConnectRequest) == 2; }, 0));
  EXPECT_EQ(w.cm[0]->counters().backlog_drops, 0u);
}

// The passive side takes its REP back before the RTU: the active side is rejected.
TEST(CmRelease, reject__after_the_rep__active_side_rejected) {
  Wire w;
  listen_on_a(w);
  w.drop = [](const Mad& m) { return m.attr() == wc::Attr::kRep; };
  uint32_t b = 0;
  ASSERT_EQ(w.cm[1]->connect(args_from_b(w), &b), 0);
  ASSERT_TRUE(w.run([&] { return w.got(0, EventType::kConnectRequest); }));
  const uint32_t a = w.first(0, EventType::kConnectRequest).conn;
  ASSERT_EQ(w.cm[0]->accept(a, accept_params()), 0);
  w.run([] { return false; }, 0);
  w.drop = nullptr;
  ASSERT_EQ(w.cm[0]->reject(a, {}), 0);
  ASSERT_TRUE(w.run([&] { return w.got(1, EventType::kRejected); }, 0));
  EXPECT_EQ(w.cm[0]->reject(a, {}), EINVAL);  // nothing left to refuse
  EXPECT_FALSE(w.got(0, EventType::kTimewaitExit));
}

// Exit with a connection of each kind: the established one gets a DREQ, the one the peer
// was releasing its DREP, the request in progress a REJ; no peer waits for its retries.
TEST(CmRelease, shutdown__every_connection_ends_on_the_wire) {
  Wire w;
  listen_on_a(w);
  auto forget_events = [&] { w.events[0].clear(), w.events[1].clear(); };
  const Connected est = connect_both(w);
  forget_events();
  const Connected releasing = connect_both(w);
  forget_events();
  ASSERT_EQ(w.cm[1]->disconnect(releasing.b), 0);
  ASSERT_TRUE(w.run([&] { return w.got(0, EventType::kDisconnected); }));
  uint32_t pending = 0;
  ASSERT_EQ(w.cm[1]->connect(args_from_b(w), &pending), 0);
  ASSERT_TRUE(w.run([&] { return w.got(0, EventType::kConnectRequest); }));
  const uint64_t t0 = w.clock.t;

  w.cm[0]->shutdown();
  ASSERT_TRUE(w.run([&] {
    return w.count(1, EventType::kDisconnected) == 2 && w.got(1, EventType::kRejected);
  }, 0));
  EXPECT_EQ(w.clock.t, t0);  // at once: nothing waited for a timeout
  EXPECT_EQ(w.cm[1]->state(est.b), State::kDreqRcvd);
  EXPECT_EQ(w.cm[1]->state(releasing.b), State::kTimewait);
  EXPECT_EQ(w.first(1, EventType::kRejected).conn, pending);
  EXPECT_EQ(w.first(1, EventType::kRejected).reason, uint16_t(wc::RejReason::kConsumerReject));
  for (const Event& e : w.events[1]) EXPECT_FALSE(e.timed_out);
}

// IBV_EVENT_COMM_EST before the RTU: established as if the RTU had come, once.
TEST(CmRelease, notify_established__rep_sent_becomes_established) {
  Wire w;
  listen_on_a(w);
  w.drop = [](const Mad& m) { return m.attr() == wc::Attr::kRtu; };
  uint32_t b = 0;
  ASSERT_EQ(w.cm[1]->connect(args_from_b(w), &b), 0);
  ASSERT_TRUE(w.run([&] { return w.got(0, EventType::kConnectRequest); }));
  const uint32_t a = w.first(0, EventType::kConnectRequest).conn;
  EXPECT_EQ(w.cm[0]->notify_established(a), EINVAL);  // nothing accepted yet
  ASSERT_EQ(w.cm[0]->accept(a, accept_params()), 0);
  ASSERT_TRUE(w.run([&] { return w.got(1, EventType::kConnectResponse); }));
  ASSERT_EQ(w.cm[1]->establish(b), 0);
  w.run([] { return false; }, 0);  // the RTU is lost
  EXPECT_EQ(w.cm[0]->state(a), State::kRepSent);
  ASSERT_EQ(w.cm[0]->notify_established(a), 0);
  EXPECT_EQ(w.cm[0]->state(a), State::kEstablished);
  EXPECT_EQ(w.count(0, EventType::kEstablished), 1);
  EXPECT_EQ(w.cm[0]->notify_established(a), EISCONN);
  EXPECT_EQ(w.cm[0]->next_timer_ns(), UINT64_MAX);  // the REP is no longer resent
}

}  // namespace
}  // namespace vrnic::cm
