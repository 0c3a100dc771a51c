// The optional congestion-control interface (rate_control.h) over the loop wire: a QP whose
// device has a factory gets its controller in DCQCN's place; the controller's window bounds
// the packets in flight, its pacer holds the next one, it sees every packet sent and every
// CNP; a device without a factory keeps DCQCN.
#include "engine/rate_control.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "engine/test_fabric.h"
#include "wire/headers.h"
#include "wire/opcode.h"

namespace vrnic::engine::testing {
namespace {

// A controller with a fixed window and an optional fixed spacing between packets.
struct StubControl : RateControl {
  uint64_t window = UINT64_MAX, spacing_ns = 0, next_send = 0;
  uint32_t ack_every = 0;
  std::vector<uint64_t> sent_bytes, sent_at, cnps;
  void on_cnp(uint64_t now) override { cnps.push_back(now); }
  void on_sent(uint64_t wire_bytes, uint64_t now) override {
    sent_bytes.push_back(wire_bytes);
    sent_at.push_back(now);
    next_send = now + spacing_ns;
  }
  void advance(uint64_t) override {}
  uint64_t next_event_ns() const override { return UINT64_MAX; }
  uint64_t next_send_ns() const override { return spacing_ns ? next_send : 0; }
  uint64_t window_bytes() const override { return window; }
  double rate_bps() const override { return 100e9; }
  uint32_t ack_interval() const override { return ack_every; }
};

struct StubFactory : RateControlFactory {
  uint64_t window = UINT64_MAX, spacing_ns = 0;
  uint32_t ack_every = 0;
  std::vector<StubControl*> made;
  std::vector<uint32_t> qpns;
  std::unique_ptr<RateControl> make(uint32_t qpn) override {
    auto c = std::make_unique<StubControl>();
    c->window = window;
    c->spacing_ns = spacing_ns;
    c->ack_every = ack_every;
    made.push_back(c.get());
    qpns.push_back(qpn);
    return c;
  }
};

struct RateControlTest : ::testing::Test {
  Fabric f;
  StubFactory factory;
  Node* a = nullptr;
  Node* b = nullptr;
  Qp* qa = nullptr;
  Qp* qb = nullptr;
  size_t data_seen = 0;
  size_t ack_req_seen = 0;  // of those, the ones that ask for an ACK (BTH AckReq)

