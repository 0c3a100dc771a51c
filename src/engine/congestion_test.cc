// Congestion control between engines over the loop wire: ECT(0) on data, CNPs for CE-marked
// packets (their bytes against the CNP vectors, their rate limit), DCQCN reacting to them.
#include "engine/congestion.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "engine/test_fabric.h"
#include "wire/frame.h"
#include "wire/headers.h"
#include "wire/opcode.h"
#include "wire/vectors_reader.h"

namespace vrnic::engine::testing {
namespace {

struct Seen {
  uint8_t opcode = 0, tos = 0;
  uint32_t dest_qp = 0;
  bool becn = false, ack_req = false;
  wire::IcrcVerdict icrc = wire::IcrcVerdict::kBad;
};

struct Congestion : ::testing::Test {
  Fabric f;
  Node* a = nullptr;
  Node* b = nullptr;
  Qp* qa = nullptr;
  Qp* qb = nullptr;
  std::vector<Seen> seen;

  void up(const ConnectOptions& o = {}, bool cc = true,
          const std::function<void(DcqcnParams&)>& params = {}) {
    auto tweak = [cc, &params](DeviceConfig& c) {
      c.cc.enabled = cc;
      if (params) params(c.cc);
    };
    a = &f.add_node(1, tweak);
    b = &f.add_node(2, tweak);
    qa = a->create_qp();
    qb = b->create_qp();
    Fabric::connect(*a, qa, *b, qb, o);
    f.wire().set_tap([this](const WirePacket& p) {
      wire::Packet pkt;
      ASSERT_EQ(wire::parse_packet(p.data, pkt), wire::ParseError::kOk);
      seen.push_back({pkt.bth.opcode, p.tos, pkt.bth.dest_qp, pkt.bth.becn, pkt.bth.ack_req,
                      wire::verify_icrc(p.ip, p.data)});
    });
  }
  // Every packet towards b is marked CE (if it is ECN-capable).
  void mark_towards_b() {
    f.wire().set_ce_marker([](const WirePacket& p) { return p.ip.dst[3] == 2; });
  }
  // A WRITE from a to b, checked. run: until every timer has run (virtual time moves on,
  // a DCQCN limiter recovers) or, if run_ns, for that long; else only the packets are
  // delivered, at this instant.
  void write(size_t len, bool run = true, uint64_t run_ns = 0) {
    Buffer& src = a->reg(len);
    Buffer& dst = b->reg(len);
    fill_random(src.data(), len, 7);
    SendWr wr;
    Sge s{src.addr(), static_cast<uint32_t>(len), src.mr.lkey};
    wr.opcode = WrOpcode::kRdmaWrite;
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.send_flags = kSendSignaled;
    wr.remote_addr = dst.addr();
    wr.rkey = dst.mr.rkey;
    ASSERT_EQ(a->dev->post_send(qa, &wr, 1, nullptr), 0);
    if (run_ns != 0) {
      f.run(run_ns);  // returns false: a timer is still armed past run_ns
    } else if (run) {
      ASSERT_TRUE(f.run(1'000'000'000));
    } else {
      f.wire().deliver_all();
    }
    ASSERT_EQ(std::memcmp(src.data(), dst.data(), len), 0);  // the bytes landed
    auto wc = a->poll();
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  }
  size_t count(uint8_t opcode) const {
    size_t n = 0;
    for (const Seen& s : seen) n += s.opcode == opcode;
    return n;
  }
};

TEST_F(Congestion, data_packets__leave_ect0_in_the_default_dscp_acks_too) {
  up();
  write(8192);
  ASSERT_EQ(count(wire::kRcWriteFirst) + count(wire::kRcWriteMiddle) + count(wire::kRcWriteLast),
            8u);
  for (const Seen& s : seen) EXPECT_EQ(s.tos, kEcnEct0) << int(s.opcode);
  EXPECT_EQ(count(wire::kCnp), 0u);
  EXPECT_EQ(b->ctr().np_ecn_marked_roce_packets, 0u);
}

TEST_F(Congestion, data_packets__carry_the_dscp_of_the_qp_traffic_class) {
  ConnectOptions o;
  o.traffic_class = 26 << 2;  // DSCP 26 (AF31)
  up(o);
  write(4096);
  for (const Seen& s : seen) EXPECT_EQ(s.tos, (26 << 2) | kEcnEct0) << int(s.opcode);
}

TEST_F(Congestion, disabled__not_ect_so_nothing_is_marked_and_no_cnp) {
  up({}, false);
  mark_towards_b();
  write(16384);
  for (const Seen& s : seen) EXPECT_EQ(s.tos & kEcnMask, 0) << int(s.opcode);
  EXPECT_EQ(f.wire().stats().ce_marked, 0u);
  EXPECT_EQ(b->ctr().np_cnp_sent, 0u);
}

TEST_F(Congestion, ce_marked__responder_answers_with_one_cnp_and_the_requester_limits_its_rate) {
  up();
  mark_towards_b();
  write(65536, false);  // 64 packets, all sent (and marked) at one virtual instant
  EXPECT_EQ(b->ctr().np_ecn_marked_roce_packets, 64u);
  EXPECT_EQ(b->ctr().np_cnp_sent, 1u);  // min_time_between_cnps: one per 4 us
  EXPECT_EQ(b->ctr().tx_cnp, 1u);
  EXPECT_EQ(a->ctr().rx_cnp, 1u);
  EXPECT_EQ(a->ctr().rp_cnp_handled, 1u);
  ASSERT_EQ(count(wire::kCnp), 1u);
  for (const Seen& s : seen) {
    if (s.opcode != wire::kCnp) continue;
    EXPECT_EQ(s.dest_qp, a->dev->qp_num(qa));
    EXPECT_TRUE(s.becn);
    EXPECT_EQ(s.tos, 48 << 2);  // DSCP 48, not ECN-capable
    EXPECT_EQ(s.icrc, wire::IcrcVerdict::kOk);
  }
  ASSERT_NE(qa->cc.rp, nullptr);
  EXPECT_TRUE(qa->cc.rp->limited());
  EXPECT_EQ(qa->cc.rp->rate_bps(), DcqcnParams{}.line_rate_bps);  // the first CNP cuts nothing
  // No more CNPs: the first increase-timer event (300 us) finds the rate at line rate and
  // releases the limiter.
  const uint64_t t0 = f.clock().now_ns();
  ASSERT_TRUE(f.run(1'000'000'000));
  EXPECT_FALSE(qa->cc.rp->limited());
  EXPECT_EQ(f.clock().now_ns() - t0, DcqcnParams{}.timer_ns);
}

// A QP that DCQCN holds far below what its ACK timer allows for (2 Mb/s: 16 packets of 1 KiB
// take 68 ms against a 67 ms timer, and the responder answers only packets that ask) asks
// for an ACK with every packet: no ACK timeout, nothing resent, the data lands.
TEST_F(Congestion, slow_limited_qp__asks_for_every_ack_and_never_times_out) {
  up({}, true, [](DcqcnParams& p) {
    p.first_cnp_rate_bps = 2e6;
    p.timer_ns = 100'000'000'000;  // no recovery within the test
    p.byte_reset = uint64_t{1} << 40;
  });
  mark_towards_b();
  write(4096, false);  // marked: the CNP cuts the QP to 2 Mb/s
  ASSERT_NE(qa->cc.rp, nullptr);
  ASSERT_TRUE(qa->cc.rp->limited());
  ASSERT_EQ(qa->cc.rp->rate_bps(), 2e6);
  f.wire().set_ce_marker([](const WirePacket&) { return false; });
  seen.clear();
  write(32768, true, 1'000'000'000);  // 140 ms of sending at 2 Mb/s
  EXPECT_EQ(a->ctr().ack_timeouts, 0u);
  EXPECT_EQ(a->ctr().retransmitted_packets, 0u);
  size_t data = 0;
  for (const Seen& s : seen) {
    if (s.opcode < wire::kRcWriteFirst || s.opcode > wire::kRcWriteOnlyImm) continue;
    ++data;
    EXPECT_TRUE(s.ack_req);
  }
  EXPECT_EQ(data, 32u);
}

TEST_F(Congestion, cnp_rate_limit__one_per_qp_per_min_time_between_cnps) {
  up();
  mark_towards_b();
  for (int i = 0; i < 10; ++i) {  // a marked packet every microsecond
    write(64, false);
    f.clock().advance(1000);
  }
  EXPECT_EQ(b->ctr().np_ecn_marked_roce_packets, 10u);
  EXPECT_EQ(b->ctr().np_cnp_sent, 3u);  // at 0, 4 and 8 us
  EXPECT_EQ(a->ctr().rp_cnp_handled, 3u);
  // The second CNP (4 us after the first) cut the rate with alpha decayed for 4 periods.
  const DcqcnParams p;
  const double alpha4 = p.initial_alpha * std::pow(1 - p.g, 4);
  const double after_cut = p.line_rate_bps * (1 - alpha4 / 2);
  ASSERT_NE(qa->cc.rp, nullptr);
  EXPECT_LT(qa->cc.rp->rate_bps(), after_cut);  // the third cut went further
  EXPECT_GT(qa->cc.rp->rate_bps(), after_cut * 0.49);
}

// Ten marked packets in one receive batch: each mark is timed by a fresh reading of the clock
// (the device spends 1 us on each here), so min_time_between_cnps spaces the CNPs as the
// marks came, rather than answering the whole batch with one CNP.
TEST_F(Congestion, marks_of_one_receive_batch__timed_each_by_its_own_reading) {
  up();
  mark_towards_b();
  Buffer& src = a->reg(64 * 10);
  Buffer& dst = b->reg(64 * 10);
  std::vector<Sge> sges(10);
  std::vector<SendWr> wrs(10);
  for (size_t i = 0; i < 10; ++i) {
    sges[i] = {src.addr() + i * 64, 64, src.mr.lkey};
    wrs[i].opcode = WrOpcode::kRdmaWrite;
    wrs[i].sg_list = &sges[i];
    wrs[i].num_sge = 1;
    wrs[i].remote_addr = dst.addr() + i * 64;
    wrs[i].rkey = dst.mr.rkey;
  }
  ASSERT_EQ(a->dev->post_send(qa, wrs.data(), wrs.size(), nullptr), 0);
  f.clock().set_precise_step(1000);
  ASSERT_EQ(f.wire().deliver_all(1), 1u);  // the ten WRITEs reach b in one batch
  EXPECT_EQ(b->ctr().np_ecn_marked_roce_packets, 10u);
  EXPECT_EQ(b->ctr().np_cnp_sent, 3u);  // at the 1st, 5th and 9th mark: 4 us apart
}

TEST_F(Congestion, cnp_for_an_unknown_qp__ignored_and_counted) {
  up();
  wire::Packet cnp;
  cnp.bth.opcode = wire::kCnp;
  cnp.bth.dest_qp = 0x7777;
  cnp.bth.pkey = 0xffff;
  std::vector<uint8_t> bytes(wire::header_size(wire::kCnp) + wire::kIcrcSize);
  wire::write_headers(cnp, bytes.data());
  wire::IpUdpInfo ip;
  ip.src = {10, 0, 0, 2};
  ip.dst = {10, 0, 0, 1};
  ip.src_port = 0xc001;
  const size_t body = bytes.size() - wire::kIcrcSize;
  wire::store_icrc(wire::compute_icrc(ip, std::span(bytes).first(body)), bytes.data() + body);
  WirePacket pkt{ip, 48 << 2, bytes};
  a->dev->receive({&pkt, 1});
  EXPECT_EQ(a->ctr().rx_cnp, 1u);
  EXPECT_EQ(a->ctr().rp_cnp_ignored, 1u);
  EXPECT_EQ(a->ctr().rp_cnp_handled, 0u);
}

// The CNP vrnic builds, from the addresses and ports of each CNP frame in
// ../shared/vectors/rocev2.pcap, against that frame: the ConnectX-4 Lx capture byte for byte
// (its IPv4 ID in the ICRC); the other vector's CNP leaves BECN clear, the one bit vrnic sets
// as ConnectX NICs do (a bit the ICRC masks).
TEST(CongestionVectors, cnp__bytes_of_the_vector_frames) {
  int checked = 0;
  for (const auto& v : wire::vector_files::vectors()) {
    if (v.json.at("opcode").num != wire::kCnp) continue;
    SCOPED_TRACE(v.json.at("name").str);
    wire::IpUdpInfo ip;
    const auto udp = wire::parse_frame(v.frame, ip);
    struct Port : PacketPort {
      std::vector<uint8_t> bytes;
      WirePacket sent;
      void send(std::span<const WirePacket> b) override {
        bytes.assign(b[0].data.begin(), b[0].data.end());
        sent = b[0];
      }
      uint16_t source_port_for(uint32_t) override { return 0; }
    } port;
    struct Now : Clock {
      uint64_t now_ns() const override { return 1'000'000; }
    } clock;
    FakeHostMemory host;
    RecordingSink sink;
    DeviceConfig cfg;
    cfg.gid.raw = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    std::copy_n(ip.src.begin(), 4, cfg.gid.raw.begin() + 12);
    Core core{cfg, port, clock, host, sink};
    Qp qp;
    qp.src_port = ip.src_port;
    wire::IpUdpInfo from;
    from.src = ip.dst;
    cc_on_ce(core, qp, static_cast<uint32_t>(v.json.at("dqpn").num), from);
    core.tx.flush(core.port);
    ASSERT_EQ(port.bytes.size(), udp.size());
    EXPECT_EQ(port.sent.ip.src, ip.src);
    EXPECT_EQ(port.sent.ip.dst, ip.dst);
    EXPECT_EQ(port.sent.ip.src_port, ip.src_port);
    EXPECT_EQ(port.sent.tos, 48 << 2);
    // The ICRC again over the frame's own IP header (its IPv4 ID included).
    const size_t body = port.bytes.size() - wire::kIcrcSize;
    wire::store_icrc(wire::compute_icrc(ip, std::span(port.bytes).first(body)),
                     port.bytes.data() + body);
    std::vector<uint8_t> want(udp.begin(), udp.end());
    if (!wire::vector_files::is_hardware_capture(v)) want[4] |= 0x40;  // BECN
    EXPECT_EQ(port.bytes, want);
    ++checked;
  }
  EXPECT_EQ(checked, 2);
}

}  // namespace
}  // namespace vrnic::engine::testing
