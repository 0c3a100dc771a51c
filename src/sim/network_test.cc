// The fabric without engines: serialisation and propagation timing through a switch, RED
// marking against the queue a packet leaves behind, PFC pause and resume against drops.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "sim/network.h"
#include "wire/opcode.h"

namespace vrnic::sim {
namespace {

struct Arrival {
  uint64_t time;
  uint8_t tos;
  uint8_t opcode;
  uint32_t seq;
};

struct Recorder : HostSink {
  SimClock* clock = nullptr;
  std::vector<Arrival> got;
  void deliver(uint32_t, Packet&& p) override {
    got.push_back({clock->now_ns(), p.tos, p.bytes[0], p.bytes[1] | uint32_t{p.bytes[2]} << 8});
  }
};

// Runs the fabric's events until none is left.
void drain(EventQueue& ev, SimClock& clock, Network& net) {
  while (!ev.empty()) {
    const Event e = ev.pop();
    clock.advance_to(e.time);
    net.handle(e);
  }
}

// A frame from 10.0.0.1 to 10.0.0.2, from UDP source port `sport`, 100 zero bytes.
Packet frame_a_to_b(uint16_t sport) {
  Packet p;
  p.ip.src = {10, 0, 0, 1};
  p.ip.dst = {10, 0, 0, 2};
  p.ip.src_port = sport;
  p.bytes.assign(100, 0);
  return p;
}

// Hosts 10.0.0.1 (a) and 10.0.0.2 (b), not yet linked: a test builds the switches between.
struct TwoHosts {
  EventQueue ev;
  SimClock clock;
  Network net{ev, clock, 1};
  Recorder rec;
  uint32_t a = net.add_host(0x0a000001), b = net.add_host(0x0a000002);
  TwoHosts() {
    rec.clock = &clock;
    net.set_sink(&rec);
  }
  void run() { drain(ev, clock, net); }
};

// Host A and host B on one switch: A's link at `rate_a`, B's at `rate_b`.
struct Fabric {
  EventQueue ev;
  SimClock clock;
  Network net{ev, clock, 1};
  Recorder rec;
  uint32_t a, b, sw;
  Fabric(const SwitchParams& sp, double rate_a, double rate_b, uint64_t delay,
         const NicRxParams& nic_b = {}, const QosParams& qos_b = {}) {
    a = net.add_host(0x0a000001);
    b = net.add_host(0x0a000002, qos_b, nic_b);
    sw = net.add_switch(sp);
    net.connect(a, sw, rate_a, delay);
    net.connect(b, sw, rate_b, delay);
    net.compute_routes();
    rec.clock = &clock;
    net.set_sink(&rec);
  }
  void send(uint32_t n, size_t payload, uint8_t tos, uint8_t opcode = 0x0a) {
    for (uint32_t i = 0; i < n; ++i) {
      Packet p;
      p.ip.dst = {10, 0, 0, 2};
      p.tos = tos;
      p.bytes.assign(payload, 0);
      p.bytes[0] = opcode;
      p.kind = wire::packet_kind(opcode, 2);  // as a sending engine stamps it
      p.bytes[1] = static_cast<uint8_t>(i);
      p.bytes[2] = static_cast<uint8_t>(i >> 8);
      net.enqueue(net.host_port(a), std::move(p));
    }
  }
  void run() { drain(ev, clock, net); }
  const Port& switch_port_to_b() const { return net.port(net.path(a, b).back()); }
  // Every one of the n frames sent arrived, in order, and nothing was dropped.
  void expect_lossless_in_order(uint32_t n) const {
    ASSERT_EQ(rec.got.size(), n);
    for (uint32_t k = 0; k < n; ++k) ASSERT_EQ(rec.got[k].seq, k);
    EXPECT_EQ(net.drops(), 0u);
  }
};

TEST(SimNetwork, serialisation_and_delay_through_a_store_and_forward_switch) {
  Fabric f(SwitchParams{}, 10e9, 10e9, 500);
  f.send(3, 1000, 0);
  f.run();
  const uint64_t ser = serialize_ns(1000 + kFrameOverhead, 10e9);  // 852.8 -> 853 ns
  EXPECT_EQ(ser, 853u);
  ASSERT_EQ(f.rec.got.size(), 3u);
  for (uint32_t k = 0; k < 3; ++k) {
    // Back to back on A's link; the switch forwards each once it is whole.
    EXPECT_EQ(f.rec.got[k].time, (k + 1) * ser + 500 + ser + 500) << k;
    EXPECT_EQ(f.rec.got[k].seq, k);
  }
  // A slower egress: the switch's link sets the spacing.
  Fabric g(SwitchParams{}, 10e9, 1e9, 500);
  g.send(3, 1000, 0);
  g.run();
  const uint64_t slow = serialize_ns(1000 + kFrameOverhead, 1e9);
  ASSERT_EQ(g.rec.got.size(), 3u);
  EXPECT_EQ(g.rec.got[0].time, ser + 500 + slow + 500);
  EXPECT_EQ(g.rec.got[1].time - g.rec.got[0].time, slow);
  EXPECT_EQ(g.rec.got[2].time - g.rec.got[1].time, slow);
}

// Thresholds given for 10 Gb/s apply a tenth as large at the 1 Gb/s port (the HPCC
// simulator's per-rate KMIN/KMAX maps): the same marks as thresholds of 20 and 60 frames.
TEST(SimNetwork, red_thresholds_scale_with_the_port_rate) {
  const uint64_t w = 1000 + kFrameOverhead;
  SwitchParams sp;
  sp.red = {true, 10 * (20 * w + w / 2), 10 * (60 * w + w / 2), 0.5, 10e9};
  Fabric f(sp, 100e9, 1e9, 100);
  f.send(100, 1000, 0x02);
  f.run();
  ASSERT_EQ(f.rec.got.size(), 100u);
  for (uint32_t k = 1; k < 100; ++k) {
    const uint64_t left = (99 - k) * w;
    const bool ce = (f.rec.got[k].tos & 3) == 3;
    if (left <= 20 * w) EXPECT_FALSE(ce) << k;
    if (left > 61 * w) EXPECT_TRUE(ce) << k;
  }
  EXPECT_GE(f.switch_port_to_b().marked, 38u);
  EXPECT_LT(f.switch_port_to_b().marked, 78u);
}

// 100 packets burst from 100 Gb/s into 1 Gb/s: the k-th to leave (k >= 1) leaves
// (99 - k) frames behind it. Kmin 20 frames, Kmax 60 frames (plus half a frame).
TEST(SimNetwork, red_marks_never_below_kmin_always_above_kmax_only_ect_data) {
  const uint64_t w = 1000 + kFrameOverhead;
  SwitchParams sp;
  sp.buffer_bytes = 1'000'000;
  sp.red = {true, 20 * w + w / 2, 60 * w + w / 2, 0.5};
  for (uint8_t tos : {uint8_t{0x02}, uint8_t{0x01}}) {  // ECT(0), ECT(1)
    Fabric f(sp, 100e9, 1e9, 100);
    f.send(100, 1000, tos);
    f.run();
    ASSERT_EQ(f.rec.got.size(), 100u);
    int middle_marked = 0;
    for (uint32_t k = 1; k < 100; ++k) {
      const uint64_t left = (99 - k) * w;
      const bool ce = (f.rec.got[k].tos & 3) == 3;
      if (left <= sp.red.kmin) {
        EXPECT_FALSE(ce) << k;
      }
      if (left > sp.red.kmax) {
        EXPECT_TRUE(ce) << k;
      }
      if (left > sp.red.kmin && left <= sp.red.kmax) middle_marked += ce;
    }
    EXPECT_GT(middle_marked, 0);  // 40 packets at up to 50 %
    EXPECT_LT(middle_marked, 40);
    EXPECT_EQ(f.switch_port_to_b().marked, 38u + middle_marked);  // 38 above Kmax
  }
  // Not-ECT data, and ACKs (XRC's too) / CNPs even if ECT, are never marked.
  for (auto [tos, opcode] : {std::pair<uint8_t, uint8_t>{0x00, wire::kRcWriteOnly},
                             {0x02, wire::kRcAck}, {0x02, wire::kXrcAck}, {0x02, wire::kCnp}}) {
    Fabric f(sp, 100e9, 1e9, 100);
    f.send(100, 1000, tos, opcode);
    f.run();
    ASSERT_EQ(f.rec.got.size(), 100u);
    for (const Arrival& a : f.rec.got) EXPECT_EQ(a.tos, tos);
    EXPECT_EQ(f.switch_port_to_b().marked, 0u);
  }
  // Responses carry data back (READ responses, ATOMIC ACKNOWLEDGE): ECN-capable, marked.
  for (uint8_t opcode : {wire::kRcReadResponseOnly, wire::kRcAtomicAck}) {
    Fabric f(sp, 100e9, 1e9, 100);
    f.send(100, 1000, 0x02, opcode);
    f.run();
    EXPECT_GE(f.switch_port_to_b().marked, 38u) << int(opcode);
  }
}

// 300 frames from 100 Gb/s into 10 Gb/s with 100 KB of buffer: PFC pauses A before the
// buffer fills and nothing is lost; without PFC the tail is dropped.
// 100 KB of buffer per port, no ECN, PFC with XOFF 30 KB and XON 15 KB.
SwitchParams pfc_switch() {
  SwitchParams sp;
  sp.buffer_bytes = 100'000;
  sp.red.enabled = false;
  sp.pfc = true;
  sp.xoff = 30'000;
  sp.xon = 15'000;
  return sp;
}

TEST(SimNetwork, pfc_pauses_and_resumes_the_upstream_instead_of_dropping) {
  const uint64_t w = 1000 + kFrameOverhead;
  SwitchParams sp = pfc_switch();
  Fabric f(sp, 100e9, 10e9, 1000);
  f.send(300, 1000, 0);
  f.run();
  ASSERT_NO_FATAL_FAILURE(f.expect_lossless_in_order(300));
  EXPECT_GT(f.net.pause_frames(), 0u);
  const Port& sw_in = f.net.port(f.net.port(f.net.host_port(f.a)).peer);
  EXPECT_GT(sw_in.resumes_by_prio[0], 1u);  // paused more than once: it resumed in between
  EXPECT_EQ(f.net.port(f.net.host_port(f.a)).pauses_expired[0], 0u);  // XON ended each
  // The queue stays within XOFF plus what was already on its way when the PAUSE went out
  // (one link delay each way at 100 Gb/s, a frame in serialisation at each end).
  const uint64_t headroom = 2 * 1000 * 100 / 8 + 2 * w;
  EXPECT_LE(f.switch_port_to_b().queue_max, sp.xoff + headroom + w);
  EXPECT_FALSE(f.net.port(f.net.host_port(f.a)).paused[0]);  // resumed at the end

  sp.pfc = false;
  Fabric g(sp, 100e9, 10e9, 1000);
  g.send(300, 1000, 0);
  g.run();
  EXPECT_GT(g.net.drops(), 0u);
  EXPECT_EQ(g.rec.got.size() + g.net.drops(), 300u);
  EXPECT_EQ(g.net.pause_frames(), 0u);
}

// A PAUSE holds the priority for its quanta and no longer: 1000 quanta at 100 Gb/s are
// 5.12 us, after which A sends without an XON.
TEST(SimNetwork, pfc_pause_runs_out_after_its_quanta) {
  Fabric f(SwitchParams{}, 100e9, 100e9, 1000);
  const uint32_t pa = f.net.host_port(f.a);
  EXPECT_EQ(pause_ns(1000, 100e9), 5120u);
  f.ev.push(0, EventKind::kPause, pa, 0, 1000);
  const Event e = f.ev.pop();
  f.net.handle(e);
  EXPECT_TRUE(f.net.port(pa).paused[0]);
  f.send(1, 1000, 0);  // priority 0: held
  f.send(1, 1000, 8 << 2);  // DSCP 8, priority 1: not paused, leaves at once
  f.run();
  const uint64_t ser = serialize_ns(1000 + kFrameOverhead, 100e9);
  ASSERT_EQ(f.rec.got.size(), 2u);
  EXPECT_EQ(f.rec.got[0].time, ser + 1000 + ser + 1000);
  EXPECT_EQ(f.rec.got[1].time, 5120 + ser + 1000 + ser + 1000);
  EXPECT_EQ(f.net.port(pa).pauses_expired[0], 1u);
  EXPECT_FALSE(f.net.port(pa).paused[0]);
}

// A pause shorter than the congestion: the switch sends its XOFF again every half pause
// time (200 quanta, 1.024 us at 100 Gb/s, against 1 us links), so A never resumes on its
// own; the XON releases it. Lossless, in order.
TEST(SimNetwork, pfc_xoff_is_refreshed_while_the_ingress_stays_above_xon) {
  SwitchParams sp = pfc_switch();
  sp.pause_quanta = 200;
  Fabric f(sp, 100e9, 10e9, 1000);
  f.send(300, 1000, 0);
  f.run();
  ASSERT_NO_FATAL_FAILURE(f.expect_lossless_in_order(300));
  const Port& a = f.net.port(f.net.host_port(f.a));
  const Port& sw_in = f.net.port(a.peer);
  EXPECT_GT(sw_in.pauses_by_prio[0], 4 * sw_in.resumes_by_prio[0]);  // refreshes
  EXPECT_EQ(a.pauses_expired[0], 0u);
}

// B's NIC moves frames to memory at 10 Gb/s behind a 100 Gb/s link: its receive buffer
// passes XOFF and the NIC pauses the switch, whose PFC pauses A in turn. Nothing is lost,
// B takes frames at its NIC's rate. Without PFC at the NIC the buffer overflows.
TEST(SimNetwork, nic_receive_buffer_sends_pause_to_its_switch) {
  const uint64_t w = 1000 + kFrameOverhead;
  SwitchParams sp = pfc_switch();
  NicRxParams nic;
  nic.rate_bps = 10e9;
  nic.buffer_bytes = 64'000;
  nic.xoff = 20'000;
  nic.xon = 10'000;
  Fabric f(sp, 100e9, 100e9, 1000, nic);
  f.send(300, 1000, 0);
  f.run();
  ASSERT_NO_FATAL_FAILURE(f.expect_lossless_in_order(300));
  const Port& b = f.net.port(f.net.host_port(f.b));
  EXPECT_GT(b.pauses_sent, 0u);
  EXPECT_EQ(f.net.nic_pause_frames(), b.pauses_sent);
  EXPECT_GT(f.net.pause_frames(), b.pauses_sent);  // and the switch paused A
  EXPECT_EQ(f.rec.got[299].time - f.rec.got[298].time, serialize_ns(w, 10e9));
  EXPECT_EQ(b.rx_bytes, 0u);

  QosParams no_pfc;
  no_pfc.pfc_priorities = 0;
  no_pfc.willing = false;
  Fabric g(sp, 100e9, 100e9, 1000, nic, no_pfc);
  g.send(300, 1000, 0);
  g.run();
  EXPECT_EQ(g.net.nic_pause_frames(), 0u);
  EXPECT_GT(g.net.port(g.net.host_port(g.b)).drops, 0u);
  EXPECT_EQ(g.rec.got.size() + g.net.drops(), 300u);
}

// The shared-buffer MMU with PFC: eight senders at 100 Gb/s into one 10 Gb/s port. Lossless:
// every frame arrives in order per sender, PAUSEs sent, and the shared pool never held more
// than the buffer; without PFC the same burst overflows the threshold and drops.
TEST(SimNetwork, shared_buffer_mmu_pauses_instead_of_dropping) {
  for (const bool pfc : {true, false}) {
    EventQueue ev;
    SimClock clock;
    Network net(ev, clock, 1);
    Recorder rec;
    rec.clock = &clock;
    net.set_sink(&rec);
    SwitchParams sp;
    sp.red.enabled = false;
    sp.pfc = pfc;
    sp.mmu.enabled = true;
    sp.mmu.buffer_bytes = 400'000;
    std::vector<uint32_t> hosts;
    for (uint32_t i = 0; i < 9; ++i) hosts.push_back(net.add_host(0x0a000001 + i));
    const uint32_t sw = net.add_switch(sp);
    for (uint32_t i = 0; i < 8; ++i) net.connect(hosts[i], sw, 100e9, 1000);
    net.connect(hosts[8], sw, 10e9, 1000);
    net.compute_routes();
    for (uint32_t i = 0; i < 8; ++i)
      for (int k = 0; k < 200; ++k) {
        Packet p;
        p.ip.dst = {10, 0, 0, 9};
        p.bytes.assign(1000, 0);
        net.enqueue(net.host_port(hosts[i]), std::move(p));
      }
    uint64_t peak_shared = 0;
    while (!ev.empty()) {
      const Event e = ev.pop();
      clock.advance_to(e.time);
      net.handle(e);
      peak_shared = std::max(peak_shared, net.mmu_of(sw).shared_used);
    }
    EXPECT_LE(peak_shared, sp.mmu.buffer_bytes);
    EXPECT_EQ(net.mmu_of(sw).shared_used, 0u);  // all released
    if (pfc) {
      EXPECT_EQ(rec.got.size(), 1600u);
      EXPECT_EQ(net.drops(), 0u);
      EXPECT_GT(net.pause_frames(), 0u);
    } else {
      EXPECT_GT(net.drops(), 0u);
      EXPECT_EQ(rec.got.size() + net.drops(), 1600u);
    }
  }
}

// ECMP: two equal paths (a diamond of switches) between host A and host B. Packets of one
// 5-tuple keep one path (no reordering within a flow); 64 source ports use both, about half
// each.
TEST(SimNetwork, ecmp_keeps_a_flow_on_one_path_and_spreads_flows) {
  TwoHosts h;
  Network& net = h.net;
  const uint32_t a = h.a, b = h.b;
  const uint32_t left = net.add_switch({}), up = net.add_switch({}), down = net.add_switch({}),
                 right = net.add_switch({});
  net.connect(a, left, 100e9, 1000);
  const uint32_t via_up = net.connect(left, up, 100e9, 1000);
  const uint32_t via_down = net.connect(left, down, 100e9, 1000);
  net.connect(up, right, 100e9, 1000);
  net.connect(down, right, 100e9, 1000);
  net.connect(b, right, 100e9, 1000);
  net.compute_routes();
  auto send = [&](uint16_t sport, int n) {
    for (int i = 0; i < n; ++i) net.enqueue(net.host_port(a), frame_a_to_b(sport));
    h.run();
  };
  send(0xc001, 20);
  const uint64_t up1 = net.port(via_up).tx_packets, down1 = net.port(via_down).tx_packets;
  EXPECT_TRUE((up1 == 20 && down1 == 0) || (up1 == 0 && down1 == 20));
  for (uint16_t s = 0; s < 64; ++s) send(static_cast<uint16_t>(0xc100 + s), 1);
  const uint64_t up2 = net.port(via_up).tx_packets - up1;
  EXPECT_EQ(up2 + net.port(via_down).tx_packets - down1, 64u);
  EXPECT_GT(up2, 20u);
  EXPECT_LT(up2, 44u);
  EXPECT_EQ(h.rec.got.size(), 84u);
}

// The sending NIC keeps the paths of a few recent flows (Network::route_path): a flow keeps
// its path whether its entry was still there or had been taken by another flow's.
TEST(SimNetwork, a_flow_keeps_its_path_when_its_cached_path_was_evicted) {
  TwoHosts h;
  Network& net = h.net;
  const uint32_t a = h.a, b = h.b;
  const uint32_t left = net.add_switch({}), right = net.add_switch({});
  std::vector<uint32_t> ups;
  for (int i = 0; i < 4; ++i) {
    const uint32_t mid = net.add_switch({});
    ups.push_back(net.connect(left, mid, 100e9, 1000));
    net.connect(mid, right, 100e9, 1000);
  }
  net.connect(a, left, 100e9, 1000);
  net.connect(b, right, 100e9, 1000);
  net.compute_routes();
  auto path_of = [&](uint16_t sport) {  // which of left's four ports the flow's frame took
    std::vector<uint64_t> before;
    for (uint32_t u : ups) before.push_back(net.port(u).tx_packets);
    net.enqueue(net.host_port(a), frame_a_to_b(sport));
    h.run();
    int took = -1;
    for (size_t i = 0; i < ups.size(); ++i)
      if (net.port(ups[i]).tx_packets != before[i]) took = static_cast<int>(i);
    return took;
  };
  std::vector<int> first;  // 64 flows: four times the NIC's cache
  for (uint16_t s = 0; s < 64; ++s) first.push_back(path_of(static_cast<uint16_t>(0xc000 + s)));
  for (int round = 0; round < 3; ++round)
    for (uint16_t s = 0; s < 64; ++s)
      ASSERT_EQ(path_of(static_cast<uint16_t>(0xc000 + (s * 7 + round) % 64)),
                first[(s * 7 + round) % 64]);
  for (int i = 0; i < 4; ++i)  // and the flows spread over the four ports
    EXPECT_GT(std::count(first.begin(), first.end(), i), 4) << "port " << i;
  EXPECT_EQ(h.rec.got.size(), 256u);
  EXPECT_EQ(net.drops(), 0u);
}

// Past the switches a frame's path holds, each switch routes the frame itself.
TEST(SimNetwork, frames_cross_more_switches_than_a_path_holds) {
  TwoHosts h;
  Network& net = h.net;
  const uint32_t a = h.a, b = h.b;
  uint32_t prev = a;
  for (size_t i = 0; i < Packet::kPathHops + 3; ++i) {
    const uint32_t sw = net.add_switch({});
    net.connect(prev, sw, 100e9, 1000);
    prev = sw;
  }
  net.connect(prev, b, 100e9, 1000);
  net.compute_routes();
  for (uint16_t s = 0; s < 5; ++s) net.enqueue(net.host_port(a), frame_a_to_b(s));
  h.run();
  EXPECT_EQ(h.rec.got.size(), 5u);
  EXPECT_EQ(net.drops(), 0u);
  EXPECT_EQ(net.path(a, b).size(), Packet::kPathHops + 4);  // the NIC's port and ten switches
}

}  // namespace
}  // namespace vrnic::sim
