// The CM over real engines on the loop wire: MADs through QP1, QPs connected with what REQ/REP negotiated, data moved; with loss.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>

#include "cm/manager.h"
#include "engine/test_fabric.h"
#include "wire/cm_mad.h"

namespace vrnic::cm {
namespace {

using namespace vrnic::engine;
using namespace vrnic::engine::testing;
namespace wc = wire::cm;

// A node's CM: its MADs leave through the device's QP1.
struct DevicePort : MadPort {
  Device* dev = nullptr;
  void send_mad(const Endpoint& from, const Endpoint& to,
                std::span<const uint8_t, wc::kMadSize> mad) override {
    wire::IpUdpInfo ip;
    ip.ipv6 = to.ipv6;
    ip.dst = to.ip;
    dev->send_gsi(ip, mad);
  }
};

struct CmNode {
  Node* node = nullptr;
  DevicePort port;
  std::unique_ptr<Manager> cm;
  Endpoint addr;
  std::vector<Event> events;
};

class CmOverEngines {
 public:
  explicit CmOverEngines(uint64_t seed) : fabric_(seed) {
    for (int i = 0; i < 2; ++i) {
      Node& n = fabric_.add_node(uint8_t(i + 1));
      n.sink.take_gsi = true;
      CmNode& c = nodes[i];
      c.node = &n;
      c.port.dev = n.dev.get();
      c.addr.ip = {10, 0, 0, uint8_t(i + 1)};
      Config cfg;
      cfg.seed = static_cast<uint32_t>(seed * 3 + i);
      cfg.cm_response_timeout = 14;  // 67 ms: the loop wire has no real delay
      c.cm = std::make_unique<Manager>(cfg, c.port, fabric_.clock());
    }
  }

  transport::LoopWire& wire() { return fabric_.wire(); }

  // Moves packets, hands QP1's MADs to the CMs and runs every timer in virtual time until
  // `done` holds (false if virtual time ran past the limit first).
  bool run(const std::function<bool()>& done, uint64_t limit_ns = 120'000'000'000ull) {
    const uint64_t end = fabric_.clock().now_ns() + limit_ns;
    while (!done()) {
      if (wire().deliver_all() > 0 || feed_cms()) continue;
      uint64_t t = wire().next_due_ns();
      for (CmNode& c : nodes) {
        t = std::min({t, c.node->dev->next_timer_ns(), c.cm->next_timer_ns()});
      }
      if (t == UINT64_MAX || t > end) return done();
      fabric_.clock().advance_to(t);
      for (CmNode& c : nodes) {
        if (c.node->dev->next_timer_ns() <= t) c.node->dev->on_timer();
        c.cm->on_timer();
      }
    }
    return true;
  }

  bool got(int i, EventType t) {
    Event e;
    while (nodes[i].cm->poll_event(e)) nodes[i].events.push_back(e);
    for (const Event& x : nodes[i].events) {
      if (x.type == t) return true;
    }
    return false;
  }
  Event take(int i, EventType t) {
    got(i, t);
    auto& ev = nodes[i].events;
    for (auto it = ev.begin(); it != ev.end(); ++it) {
      if (it->type == t) {
        Event e = *it;
        ev.erase(it);
        return e;
      }
    }
    ADD_FAILURE() << "no " << to_string(t);
    return {};
  }

  CmNode nodes[2];