  void up(bool with_factory = true) {
    auto tweak = [this, with_factory](DeviceConfig& c) {
      if (with_factory) c.rate_control = &factory;
    };
    a = &f.add_node(1, tweak);
    b = &f.add_node(2, tweak);
    qa = a->create_qp();
    qb = b->create_qp();
    Fabric::connect(*a, qa, *b, qb);  // MTU 1024
    f.wire().set_tap([this](const WirePacket& p) {
      data_seen += p.ip.dst[3] == 2;  // a sends data only, b only ACKs and CNPs
      ack_req_seen += p.ip.dst[3] == 2 && (p.data[8] & 0x80) != 0;
    });
  }
  // Posts a signaled WRITE of `len` from a to b; returns the buffers' addresses.
  std::pair<Buffer*, Buffer*> post_write(size_t len) {
    Buffer& src = a->reg(len);
    Buffer& dst = b->reg(len);
    fill_random(src.data(), len, 3);
    Sge s{src.addr(), static_cast<uint32_t>(len), src.mr.lkey};
    SendWr wr = wr_of(WrOpcode::kRdmaWrite, 1, &s, dst.addr(), dst.mr.rkey);
    wr.send_flags = kSendSignaled;
    EXPECT_EQ(a->dev->post_send(qa, &wr, 1, nullptr), 0);
    return {&src, &dst};
  }
};

TEST_F(RateControlTest, window__bounds_the_packets_in_flight_and_the_write_completes) {
  factory.window = 4 * 1024;  // four packets of the 1024-byte MTU
  up();
  auto [src, dst] = post_write(64 * 1024);
  EXPECT_EQ(f.wire().in_flight(), 4u);  // not the 64 the send window would allow
  ASSERT_EQ(factory.made.size(), 1u);
  EXPECT_EQ(factory.qpns[0], a->dev->qp_num(qa));
  EXPECT_EQ(a->dev->rate_control(a->dev->qp_num(qa)), factory.made[0]);
  ASSERT_TRUE(f.run(1'000'000'000));
  EXPECT_EQ(std::memcmp(src->data(), dst->data(), 64 * 1024), 0);
  auto wc = a->poll();
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  // Every data packet passed through the controller, framed: payload, BTH, ICRC and
  // Ethernet/IPv4/UDP (RETH on the first).
  ASSERT_EQ(factory.made[0]->sent_bytes.size(), 64u);
  EXPECT_EQ(factory.made[0]->sent_bytes[1], 1024u + 12 + 4 + 14 + 4 + 20 + 8);
  EXPECT_EQ(data_seen, 64u);
}

// A 40-packet WRITE with the controller's ack_interval `every`: how many packets ask.
size_t ack_requests(RateControlTest& t, uint32_t every) {
  t.factory.ack_every = every;
  t.up();
  auto [src, dst] = t.post_write(40 * 1024);
  EXPECT_TRUE(t.f.run(1'000'000'000));
  EXPECT_EQ(std::memcmp(src->data(), dst->data(), 40 * 1024), 0);
  EXPECT_EQ(t.data_seen, 40u);
  EXPECT_EQ(t.a->poll().size(), 1u);
  return t.ack_req_seen;
}

TEST_F(RateControlTest, ack_interval__zero_keeps_every_16th_and_the_last) {
  EXPECT_EQ(ack_requests(*this, 0), 3u);  // packets 16, 32 and 40
}

TEST_F(RateControlTest, ack_interval__one_makes_every_packet_ask) {
  EXPECT_EQ(ack_requests(*this, 1), 40u);
}

TEST_F(RateControlTest, ack_interval__four_makes_every_4th_ask) {
  EXPECT_EQ(ack_requests(*this, 4), 10u);
}

TEST_F(RateControlTest, window__shrunk_under_packets_that_asked_nothing_lets_one_more_ask) {
  factory.spacing_ns = 1000;  // paced: few in flight, so only every 16th asks
  up();
  auto [src, dst] = post_write(40 * 1024);
  StubControl& ctl = *factory.made.at(0);
  while (ctl.sent_at.size() < 20) {  // 16 packets delivered and acknowledged, 4 more out
    f.clock().advance_to(a->dev->next_timer_ns());
    a->dev->on_timer();
    if (ctl.sent_at.size() <= 16) f.wire().deliver_all();
  }
  ASSERT_EQ(f.wire().in_flight(), 4u);  // packets 17-20, none of which asked for an ACK
  ctl.window = 2 * 1024;  // two packets: fewer than those in flight
  ASSERT_TRUE(f.run(1'000'000'000));
  EXPECT_EQ(a->ctr().ack_timeouts, 0u);  // not stalled until the ACK timer
  EXPECT_EQ(a->ctr().retransmitted_packets, 0u);
  EXPECT_EQ(std::memcmp(src->data(), dst->data(), 40 * 1024), 0);
  auto wc = a->poll();
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
}

TEST_F(RateControlTest, pacer__spaces_the_packets_as_the_controller_says) {
  factory.spacing_ns = 5000;
  up();
  auto [src, dst] = post_write(8 * 1024);
  EXPECT_EQ(f.wire().in_flight(), 1u);  // the second waits for the pacer
  ASSERT_TRUE(f.run(1'000'000'000));
  EXPECT_EQ(std::memcmp(src->data(), dst->data(), 8 * 1024), 0);
  const std::vector<uint64_t>& at = factory.made[0]->sent_at;
  ASSERT_EQ(at.size(), 8u);
  for (size_t i = 1; i < at.size(); ++i) EXPECT_GE(at[i] - at[i - 1], 5000u) << i;
}

TEST_F(RateControlTest, cnp__goes_to_the_controller_not_to_dcqcn) {
  up();
  f.wire().set_ce_marker([](const WirePacket& p) { return p.ip.dst[3] == 2; });
  post_write(4096);  // the buffers stay registered with the nodes
  ASSERT_TRUE(f.run(1'000'000'000));
  EXPECT_GE(b->ctr().np_cnp_sent, 1u);
  ASSERT_EQ(factory.made.size(), 1u);  // b's QP sends only ACKs: no controller there
  EXPECT_EQ(factory.made[0]->cnps.size(), a->ctr().rp_cnp_handled);
  EXPECT_GE(factory.made[0]->cnps.size(), 1u);
  std::vector<QpRate> rates;
  a->dev->qp_rates(rates);
  EXPECT_TRUE(rates.empty());  // no DCQCN reaction point was made
}

TEST_F(RateControlTest, without_a_factory__dcqcn_as_before) {
  up(false);
  f.wire().set_ce_marker([](const WirePacket& p) { return p.ip.dst[3] == 2; });
  post_write(4096);
  ASSERT_TRUE(f.run(1'000'000'000));
  EXPECT_TRUE(factory.made.empty());
  EXPECT_EQ(a->dev->rate_control(a->dev->qp_num(qa)), nullptr);
  std::vector<QpRate> rates;
  a->dev->qp_rates(rates);
  EXPECT_EQ(rates.size(), 1u);  // DCQCN's reaction point took the CNP
}

}  // namespace
}  // namespace vrnic::engine::testing
