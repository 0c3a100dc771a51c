// Protocol tests of the CM: two Managers over a virtual wire with virtual time, chosen and seeded losses.
#include "cm/manager_test_wire.h"

namespace vrnic::cm {
namespace {

TEST(CmManager, connect__establish_negotiate_and_disconnect) {
  Wire w;
  const uint32_t l = listen_on_a(w);
  const Connected c = connect_both(w);
  const Event& req = w.first(0, EventType::kConnectRequest);
  EXPECT_EQ(req.listener, l);
  EXPECT_EQ(req.peer.qpn, 0x123u);
  EXPECT_EQ(req.peer.starting_psn, 0xabcdefu);
  EXPECT_EQ(req.peer.responder_resources, 4);
  EXPECT_EQ(req.peer.initiator_depth, 2);
  EXPECT_EQ(req.peer.path_mtu, 5);
  EXPECT_EQ(req.peer.retry_count, 6);
  EXPECT_EQ(req.peer.rnr_retry_count, 5);
  EXPECT_EQ(req.peer.private_data.size(), kReqUserPrivate);
  EXPECT_EQ(text(req.peer.private_data), "hello");
  EXPECT_TRUE(req.remote.same_address(w.addr[1]));
  EXPECT_EQ(req.remote.port, 41000);
  EXPECT_EQ(req.local.port, kPort);
  EXPECT_EQ(req.port_space, kTcp);
  const Event& rep = w.first(1, EventType::kConnectResponse);
  EXPECT_EQ(rep.peer.qpn, 0x456u);
  EXPECT_EQ(rep.peer.starting_psn, 0x1234u);
  EXPECT_EQ(rep.peer.responder_resources, 2);
  EXPECT_EQ(rep.peer.initiator_depth, 4);
  EXPECT_EQ(rep.peer.rnr_retry_count, 3);
  EXPECT_EQ(text(rep.peer.private_data), "welcome");
  EXPECT_TRUE(w.got(1, EventType::kEstablished));
  EXPECT_EQ(w.cm[0]->state(c.a), State::kEstablished);
  EXPECT_EQ(w.cm[1]->state(c.b), State::kEstablished);

  const std::string bye = "bye";
  EXPECT_EQ(w.cm[1]->disconnect(c.b, {reinterpret_cast<const uint8_t*>(bye.data()), 3}), 0);
  ASSERT_TRUE(w.run([&] { return w.got(0, EventType::kDisconnected); }));
  EXPECT_EQ(text(w.first(0, EventType::kDisconnected).peer.private_data), "bye");
  EXPECT_EQ(w.cm[0]->disconnect(c.a), 0);  // the DREP
  ASSERT_TRUE(w.run([&] { return w.got(1, EventType::kDisconnected); }));
  ASSERT_TRUE(w.run([&] {
    return w.got(0, EventType::kTimewaitExit) && w.got(1, EventType::kTimewaitExit);
  }));
  for (wc::Attr a : {wc::Attr::kReq, wc::Attr::kRep, wc::Attr::kRtu, wc::Attr::kDreq,
                     wc::Attr::kDrep}) {
    EXPECT_EQ(w.sent_of(a), 1) << wc::to_string(a);
  }
  EXPECT_EQ(w.cm[1]->counters().tx[0], 1u);  // REQ
  EXPECT_EQ(w.cm[0]->counters().rx[0], 1u);
  EXPECT_EQ(w.cm[0]->counters().retries + w.cm[1]->counters().retries, 0u);
}

TEST(CmManager, connect__no_listener_is_rejected_at_once_with_reason_8) {
  Wire w;
  uint32_t b = 0;
  ASSERT_EQ(w.cm[1]->connect(args_from_b(w), &b), 0);
  ASSERT_TRUE(w.run([&] { return w.got(1, EventType::kRejected); }));
  EXPECT_EQ(w.first(1, EventType::kRejected).reason, uint16_t(wc::RejReason::kInvalidServiceId));
  EXPECT_EQ(w.clock.t, 0u);  // no timeout involved
  EXPECT_EQ(w.cm[0]->counters().rejects_sent, 1u);
  EXPECT_EQ(w.cm[1]->state(b), State::kClosed);
}

// An XRC initiator's REQ (transport service type 3, extended transport type 1, IBA 12.6.5)
// is accepted; an RD one (type 2) is rejected with reason 9, invalid transport type.
TEST(CmManager, connect__xrc_req_accepted_rd_rejected) {
  Wire w;
  listen_on_a(w);
  ConnectArgs a = args_from_b(w);
  a.params.transport = 3;
  uint32_t b = 0;
  ASSERT_EQ(w.cm[1]->connect(a, &b), 0);
  ASSERT_TRUE(w.run([&] { return w.got(0, EventType::kConnectRequest); }));
  EXPECT_EQ(w.first(0, EventType::kConnectRequest).peer.transport, 3);
  Wire w2;
  listen_on_a(w2);
  a = args_from_b(w2);
  a.params.transport = 2;
  ASSERT_EQ(w2.cm[1]->connect(a, &b), 0);
  ASSERT_TRUE(w2.run([&] { return w2.got(1, EventType::kRejected); }));
  EXPECT_EQ(w2.first(1, EventType::kRejected).reason,
            uint16_t(wc::RejReason::kInvalidTransportType));
  EXPECT_FALSE(w2.got(0, EventType::kConnectRequest));
}

TEST(CmManager, connect__nobody_there_is_unreachable_after_every_retry) {
  Wire w;
  w.drop = [](const Mad&) { return true; };
  uint32_t b = 0;
  ASSERT_EQ(w.cm[1]->connect(args_from_b(w), &b), 0);
  ASSERT_TRUE(w.run([&] { return w.got(1, EventType::kUnreachable); }));
  EXPECT_EQ(w.sent_of(wc::Attr::kReq), 16);  // the first and max_cm_retries (15) more
  EXPECT_EQ(w.cm[1]->counters().retries, 15u);
  EXPECT_EQ(w.cm[1]->counters().timeouts, 1u);
  EXPECT_EQ(w.clock.t, 16 * (4096ull << 20));
}

// Drops the first `n` MADs of one kind.
std::function<bool(const Mad&)> drop_first(wc::Attr a, int n = 1) {
  auto left = std::make_shared<int>(n);
  return [a, left](const Mad& m) { return m.attr() == a && (*left)-- > 0; };
}

TEST(CmManager, lost_req__resent_and_one_connection) {
  Wire w;
  listen_on_a(w);
  w.drop = drop_first(wc::Attr::kReq);
  connect_both(w);
  EXPECT_EQ(w.sent_of(wc::Attr::kReq), 2);
  EXPECT_EQ(w.cm[1]->counters().retries, 1u);
  EXPECT_EQ(w.count(0, EventType::kConnectRequest), 1);
  EXPECT_EQ(w.clock.t, 4096ull << 20);
}

TEST(CmManager, lost_rep__answered_again_without_a_second_connection) {
  Wire w;
  listen_on_a(w);
  w.drop = drop_first(wc::Attr::kRep);
  connect_both(w);
  EXPECT_EQ(w.count(0, EventType::kConnectRequest), 1);
  EXPECT_EQ(w.count(0, EventType::kEstablished), 1);
  EXPECT_EQ(w.count(1, EventType::kConnectResponse), 1);
  EXPECT_GE(w.sent_of(wc::Attr::kRep), 2);
}

TEST(CmManager, lost_rtu__rep_resent_and_rtu_answered_again) {
  Wire w;
  listen_on_a(w);
  w.drop = drop_first(wc::Attr::kRtu);
  const Connected c = connect_both(w);
  EXPECT_EQ(w.sent_of(wc::Attr::kRtu), 2);
  EXPECT_EQ(w.sent_of(wc::Attr::kRep), 2);
  EXPECT_EQ(w.cm[0]->counters().retries, 1u);
  EXPECT_EQ(w.cm[1]->counters().duplicates, 1u);
  EXPECT_EQ(w.cm[0]->state(c.a), State::kEstablished);
}

TEST(CmManager, lost_dreq__resent_and_both_disconnect) {
  Wire w;
  listen_on_a(w);
  const Connected c = connect_both(w);
  w.drop = drop_first(wc::Attr::kDreq);
  ASSERT_EQ(w.cm[1]->disconnect(c.b), 0);
  ASSERT_TRUE(w.run([&] { return w.got(0, EventType::kDisconnected); }));
  ASSERT_EQ(w.cm[0]->disconnect(c.a), 0);
  ASSERT_TRUE(w.run([&] { return w.got(1, EventType::kDisconnected); }));
  EXPECT_EQ(w.sent_of(wc::Attr::kDreq), 2);
  EXPECT_EQ(w.cm[1]->counters().retries, 1u);
}

TEST(CmManager, slow_accept__mra_keeps_the_active_side_waiting) {
  Wire w;
  listen_on_a(w);
  uint32_t b = 0;
  ASSERT_EQ(w.cm[1]->connect(args_from_b(w), &b), 0);
  ASSERT_TRUE(w.run([&] { return w.got(0, EventType::kConnectRequest); }));
  const uint32_t a = w.first(0, EventType::kConnectRequest).conn;
  // The application takes longer than B's response timeout: B resends, A answers MRA.
  ASSERT_TRUE(w.run([&] { return w.sent_of(wc::Attr::kMra) == 1; }));
  EXPECT_EQ(w.cm[1]->state(b), State::kMraReqRcvd);
  EXPECT_EQ(w.cm[0]->state(a), State::kMraReqSent);
  w.clock.t += 30'000'000'000ull;  // 30 s later, well inside the MRA's promise
  w.cm[1]->on_timer();
  EXPECT_FALSE(w.got(1, EventType::kUnreachable));
  ASSERT_EQ(w.cm[0]->accept(a, accept_params()), 0);
  ASSERT_TRUE(w.run([&] { return w.got(1, EventType::kConnectResponse); }));
  ASSERT_EQ(w.cm[1]->establish(b), 0);
  ASSERT_TRUE(w.run([&] { return w.got(0, EventType::kEstablished); }));
  EXPECT_EQ(w.count(0, EventType::kConnectRequest), 1);
}

TEST(CmManager, reject__reason_and_private_data_reach_the_active_side) {
  Wire w;
  listen_on_a(w);
  uint32_t b = 0;
  ASSERT_EQ(w.cm[1]->connect(args_from_b(w), &b), 0);
  ASSERT_TRUE(w.run([&] { return w.got(0, EventType::kConnectRequest); }));
  const uint32_t a = w.first(0, EventType::kConnectRequest).conn;
  const uint8_t busy[] = {'b', 'u', 's', 'y'};
  ASSERT_EQ(w.cm[0]->reject(a, busy), 0);
  ASSERT_TRUE(w.run([&] { return w.got(1, EventType::kRejected); }));
  const Event& e = w.first(1, EventType::kRejected);
  EXPECT_EQ(e.reason, 28);
  EXPECT_EQ(text(e.peer.private_data), "busy");
  EXPECT_EQ(w.cm[0]->accept(a, accept_params()), EINVAL);  // too late
}

TEST(CmManager, hostile_mads__dropped_and_counted_without_events) {
  Wire w;
  listen_on_a(w);
  const Connected c = connect_both(w);
  const auto before = w.events[0].size();
  Manager& a = *w.cm[0];
  std::vector<uint8_t> junk(255, 0xab);
  a.receive(w.addr[1], w.addr[0], junk);  // wrong length
  std::vector<uint8_t> mad(wc::kMadSize);
  wc::build_mad({.hdr = {}, .msg = wc::Rep{.local_comm_id = 99, .remote_comm_id = 12345}},
                mad.data());
  a.receive(w.addr[1], w.addr[0], mad);  // a REP for a connection never requested
  mad[16] = 0;
  mad[17] = 0x19;  // LAP: not handled
  a.receive(w.addr[1], w.addr[0], mad);
  Endpoint stranger = w.addr[1];
  stranger.ip[3] = 9;
  wc::build_mad({.hdr = {}, .msg = wc::Dreq{.local_comm_id = 0, .remote_comm_id = c.a}},
                mad.data());
  a.receive(stranger, w.addr[0], mad);  // a DREQ for a real connection from elsewhere
  EXPECT_EQ(a.counters().rx_malformed, 2u);
  EXPECT_EQ(a.counters().rx_unmatched, 2u);
  EXPECT_EQ(a.state(c.a), State::kEstablished);
  EXPECT_FALSE(w.got(0, EventType::kDisconnected));
  EXPECT_EQ(w.events[0].size(), before);

  // The REQ replayed after the connection is up: no second connection.
  for (const Mad& m : std::vector<Mad>(w.sent)) {
    if (m.attr() == wc::Attr::kReq) a.receive(m.from, m.to, m.bytes);
  }
  EXPECT_EQ(w.count(0, EventType::kConnectRequest), 1);
  EXPECT_GE(a.counters().duplicates, 1u);
}

TEST(CmManager, sidr__resolves_qpn_and_qkey_or_reports_no_service) {
  Wire w;
  uint32_t b = 0;
  ConnectArgs args = args_from_b(w, "udp");
  args.port_space = kUdp;
  ASSERT_EQ(w.cm[1]->resolve_sidr(args, &b), 0);
  ASSERT_TRUE(w.run([&] { return w.got(1, EventType::kUnreachable); }));
  EXPECT_EQ(w.first(1, EventType::kUnreachable).reason,
            uint8_t(wc::SidrStatus::kServiceIdNotSupported));

  listen_on_a(w, kUdp);
  ASSERT_EQ(w.cm[1]->resolve_sidr(args, &b), 0);
  ASSERT_TRUE(w.run([&] { return w.got(0, EventType::kConnectRequest); }));
  const Event& req = w.first(0, EventType::kConnectRequest);
  EXPECT_EQ(req.port_space, kUdp);
  EXPECT_EQ(text(req.peer.private_data), "udp");
  ASSERT_EQ(w.cm[0]->accept_sidr(req.conn, 0x789, 0x01234567, {}), 0);
  ASSERT_TRUE(w.run([&] { return w.got(1, EventType::kEstablished); }));
  const Event& e = w.first(1, EventType::kEstablished);
  EXPECT_EQ(e.peer.qpn, 0x789u);
  EXPECT_EQ(e.peer.qkey, 0x01234567u);
}

// A SIDR request the application destroys is answered (Rejected) and leaves the backlog.
TEST(CmManager, destroy__sidr_request_rejected_and_backlog_freed) {
  Wire w;
  uint32_t l = 0;
  ASSERT_EQ(w.cm[0]->listen(kUdp, kPort, w.addr[0], false, 1, &l), 0);
  ConnectArgs args = args_from_b(w, "udp");
  args.port_space = kUdp;
  uint32_t b1 = 0, b2 = 0;
  ASSERT_EQ(w.cm[1]->resolve_sidr(args, &b1), 0);
  ASSERT_TRUE(w.run([&] { return w.got(0, EventType::kConnectRequest); }));
  w.cm[0]->destroy(w.first(0, EventType::kConnectRequest).conn);
  ASSERT_TRUE(w.run([&] { return w.got(1, EventType::kUnreachable); }));
  const Event& refused = w.first(1, EventType::kUnreachable);
  EXPECT_EQ(refused.conn, b1);
  EXPECT_EQ(refused.reason, uint8_t(wc::SidrStatus::kRejected));
  EXPECT_EQ(w.cm[1]->counters().retries, 0u);  // answered at once, not after a resend

  ASSERT_EQ(w.cm[1]->resolve_sidr(args, &b2), 0);  // the backlog of one is free again
  ASSERT_TRUE(w.run([&] { return w.count(0, EventType::kConnectRequest) == 2; }));
  ASSERT_EQ(w.cm[0]->accept_sidr(w.events[0].back().conn, 0x789, 0x01234567, {}), 0);
  ASSERT_TRUE(w.run([&] { return w.got(1, EventType::kEstablished); }));
  EXPECT_EQ(w.first(1, EventType::kEstablished).conn, b2);
}

TEST(CmManager, listen__one_listener_per_service_and_the_specific_address_wins) {
  Wire w;
  uint32_t l1 = 0, l2 = 0, l3 = 0;
  ASSERT_EQ(w.cm[0]->listen(kTcp, kPort, w.addr[0], false, 4, &l1), 0);
  EXPECT_EQ(w.cm[0]->listen(kTcp, kPort, w.addr[0], false, 4, &l2), EADDRINUSE);
  EXPECT_EQ(w.cm[0]->listen(kTcp, kPort, Endpoint{}, true, 4, &l2), EADDRINUSE);
  EXPECT_EQ(w.cm[0]->listen(kUdp, kPort, w.addr[0], false, 4, &l3), 0);  // another port space
  w.cm[0]->stop_listening(l1);
  ASSERT_EQ(w.cm[0]->listen(kTcp, kPort, Endpoint{}, true, 4, &l2), 0);  // wildcard
  uint32_t b = 0;
  ASSERT_EQ(w.cm[1]->connect(args_from_b(w), &b), 0);
  ASSERT_TRUE(w.run([&] { return w.got(0, EventType::kConnectRequest); }));
  EXPECT_EQ(w.first(0, EventType::kConnectRequest).listener, l2);
}

// As ucma's backlog: requests the application has not fetched count; one that finds the
// backlog full is left unanswered (no REJ), and the requester's resend gets in once the
// application fetched the first.
TEST(CmManager, listen__backlog_full_leaves_the_next_request_unanswered) {
  Wire w;
  uint32_t l = 0;
  ASSERT_EQ(w.cm[0]->listen(kTcp, kPort, w.addr[0], false, 1, &l), 0);
  uint32_t b1 = 0, b2 = 0;
  ASSERT_EQ(w.cm[1]->connect(args_from_b(w), &b1), 0);
  ASSERT_EQ(w.cm[1]->connect(args_from_b(w), &b2), 0);
  w.run([] { return false; }, 0);  // both REQs delivered, no timer run
  EXPECT_EQ(w.count(0, EventType::kConnectRequest), 1);
  EXPECT_EQ(w.cm[0]->counters().backlog_drops, 1u);
  EXPECT_EQ(w.sent_of(wc::Attr::kRej), 0);
  EXPECT_EQ(w.cm[1]->state(b2), State::kReqSent);
  w.cm[0]->request_taken(w.first(0, EventType::kConnectRequest).conn);
  ASSERT_TRUE(w.run([&] { return w.count(0, EventType::kConnectRequest) == 2; }));
  EXPECT_GE(w.sent_of(wc::Attr::kReq), 3);  // b2's REQ again, after the response timeout
  EXPECT_FALSE(w.got(1, EventType::kRejected));
}

TEST(CmManager, destroy__established_connection_sends_dreq_quietly) {
  Wire w;
  listen_on_a(w);
  const Connected c = connect_both(w);
  w.cm[1]->destroy(c.b);
  ASSERT_TRUE(w.run([&] { return w.got(0, EventType::kDisconnected); }));
  ASSERT_EQ(w.cm[0]->disconnect(c.a), 0);
  ASSERT_TRUE(w.run([&] { return w.cm[1]->next_timer_ns() == UINT64_MAX; }));
  EXPECT_FALSE(w.got(1, EventType::kDisconnected));  // destroyed: no events for it
  EXPECT_EQ(w.cm[1]->state(c.b), State::kClosed);
}

// The peer died (every MAD to it is lost): the survivor's failed QP ends the connection with
// one DREQ and an immediate DISCONNECTED, not after the DREQ's retries.
TEST(CmManager, transport_lost__disconnected_at_once_with_one_dreq) {
  Wire w;
  listen_on_a(w);
  const Connected c = connect_both(w);
  w.drop = [](const Mad&) { return true; };
  ASSERT_EQ(w.cm[1]->transport_lost(c.b), 0);
  const uint64_t t0 = w.clock.t;
  ASSERT_TRUE(w.run([&] { return w.got(1, EventType::kDisconnected); }, 0));
  EXPECT_EQ(w.clock.t, t0);
  EXPECT_EQ(w.cm[1]->state(c.b), State::kTimewait);
  ASSERT_TRUE(w.run([&] { return w.got(1, EventType::kTimewaitExit); }));
  EXPECT_EQ(w.sent_of(wc::Attr::kDreq), 1);  // never resent
  EXPECT_EQ(w.cm[1]->counters().retries, 0u);
  EXPECT_EQ(w.cm[1]->transport_lost(c.b), EINVAL);  // nothing left to end
}

TEST(CmManager, transport_lost__a_live_peer_is_told_by_the_dreq) {
  Wire w;
  listen_on_a(w);
  const Connected c = connect_both(w);
  ASSERT_EQ(w.cm[0]->transport_lost(c.a), 0);
  ASSERT_TRUE(w.run([&] { return w.got(1, EventType::kDisconnected); }));
  EXPECT_TRUE(w.got(0, EventType::kDisconnected));
}

TEST(CmManager, resend_pending_disconnects__only_dreqs_awaiting_their_drep) {
  Wire w;
  listen_on_a(w);
  const Connected c = connect_both(w);
  EXPECT_EQ(w.cm[1]->resend_pending_disconnects(), 0u);  // nothing to resend
  w.drop = drop_first(wc::Attr::kDreq);
  ASSERT_EQ(w.cm[1]->disconnect(c.b), 0);
  w.run([] { return false; }, 0);  // the first DREQ is lost
  EXPECT_EQ(w.cm[1]->resend_pending_disconnects(), 1u);
  ASSERT_TRUE(w.run([&] { return w.got(0, EventType::kDisconnected); }, 0));
  EXPECT_EQ(w.sent_of(wc::Attr::kDreq), 2);
  EXPECT_EQ(w.clock.t, 0u);  // at once, not after the response timeout
}

TEST(CmManager, dreq_for_unknown_connection__answered_with_drep) {
  Wire w;
  std::vector<uint8_t> mad(wc::kMadSize);
  wc::build_mad({.hdr = {}, .msg = wc::Dreq{.local_comm_id = 5, .remote_comm_id = 77}},
                mad.data());
  w.cm[0]->receive(w.addr[1], w.addr[0], mad);
  w.run([] { return false; }, 0);
  EXPECT_EQ(w.sent_of(wc::Attr::kDrep), 1);
  EXPECT_EQ(w.cm[0]->counters().rx_unmatched, 1u);
}

// 20 connections in a row, each set up and torn down, with a fifth of the MADs lost and some
// duplicated: every one establishes and disconnects on both sides.
TEST(CmManager, lossy_wire__twenty_connections_in_a_row) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    Wire w(seed);
    w.loss = 0.2;
    w.dup = 0.05;
    listen_on_a(w);
    for (int i = 0; i < 20; ++i) {
      SCOPED_TRACE("seed " + std::to_string(seed) + " connection " + std::to_string(i));
      w.events[0].clear();
      w.events[1].clear();
      uint32_t b = 0;
      ASSERT_EQ(w.cm[1]->connect(args_from_b(w), &b), 0);
      ASSERT_TRUE(w.run([&] { return w.got(0, EventType::kConnectRequest); }));
      const uint32_t a = w.first(0, EventType::kConnectRequest).conn;
      ASSERT_EQ(w.cm[0]->accept(a, accept_params()), 0);
      ASSERT_TRUE(w.run([&] { return w.got(1, EventType::kConnectResponse); }));
      ASSERT_EQ(w.cm[1]->establish(b), 0);
      ASSERT_TRUE(w.run([&] { return w.got(0, EventType::kEstablished); }));
      ASSERT_EQ(w.cm[1]->disconnect(b), 0);
      ASSERT_TRUE(w.run([&] { return w.got(0, EventType::kDisconnected); }));
      ASSERT_EQ(w.cm[0]->disconnect(a), 0);
      ASSERT_TRUE(w.run([&] { return w.got(1, EventType::kDisconnected); }));
      EXPECT_EQ(w.count(0, EventType::kConnectRequest), 1);
      w.cm[0]->destroy(a);
      w.cm[1]->destroy(b);
    }
    EXPECT_GT(w.cm[0]->counters().retries + w.cm[1]->counters().retries, 0u);
  }
}

}  // namespace
}  // namespace vrnic::cm
