// DCQCN+w and HPCC (congestion.h): HPCC's update from INT records (multiplicative above eta,
// additive below, the reference moved once per RTT), DCQCN+w's window against its rate, the
// switches' INT stamps, and both schemes on a dumbbell against DCQCN.
#include "sim/congestion.h"

#include <gtest/gtest.h>

#include "sim/network.h"
#include "sim/simulator.h"
#include "wire/opcode.h"

namespace vrnic::sim {
namespace {

constexpr double kLine = 100e9;
constexpr uint64_t kT = 10'000;  // base RTT: 10 us, so B x T = 125 000 bytes

// One hop at 100 Gb/s: `tx` bytes sent by time `ts`, `qlen` queued.
IntRecord hop(uint64_t ts, uint64_t tx, uint64_t qlen) {
  IntRecord r;
  r.push({ts, tx, qlen, kLine});
  return r;
}

Hpcc make_hpcc(uint32_t max_stage) {
  HpccParams p;
  p.eta = 0.95;
  p.max_stage = max_stage;
  p.ai_rate_bps = 40e6;
  p.min_rate_bps = 1e9;
  CcPath path{kLine, kT, 125'000};
  return Hpcc(p, path);
}

void send(Hpcc& h, int packets, uint64_t now) {
  for (int i = 0; i < packets; ++i) h.on_sent(1100, now);
}

TEST(SimHpcc, starts_at_line_rate_with_a_window_of_one_bdp) {
  Hpcc h = make_hpcc(5);
  EXPECT_EQ(h.rate_bps(), kLine);
  EXPECT_EQ(h.window_bytes(), 125'000u);
  h.on_sent(1100, 0);
  EXPECT_EQ(h.next_send_ns(), 88u);  // 1100 bytes at 100 Gb/s: 88 ns
}

// A full link (txRate = B) with a standing queue of B x T: u = 2 over a whole RTT, so
// R = Rc / (2 / 0.95) + R_AI; only an ACK past what was sent at the last update moves Rc.
TEST(SimHpcc, above_eta_cuts_multiplicatively_and_moves_the_reference_once_per_rtt) {
  Hpcc h = make_hpcc(0);
  send(h, 10, 0);
  h.on_ack(0, hop(0, 0, 125'000), 0);  // the first record: kept, nothing computed
  EXPECT_EQ(h.rate_bps(), kLine);
  send(h, 10, 0);  // 20 sent; the reference moves at an ACK of PSN 10 or later
  h.on_ack(5, hop(kT, 125'000, 125'000), kT);
  const double r1 = kLine / (2 / 0.95) + 40e6;
  EXPECT_NEAR(h.rate_bps(), r1, 1);
  EXPECT_NEAR(h.utilisation(), 2.0, 1e-9);
  EXPECT_EQ(h.reference_rate_bps(), kLine);  // not yet: PSN 5 was sent before the update
  h.on_ack(9, hop(2 * kT, 250'000, 125'000), 2 * kT);
  EXPECT_NEAR(h.rate_bps(), r1, 1);  // still from the line rate
  h.on_ack(10, hop(3 * kT, 375'000, 125'000), 3 * kT);
  EXPECT_NEAR(h.reference_rate_bps(), r1, 1);  // moved
  h.on_ack(11, hop(4 * kT, 500'000, 125'000), 4 * kT);
  EXPECT_NEAR(h.rate_bps(), r1 / (2 / 0.95) + 40e6, 1);
  EXPECT_NEAR(static_cast<double>(h.window_bytes()), h.rate_bps() / 8e9 * kT, 1);
}

// Below eta: additive steps of R_AI while the stage is below max_stage, then a
// multiplicative one (which also raises the rate when U < eta).
TEST(SimHpcc, below_eta_adds_r_ai_per_rtt_until_max_stage) {
  Hpcc h = make_hpcc(2);
  send(h, 1, 0);
  h.on_ack(0, hop(0, 0, 125'000), 0);
  send(h, 1, 0);
  h.on_ack(1, hop(kT, 125'000, 125'000), kT);  // u = 2: cut (max_stage 2 but k >= 1)
  const double r1 = kLine / (2 / 0.95) + 40e6;
  ASSERT_NEAR(h.reference_rate_bps(), r1, 1);
  uint64_t tx = 125'000, t = kT;
  double rc = r1;
  for (uint32_t step = 0; step < 3; ++step) {  // half the link, no queue: u = 0.5 for a T
    send(h, 1, t);
    t += kT, tx += 62'500;
    h.on_ack(2 + step, hop(t, tx, 0), t);
    rc = step < 2 ? rc + 40e6 : rc / (0.5 / 0.95) + 40e6;
    EXPECT_NEAR(h.reference_rate_bps(), std::min(rc, kLine), 1) << step;
    EXPECT_EQ(h.stage(), step < 2 ? step + 1 : 0u) << step;
  }
}

TEST(SimHpcc, never_below_the_minimum_rate) {
  Hpcc h = make_hpcc(0);
  send(h, 1, 0);
  h.on_ack(0, hop(0, 0, 100 * 125'000), 0);
  send(h, 1, 0);
  h.on_ack(1, hop(kT, 125'000, 100 * 125'000), kT);  // u = 101
  EXPECT_EQ(h.rate_bps(), 1e9);
  EXPECT_EQ(h.window_bytes(), 1250u);
}

TEST(SimDcqcnWindow, window_follows_the_rate) {
  engine::DcqcnParams p;
  p.line_rate_bps = kLine;
  p.pace_at_line_rate = true;
  p.pacer_burst_ns = 0;
  DcqcnWindow w(p, 150'000);
  EXPECT_EQ(w.window_bytes(), 150'000u);
  w.on_cnp(0);       // the first CNP starts the limiter
  w.on_cnp(10'000);  // a cut
  ASSERT_LT(w.rate_bps(), kLine);
  EXPECT_EQ(w.window_bytes(), static_cast<uint64_t>(150'000 * w.rate_bps() / kLine));
}

// A switch with INT stamps data packets that carry an INT header as they leave (time,
// bytes sent before, queue left, rate), not ACKs, not packets without the header; the
// header's bytes count on the wire.
TEST(SimInt, switches_stamp_data_packets_that_carry_int) {
  EventQueue ev;
  SimClock clock;
  Network net(ev, clock, 1);
  SwitchParams sp;
  sp.int_telemetry = true;
  const uint32_t a = net.add_host(0x0a000001), b = net.add_host(0x0a000002);
  const uint32_t sw = net.add_switch(sp);
  net.connect(a, sw, 100e9, 1000);
  net.connect(b, sw, 25e9, 1000);
  net.compute_routes();
  struct Sink : HostSink {
    std::vector<Packet> got;
    void deliver(uint32_t, Packet&& p) override { got.push_back(std::move(p)); }
  } sink;
  net.set_sink(&sink);
  auto packet = [](wire::PacketKind kind, bool with_int) {
    Packet p;
    p.ip.dst = {10, 0, 0, 2};
    p.bytes.assign(1000, 0);
    p.kind = kind;
    if (with_int) p.telemetry = std::make_unique<IntRecord>();
    return p;
  };
  net.enqueue(net.host_port(a), packet(wire::PacketKind::kRequest, true));
  net.enqueue(net.host_port(a), packet(wire::PacketKind::kRequest, true));
  net.enqueue(net.host_port(a), packet(wire::PacketKind::kAck, true));
  net.enqueue(net.host_port(a), packet(wire::PacketKind::kRequest, false));
  // The first is on the wire; the other three wait, the INT headers counted.
  EXPECT_EQ(net.port(net.host_port(a)).queue_bytes, 2 * (1066u + kIntHeaderBytes) + 1066);
  while (!ev.empty()) {
    const Event e = ev.pop();
    clock.advance_to(e.time);
    net.handle(e);
  }
  ASSERT_EQ(sink.got.size(), 4u);
  ASSERT_EQ(sink.got[0].telemetry->hops, 1u);
  const IntHop& h0 = sink.got[0].telemetry->hop[0];
  const IntHop& h1 = sink.got[1].telemetry->hop[0];
  EXPECT_EQ(h0.rate_bps, 25e9);  // the egress toward b
  EXPECT_EQ(h0.tx_bytes, 0u);
  EXPECT_EQ(h1.tx_bytes, 1066u + kIntHeaderBytes);  // the first packet's wire bytes
  EXPECT_GT(h1.ts_ns, h0.ts_ns);
  EXPECT_EQ(sink.got[2].telemetry->hops, 0u);  // an ACK is not stamped
  EXPECT_FALSE(sink.got[3].telemetry);
}

// Eight senders into one receiver (1 MB each): every scheme completes every flow without
// drops; DCQCN+w keeps at most a BDP per flow in flight, so the receiver's queue stays
// under eight BDPs; HPCC keeps it a small part of that.
TEST(SimSchemes, incast_every_scheme_completes_hpcc_keeps_the_queue_short) {
  std::string flows;
  for (int i = 0; i < 8; ++i)
    flows += std::string(i ? "," : "") + "{\"src\": " + std::to_string(i) +
             ", \"dst\": 8, \"bytes\": 1000000}";
  const std::string text = R"({"name": "incast8", "duration_ns": 20000000, "stats_from_ns": 0,
    "topology": {"type": "star", "hosts": 9, "host_rate_gbps": 100, "link_delay_ns": 1000},
    "switch": {"buffer_bytes": 20000000, "ecn": {"enabled": true, "kmin": 100000,
               "kmax": 400000, "pmax": 0.2}},
    "nic": {"mtu": 1024, "send_window_bytes": 1048576},
    "flows": [)" + flows + "]}";
  std::map<std::string, Summary> by;
  for (const char* scheme : {"dcqcn", "dcqcn+w", "hpcc"}) {
    Scenario sc = parse_scenario(text);
    sc.nic.scheme = parse_scheme(scheme);
    by[scheme] = Simulator(sc).run();
    EXPECT_EQ(by[scheme].flows_completed, 8u) << scheme;
    EXPECT_EQ(by[scheme].drops, 0u) << scheme;
    EXPECT_EQ(by[scheme].scheme, scheme);
  }
  // Base RTT here: 4 us of propagation and two hops of serialisation (about 4.2 us), BDP
  // about 53 KB.
  EXPECT_LT(by["dcqcn+w"].queue_max_bytes, 8 * 60'000u);
  EXPECT_GT(by["dcqcn"].queue_max_bytes, 8 * 60'000u);  // DCQCN alone: the send windows
  EXPECT_LT(by["hpcc"].bottleneck_queue_mean_bytes, by["dcqcn+w"].bottleneck_queue_mean_bytes / 2);
  EXPECT_EQ(by["hpcc"].ecn_marked, 0u);  // HPCC's packets are not ECN-capable
}

}  // namespace
}  // namespace vrnic::sim
