// A server between two listeners: requests wait for the next listener of their service, or are rejected when the wait ends.
#include "cm/manager_test_wire.h"

namespace vrnic::cm {
namespace {

constexpr uint64_t kWait = Config{}.relisten_wait_ns;

// A listens, takes one connection and stops listening, as perftest -R's server between its
// connections; B's next REQ finds no listener.
uint32_t serve_one_then_stop(Wire& w) {
  const uint32_t l = listen_on_a(w);
  connect_both(w);
  w.cm[0]->stop_listening(l);
  w.events[0].clear();
  w.events[1].clear();
  return l;
}

TEST(CmRelisten, req_between_listeners__waits_and_goes_to_the_next_listener) {
  Wire w;
  serve_one_then_stop(w);
  uint32_t b = 0;
  ASSERT_EQ(w.cm[1]->connect(args_from_b(w, "second"), &b), 0);
  w.run([] { return false; }, kWait / 2);  // half the wait: no answer, no event yet
  EXPECT_EQ(w.sent_of(wc::Attr::kRej), 0);
  EXPECT_FALSE(w.got(0, EventType::kConnectRequest));
  EXPECT_EQ(w.cm[0]->counters().parked, 1u);

  listen_on_a(w);  // the server listens again: the waiting REQ is its first request
  ASSERT_TRUE(w.got(0, EventType::kConnectRequest));
  const Event& req = w.first(0, EventType::kConnectRequest);
  EXPECT_EQ(text(req.peer.private_data), "second");
  ASSERT_EQ(w.cm[0]->accept(req.conn, accept_params()), 0);
  ASSERT_TRUE(w.run([&] { return w.got(1, EventType::kConnectResponse); }));
  EXPECT_EQ(w.cm[1]->establish(b), 0);
  ASSERT_TRUE(w.run([&] { return w.got(0, EventType::kEstablished); }));
  EXPECT_EQ(w.cm[0]->counters().rejects_sent, 0u);
  EXPECT_EQ(w.cm[1]->counters().retries, 0u);  // answered well within B's response timeout
}

TEST(CmRelisten, req_between_listeners__rejected_with_reason_8_when_the_wait_ends) {
  Wire w;
  serve_one_then_stop(w);
  const uint64_t stopped = w.clock.t;
  uint32_t b = 0;
  ASSERT_EQ(w.cm[1]->connect(args_from_b(w), &b), 0);
  ASSERT_TRUE(w.run([&] { return w.got(1, EventType::kRejected); }));
  EXPECT_EQ(w.first(1, EventType::kRejected).reason,
            uint16_t(wc::RejReason::kInvalidServiceId));
  EXPECT_GE(w.clock.t, stopped + kWait);
  EXPECT_LT(w.clock.t, stopped + 2 * kWait);
  EXPECT_EQ(w.cm[0]->counters().rejects_sent, 1u);
  EXPECT_EQ(w.cm[0]->next_timer_ns(), UINT64_MAX);  // nothing left waiting

  // Long after: no listener came back, a REQ is rejected at once again.
  const uint64_t now = w.clock.t;
  ASSERT_EQ(w.cm[1]->connect(args_from_b(w), &b), 0);
  w.events[1].clear();
  ASSERT_TRUE(w.run([&] { return w.got(1, EventType::kRejected); }));
  EXPECT_EQ(w.clock.t, now);
}

TEST(CmRelisten, resent_req_while_waiting__is_one_request) {
  Wire w;
  serve_one_then_stop(w);
  uint32_t b = 0;
  ASSERT_EQ(w.cm[1]->connect(args_from_b(w), &b), 0);
  w.run([] { return false; }, kWait / 4);
  // The same REQ once more (a resend, or a duplicate on the wire).
  const Mad again = w.sent.back();
  ASSERT_EQ(again.attr(), wc::Attr::kReq);
  w.cm[0]->receive(again.from, again.to, again.bytes);
  EXPECT_EQ(w.cm[0]->counters().parked, 1u);
  EXPECT_EQ(w.cm[0]->counters().duplicates, 1u);
  listen_on_a(w);
  EXPECT_EQ(w.count(0, EventType::kConnectRequest), 1);
}

// perftest -c UD -R: an RC connection first (TCP port space), then SIDR on the same port.
TEST(CmRelisten, sidr_req_after_a_tcp_listener__goes_to_the_next_udp_listener) {
  Wire w;
  const uint32_t l = listen_on_a(w, kTcp);
  w.cm[0]->stop_listening(l);
  ConnectArgs args = args_from_b(w, "udp");
  args.port_space = kUdp;
  uint32_t b = 0;
  ASSERT_EQ(w.cm[1]->resolve_sidr(args, &b), 0);
  w.run([] { return false; }, kWait / 2);
  EXPECT_FALSE(w.got(1, EventType::kUnreachable));
  listen_on_a(w, kUdp);
  ASSERT_TRUE(w.got(0, EventType::kConnectRequest));
  ASSERT_EQ(w.cm[0]->accept_sidr(w.first(0, EventType::kConnectRequest).conn, 0x789, 0x11, {}),
            0);
  ASSERT_TRUE(w.run([&] { return w.got(1, EventType::kEstablished); }));
  EXPECT_EQ(w.first(1, EventType::kEstablished).peer.qpn, 0x789u);
}

TEST(CmRelisten, other_service_stopped__req_rejected_at_once) {
  Wire w;
  uint32_t l = 0;
  ASSERT_EQ(w.cm[0]->listen(kTcp, kPort + 1, w.addr[0], false, 4, &l), 0);
  w.cm[0]->stop_listening(l);
  uint32_t b = 0;
  ASSERT_EQ(w.cm[1]->connect(args_from_b(w), &b), 0);  // to kPort, never listened on
  ASSERT_TRUE(w.run([&] { return w.got(1, EventType::kRejected); }));
  EXPECT_EQ(w.clock.t, 0u);
  EXPECT_EQ(w.cm[0]->counters().parked, 0u);
}

}  // namespace
}  // namespace vrnic::cm