 private:
  bool feed_cms() {
    bool any = false;
    for (CmNode& c : nodes) {
      auto mads = std::move(c.node->sink.gsi);
      c.node->sink.gsi.clear();
      for (auto& m : mads) {
        Endpoint from{.ipv6 = m.from.ipv6, .ip = m.from.src};
        Endpoint to{.ipv6 = m.from.ipv6, .ip = m.from.dst};
        c.cm->receive(from, to, m.mad);
        any = true;
      }
    }
    return any;
  }
  Fabric fabric_;
};

// RESET -> INIT -> RTR -> RTS with what the CM negotiated, as librdmacm does before
// rdma_accept / rdma_establish.
void bring_up(Node& n, Qp* qp, const Params& mine, const Params& peer, uint8_t peer_ip) {
  ConnectOptions o;
  o.mtu = std::min(mine.path_mtu, peer.path_mtu);
  o.max_rd_atomic = peer.responder_resources ? peer.responder_resources : 1;
  Gid dgid;
  dgid.raw = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, peer_ip};
  Fabric::bring_up(n, qp, dgid, peer.qpn, mine.starting_psn, peer.starting_psn, o);
}

Params params_of(Node& n, Qp* qp, uint32_t psn) {
  Params p;
  p.qpn = n.dev->qp_num(qp);
  p.starting_psn = psn;
  p.responder_resources = 4;
  p.initiator_depth = 4;
  p.path_mtu = 3;
  return p;
}

// One connection B -> A through the CM, a WRITE and a SEND over it, then the release.
void connect_write_disconnect(CmOverEngines& t, int round) {
  Node& a = *t.nodes[0].node;
  Node& b = *t.nodes[1].node;
  Qp* qb = b.create_qp();
  ConnectArgs args;
  args.local = t.nodes[1].addr;
  args.remote = t.nodes[0].addr;
  args.remote.port = 7174;
  args.port_space = uint16_t(wc::PortSpace::kTcp);
  args.params = params_of(b, qb, 1000 + round);
  uint32_t cb = 0;
  ASSERT_EQ(t.nodes[1].cm->connect(args, &cb), 0);
  ASSERT_TRUE(t.run([&] { return t.got(0, EventType::kConnectRequest); }));
  const Event req = t.take(0, EventType::kConnectRequest);
  Qp* qa = a.create_qp();
  const Params pa = params_of(a, qa, 77777 + round);
  bring_up(a, qa, pa, req.peer, 2);
  ASSERT_EQ(t.nodes[0].cm->accept(req.conn, pa), 0);
  ASSERT_TRUE(t.run([&] { return t.got(1, EventType::kConnectResponse); }));
  const Event rep = t.take(1, EventType::kConnectResponse);
  EXPECT_EQ(rep.peer.qpn, a.dev->qp_num(qa));
  bring_up(b, qb, args.params, rep.peer, 1);
  ASSERT_EQ(t.nodes[1].cm->establish(cb), 0);
  ASSERT_TRUE(t.run([&] { return t.got(0, EventType::kEstablished); }));
  t.take(0, EventType::kEstablished);
  t.take(1, EventType::kEstablished);

  Buffer& src = b.reg(8192);
  Buffer& dst = a.reg(8192);
  fill_random(src.data(), 8192, round);
  Sge sg{src.addr(), 8192, src.mr.lkey};
  ASSERT_EQ(post_send(b, qb, wr_of(WrOpcode::kRdmaWrite, 1, &sg, dst.addr(), dst.mr.rkey)), 0);
  ASSERT_TRUE(t.run([&] { return !b.poll().empty(); }));
  EXPECT_EQ(std::memcmp(src.data(), dst.data(), 8192), 0);

  ASSERT_EQ(t.nodes[1].cm->disconnect(cb), 0);
  ASSERT_TRUE(t.run([&] { return t.got(0, EventType::kDisconnected); }));
  t.take(0, EventType::kDisconnected);
  ASSERT_EQ(t.nodes[0].cm->disconnect(req.conn), 0);
  ASSERT_TRUE(t.run([&] { return t.got(1, EventType::kDisconnected); }));
  t.take(1, EventType::kDisconnected);
  t.nodes[0].cm->destroy(req.conn);
  t.nodes[1].cm->destroy(cb);
  EXPECT_EQ(a.dev->destroy_qp(qa), 0);
  EXPECT_EQ(b.dev->destroy_qp(qb), 0);
}

TEST(CmOverEngines, connect__qps_connected_from_the_negotiation_move_data) {
  CmOverEngines t(1);
  uint32_t l = 0;
  ASSERT_EQ(t.nodes[0].cm->listen(uint16_t(wc::PortSpace::kTcp), 7174, t.nodes[0].addr, false,
                                  8, &l),
            0);
  connect_write_disconnect(t, 0);
  Node& a = *t.nodes[0].node;
  EXPECT_EQ(a.ctr().rx_gsi, 3u);  // REQ, RTU, DREQ
  EXPECT_EQ(a.ctr().tx_gsi, 2u);  // REP, DREP
  EXPECT_EQ(a.ctr().rx_unknown_qp, 0u);
}

TEST(CmOverEngines, lossy_wire__twenty_connections_establish_and_release) {
  CmOverEngines t(7);
  uint32_t l = 0;
  ASSERT_EQ(t.nodes[0].cm->listen(uint16_t(wc::PortSpace::kTcp), 7174, t.nodes[0].addr, false,
                                  8, &l),
            0);
  transport::Faults f;
  f.loss = 0.2;
  f.dup = 0.05;
  t.wire().set_faults(f);
  for (int i = 0; i < 20; ++i) {
    SCOPED_TRACE("connection " + std::to_string(i));
    connect_write_disconnect(t, i);
    if (::testing::Test::HasFatalFailure()) return;
  }
  const auto& ca = t.nodes[0].cm->counters();
  const auto& cb = t.nodes[1].cm->counters();
  EXPECT_GT(ca.retries + cb.retries, 0u);
  EXPECT_GT(ca.duplicates + cb.duplicates, 0u);
}

TEST(CmOverEngines, qp1__a_datagram_that_is_not_a_gsi_mad_is_dropped_and_counted) {
  CmOverEngines t(3);
  Node& a = *t.nodes[0].node;
  Node& b = *t.nodes[1].node;
  wire::IpUdpInfo to;
  to.dst = {10, 0, 0, 1};
  std::array<uint8_t, 256> mad{};
  b.dev->send_gsi(to, mad);  // a MAD of no class: reaches the CM, which drops it
  ASSERT_TRUE(t.run([&] { return t.nodes[0].cm->counters().rx_malformed == 1; }));
  EXPECT_EQ(a.ctr().rx_gsi, 1u);
  a.sink.take_gsi = false;  // no CM: QP1 does not exist
  b.dev->send_gsi(to, mad);
  ASSERT_TRUE(t.run([&] { return a.ctr().rx_unknown_qp == 1; }));
}

}  // namespace
}  // namespace vrnic::cm
