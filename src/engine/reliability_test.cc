// Reliability tests over a faulty loop wire: Go-Back-N from NAKs, timeouts and implicit
// NAKs, duplicates re-ACKed and never re-placed, at-most-once atomics, retry and RNR
// exhaustion. Fixed seeds: every run is the same.
#include <gtest/gtest.h>

#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/qp.h"
#include "engine/test_fabric.h"
#include "wire/headers.h"
#include "wire/opcode.h"

namespace vrnic::engine::testing {
namespace {

wire::Packet parse(const WirePacket& p) {
  wire::Packet out;
  wire::parse_packet(p.data, out);
  return out;
}

struct Rel : ::testing::Test {
  Fabric f{7};
  Node& a = f.add_node(1);
  Node& b = f.add_node(2);
  Qp* qa = a.create_qp(1024);
  Qp* qb = b.create_qp(1024);
  void connect(const ConnectOptions& o = {}) { Fabric::connect(a, qa, b, qb, o); }
};

// Drops the first copy of one chosen packet: recovery must resend it from the middle.
TEST_F(Rel, go_back_n__write_resent_from_middle_after_one_loss) {
  connect();
  Buffer& src = a.reg(20 * 1024);
  Buffer& dst = b.reg(20 * 1024);
  fill_random(src.data(), src.bytes.size(), 1);
  bool dropped = false;
  f.wire().set_drop_filter([&](const WirePacket& p) {
    wire::Packet h = parse(p);
    if (!dropped && h.bth.opcode == wire::kRcWriteMiddle && h.bth.psn == 100 + 7) {
      dropped = true;
      return true;
    }
    return false;
  });
  Sge sg{src.addr(), 20 * 1024, src.mr.lkey};
  ASSERT_EQ(post_send(a, qa, wr_of(WrOpcode::kRdmaWrite, 1, &sg, dst.addr(), dst.mr.rkey)), 0);
  ASSERT_TRUE(f.run());
  EXPECT_TRUE(dropped);
  EXPECT_EQ(src.bytes, dst.bytes);
  auto wcs = a.poll();
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(b.ctr().tx_nak_psn_seq, 1u);  // one NAK for the whole gap
  EXPECT_EQ(a.ctr().rx_nak_psn_seq, 1u);
  EXPECT_EQ(b.ctr().rx_out_of_sequence, 20u - 8);
  EXPECT_EQ(a.ctr().retransmitted_packets, 20u - 7);
  EXPECT_EQ(a.ctr().ack_timeouts, 0u);
}

// The last packet is lost: no later packet reveals the gap, the local ACK timer does.
TEST_F(Rel, ack_timeout__lost_last_packet_is_resent_after_timeout) {
  connect({.timeout = 10});  // 4.096 us * 2^10 = 4.19 ms
  Buffer& src = a.reg(3000);
  Buffer& dst = b.reg(3000);
  fill_random(src.data(), 3000, 2);
  int seen = 0;
  f.wire().set_drop_filter([&](const WirePacket& p) {
    wire::Packet h = parse(p);
    return h.bth.opcode == wire::kRcWriteLast && seen++ == 0;
  });
  Sge sg{src.addr(), 3000, src.mr.lkey};
  uint64_t t0 = f.clock().now_ns();
  ASSERT_EQ(post_send(a, qa, wr_of(WrOpcode::kRdmaWrite, 1, &sg, dst.addr(), dst.mr.rkey)), 0);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(src.bytes, dst.bytes);
  EXPECT_EQ(a.poll().at(0).status, WcStatus::kSuccess);
  EXPECT_EQ(a.ctr().ack_timeouts, 1u);
  EXPECT_GE(f.clock().now_ns() - t0, ack_timeout_ns(10));
  // Only the LAST asks for an ACK, so packets 0 and 1 were never acknowledged: the resend
  // starts at the first PSN, all 3 packets go again, and the responder takes the first two
  // as duplicates (re-ACKed, not placed again).
  EXPECT_EQ(a.ctr().retransmitted_packets, 3u);
  EXPECT_EQ(b.ctr().rx_duplicate, 2u);
}

// A lost READ response: the next response skips a PSN (implicit NAK), the READ is asked
// again from the missing packet on and the responder replays it from its ACK queue.
TEST_F(Rel, implicit_nak__lost_read_response_is_requested_again_from_the_middle) {
  connect();
  Buffer& local = a.reg(10 * 1024);
  Buffer& remote = b.reg(10 * 1024);
  fill_random(remote.data(), remote.bytes.size(), 3);
  bool dropped = false;
  f.wire().set_drop_filter([&](const WirePacket& p) {
    wire::Packet h = parse(p);
    if (!dropped && h.bth.opcode == wire::kRcReadResponseMiddle && h.bth.psn == 100 + 4) {
      dropped = true;
      return true;
    }
    return false;
  });
  Sge sg{local.addr(), 10 * 1024, local.mr.lkey};
  ASSERT_EQ(post_send(a, qa, wr_of(WrOpcode::kRdmaRead, 1, &sg, remote.addr(), remote.mr.rkey)), 0);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(local.bytes, remote.bytes);
  EXPECT_EQ(a.poll().at(0).status, WcStatus::kSuccess);
  EXPECT_EQ(a.ctr().implicit_naks, 1u);
  EXPECT_EQ(b.ctr().duplicate_reads_replayed, 1u);
  EXPECT_EQ(b.ctr().rx_read_request, 2u);
}

// A READ of two and a half pieces (pieces of half the window, requester.h read_piece); a
// response lost inside the first and inside the last piece is asked for again with a
// request that stays inside its piece, a subset of the responder's entry for it.
TEST_F(Rel, implicit_nak__lost_responses_in_two_pieces_of_a_long_read) {
  connect();
  const uint32_t piece = kWindow1k / 2;
  const uint32_t packets = 2 * piece + 36;
  Buffer& local = a.reg(packets * 1024);
  Buffer& remote = b.reg(packets * 1024);
  fill_random(remote.data(), remote.bytes.size(), 13);
  std::set<uint32_t> dropped;
  std::vector<std::pair<uint32_t, uint32_t>> requests;  // (first response, packets)
  f.wire().set_drop_filter([&](const WirePacket& p) {
    wire::Packet h = parse(p);
    uint32_t psn = h.bth.psn;
    if (h.bth.opcode == wire::kRcReadRequest)
      requests.emplace_back(psn - 100, (h.reth.dma_len + 1023) / 1024);
    if (wire::opcode_info(h.bth.opcode).kind == wire::OpKind::kReadResponse &&
        (psn == 100 + 31 || psn == 100 + 2 * piece + 16) && !dropped.count(psn)) {
      dropped.insert(psn);
      return true;
    }
    return false;
  });
  Sge sg{local.addr(), packets * 1024, local.mr.lkey};
  ASSERT_EQ(post_send(a, qa, wr_of(WrOpcode::kRdmaRead, 1, &sg, remote.addr(), remote.mr.rkey)), 0);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(dropped.size(), 2u);
  EXPECT_EQ(local.bytes, remote.bytes);
  auto wcs = a.poll();
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(a.ctr().ack_timeouts, 0u);
  EXPECT_EQ(a.ctr().implicit_naks, 2u);
  // Each piece asked for once, the two resends from the lost responses to their pieces' ends;
  // the middle piece, in flight behind the first loss, is asked for again (Go-Back-N).
  std::vector<std::pair<uint32_t, uint32_t>> want = {
      {0, piece}, {piece, piece}, {31, piece - 31}, {piece, piece}, {2 * piece, 36},
      {2 * piece + 16, 20}};
  EXPECT_EQ(requests, want);
  for (auto [first, n] : requests)  // none crosses a piece boundary
    EXPECT_EQ(first / piece, (first + n - 1) / piece) << first << "+" << n;
  EXPECT_EQ(b.ctr().duplicate_reads_replayed, 3u);
}

// A lost atomic ACK: the retransmitted atomic is answered from the ACK queue, the word is
// added to once.
TEST_F(Rel, ack_queue__duplicate_atomic_is_replayed_not_executed) {
  connect({.timeout = 8});
  Buffer& res = a.reg(8);
  Buffer& word = b.reg(8);
  uint64_t v = 0x7776757473727170ull;
  std::memcpy(word.data(), &v, 8);
  int acks = 0;
  f.wire().set_drop_filter([&](const WirePacket& p) {
    return parse(p).bth.opcode == wire::kRcAtomicAck && acks++ == 0;
  });
  Sge sg{res.addr(), 8, res.mr.lkey};
  SendWr wr = wr_of(WrOpcode::kAtomicFetchAdd, 1, &sg, word.addr(), word.mr.rkey);
  wr.compare_add = 0x036328FE883A1230ull;
  ASSERT_EQ(post_send(a, qa, wr), 0);
  ASSERT_TRUE(f.run());
  uint64_t now, orig;
  std::memcpy(&now, word.data(), 8);
  std::memcpy(&orig, res.data(), 8);
  EXPECT_EQ(now, 0x7AD99E72FBAC83A0ull);  // added once
  EXPECT_EQ(orig, 0x7776757473727170ull);  // the saved original, from the ACK queue
  EXPECT_EQ(b.ctr().rx_atomic, 2u);
  EXPECT_EQ(b.ctr().duplicate_atomics_replayed, 1u);
  EXPECT_EQ(a.poll().at(0).status, WcStatus::kSuccess);
}

TEST_F(Rel, responder__duplicate_send_is_acked_not_placed_again) {
  connect();
  f.wire().set_faults({.dup = 1.0});  // every packet arrives twice
  Buffer& src = a.reg(5000);
  Buffer& dst = b.reg(5000 * 4);
  fill_random(src.data(), 5000, 4);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(post_recv(b, qb, i, {{dst.addr() + 5000 * i, 5000, dst.mr.lkey}}), 0);
  Sge sg{src.addr(), 5000, src.mr.lkey};
  for (int i = 0; i < 3; ++i) ASSERT_EQ(post_send(a, qa, wr_of(WrOpcode::kSend, i, &sg)), 0);
  ASSERT_TRUE(f.run());
  auto rc = b.poll();
  ASSERT_EQ(rc.size(), 3u);  // one receive per message, the fourth still posted
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(rc[i].status, WcStatus::kSuccess);
    EXPECT_EQ(0, std::memcmp(dst.data() + 5000 * i, src.data(), 5000));
  }
  EXPECT_EQ(b.ctr().rx_duplicate, 15u);  // 3 messages x 5 packets
  EXPECT_EQ(a.poll().size(), 3u);
}

// Random loss, duplication, reordering, corruption and delay: everything arrives exactly.
struct FaultCase {
  uint64_t seed;
  uint8_t mtu;
  transport::Faults faults;
};

class Faulty : public ::testing::TestWithParam<FaultCase> {};

TEST_P(Faulty, go_back_n__all_operations_exact_under_faults) {
  Fabric f(GetParam().seed);
  Node& a = f.add_node(1);
  Node& b = f.add_node(2);
  Qp* qa = a.create_qp(1024);
  Qp* qb = b.create_qp(1024);
  Fabric::connect(a, qa, b, qb, {.mtu = GetParam().mtu, .timeout = 8, .max_rd_atomic = 4});
  f.wire().set_faults(GetParam().faults);
  const size_t kMsg = 9000;
  const int kRounds = 12;
  Buffer& src = a.reg(kMsg * kRounds);
  Buffer& rd = a.reg(kMsg * kRounds);
  Buffer& res = a.reg(8 * kRounds);
  Buffer& wdst = b.reg(kMsg * kRounds);
  Buffer& sdst = b.reg(kMsg * kRounds);
  Buffer& rsrc = b.reg(kMsg * kRounds);
  Buffer& counter = b.reg(8);
  fill_random(src.data(), src.bytes.size(), 10);
  fill_random(rsrc.data(), rsrc.bytes.size(), 11);
  for (int i = 0; i < kRounds; ++i)
    ASSERT_EQ(post_recv(b, qb, i, {{sdst.addr() + kMsg * i, static_cast<uint32_t>(kMsg), sdst.mr.lkey}}), 0);
  uint64_t id = 0;
  for (int i = 0; i < kRounds; ++i) {
    size_t len = kMsg - 97 * i;  // odd sizes
    Sge w{src.addr() + kMsg * i, static_cast<uint32_t>(len), src.mr.lkey};
    ASSERT_EQ(post_send(a, qa, wr_of(WrOpcode::kRdmaWrite, id++, &w, wdst.addr() + kMsg * i, wdst.mr.rkey)), 0);
    Sge s{src.addr() + kMsg * i, static_cast<uint32_t>(len), src.mr.lkey};
    ASSERT_EQ(post_send(a, qa, wr_of(WrOpcode::kSend, id++, &s)), 0);
    Sge r{rd.addr() + kMsg * i, static_cast<uint32_t>(len), rd.mr.lkey};
    ASSERT_EQ(post_send(a, qa, wr_of(WrOpcode::kRdmaRead, id++, &r, rsrc.addr() + kMsg * i, rsrc.mr.rkey)), 0);
    Sge x{res.addr() + 8 * i, 8, res.mr.lkey};
    SendWr faa = wr_of(WrOpcode::kAtomicFetchAdd, id++, &x, counter.addr(), counter.mr.rkey);
    faa.compare_add = 1000 + i;
    ASSERT_EQ(post_send(a, qa, faa), 0);
  }
  ASSERT_TRUE(f.run());
  auto sc = a.poll();
  ASSERT_EQ(sc.size(), id);
  for (size_t i = 0; i < sc.size(); ++i) {
    EXPECT_EQ(sc[i].wr_id, i);
    EXPECT_EQ(sc[i].status, WcStatus::kSuccess) << to_string(sc[i].status);
  }
  auto rc = b.poll();
  ASSERT_EQ(rc.size(), static_cast<size_t>(kRounds));
  uint64_t expect_sum = 0;
  std::vector<uint64_t> origs;
  for (int i = 0; i < kRounds; ++i) {
    size_t len = kMsg - 97 * i;
    EXPECT_EQ(0, std::memcmp(wdst.data() + kMsg * i, src.data() + kMsg * i, len)) << i;
    EXPECT_EQ(0, std::memcmp(sdst.data() + kMsg * i, src.data() + kMsg * i, len)) << i;
    EXPECT_EQ(rc[i].byte_len, len);
    EXPECT_EQ(0, std::memcmp(rd.data() + kMsg * i, rsrc.data() + kMsg * i, len)) << i;
    uint64_t o;
    std::memcpy(&o, res.data() + 8 * i, 8);
    EXPECT_EQ(o, expect_sum) << "FAA " << i << " saw a wrong original value";
    expect_sum += 1000 + i;
  }
  uint64_t total;
  std::memcpy(&total, counter.data(), 8);
  EXPECT_EQ(total, expect_sum);  // every atomic ran exactly once
  const auto& s = f.wire().stats();
  EXPECT_GT(s.lost, 0u);
  EXPECT_GT(a.ctr().retransmitted_packets, 0u);
  EXPECT_GT(a.ctr().rx_icrc_errors + b.ctr().rx_icrc_errors, 0u);
  EXPECT_GT(a.ctr().rx_duplicate + b.ctr().rx_duplicate, 0u);
}

std::vector<FaultCase> fault_cases() {
  std::vector<FaultCase> v;
  const transport::Faults kMixed{.loss = 0.05, .dup = 0.02, .reorder = 0.03, .corrupt = 0.01,
                                 .delay = 0.02, .delay_ns = 200'000};
  const transport::Faults kHeavy{.loss = 0.15, .dup = 0.05, .reorder = 0.1, .corrupt = 0.03,
                                 .delay = 0.05, .delay_ns = 3'000'000};
  for (uint64_t seed = 1; seed <= 8; ++seed) v.push_back({seed, 1, kMixed});
  for (uint64_t seed = 100; seed < 112; ++seed)
    v.push_back({seed, static_cast<uint8_t>(1 + seed % 5), kHeavy});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Seeds, Faulty, ::testing::ValuesIn(fault_cases()));

// Two requesters on two devices add to one word under loss and duplication: the total is
// exact and every original value returned is distinct (each add ran once, atomically).
TEST(Atomics, fetch_add__two_requesters_exact_total_under_faults) {
  Fabric f(99);
  Node& a = f.add_node(1);
  Node& b = f.add_node(2);
  Node& c = f.add_node(3);
  Qp* qa = a.create_qp(1024);
  Qp* qb1 = b.create_qp(1024);
  Qp* qc = c.create_qp(1024);
  Qp* qb2 = b.create_qp(1024);
  Fabric::connect(a, qa, b, qb1, {.timeout = 8, .max_rd_atomic = 8});
  Fabric::connect(c, qc, b, qb2, {.timeout = 8, .max_rd_atomic = 8});
  f.wire().set_faults({.loss = 0.1, .dup = 0.1, .reorder = 0.05});
  Buffer& word = b.reg(8);
  const int kEach = 300;
  Buffer& ra = a.reg(8 * kEach);
  Buffer& rc = c.reg(8 * kEach);
  for (int i = 0; i < kEach; ++i) {
    Sge sa{ra.addr() + 8 * i, 8, ra.mr.lkey};
    SendWr wa = wr_of(WrOpcode::kAtomicFetchAdd, i, &sa, word.addr(), word.mr.rkey);
    wa.compare_add = 1;
    ASSERT_EQ(post_send(a, qa, wa), 0);
    Sge sc{rc.addr() + 8 * i, 8, rc.mr.lkey};
    SendWr wc = wr_of(WrOpcode::kAtomicFetchAdd, i, &sc, word.addr(), word.mr.rkey);
    wc.compare_add = 1000000;
    ASSERT_EQ(post_send(c, qc, wc), 0);
  }
  ASSERT_TRUE(f.run());
  uint64_t total;
  std::memcpy(&total, word.data(), 8);
  EXPECT_EQ(total, uint64_t{kEach} * 1 + uint64_t{kEach} * 1000000);
  std::set<uint64_t> seen;
  for (int i = 0; i < kEach; ++i) {
    uint64_t x, y;
    std::memcpy(&x, ra.data() + 8 * i, 8);
    std::memcpy(&y, rc.data() + 8 * i, 8);
    seen.insert(x);
    seen.insert(y);
  }
  EXPECT_EQ(seen.size(), 2u * kEach);  // 600 distinct originals: no add ran twice
  EXPECT_GT(b.ctr().duplicate_atomics_replayed, 0u);
  for (auto* n : {&a, &c})
    for (auto& wc : n->poll()) EXPECT_EQ(wc.status, WcStatus::kSuccess);
}

// Long READs (several pieces each) under faults, with few and with many responder resources.
class LongReads : public ::testing::TestWithParam<std::tuple<uint64_t, int>> {};

// max_rd_atomic 1: one whole-window piece at a time; 2 and 16: pieces of half the window, two
// in flight (requester.h read_piece).
TEST_P(LongReads, go_back_n__pieces_with_one_two_or_sixteen_responder_resources) {
  Fabric f(std::get<0>(GetParam()));
  Node& a = f.add_node(1);
  Node& b = f.add_node(2);
  Qp* qa = a.create_qp(64);
  Qp* qb = b.create_qp(64);
  Fabric::connect(a, qa, b, qb, {.mtu = 5, .timeout = 10,
                                 .max_rd_atomic = static_cast<uint8_t>(std::get<1>(GetParam()))});
  f.wire().set_faults({.loss = 0.03, .dup = 0.03, .reorder = 0.05, .delay = 0.03,
                       .delay_ns = 5'000'000});
  const size_t kLen = 1 << 20;  // 256 responses: 4 pieces
  Buffer& local = a.reg(3 * kLen);
  Buffer& remote = b.reg(3 * kLen);
  fill_random(remote.data(), remote.bytes.size(), 21);
  for (int i = 0; i < 3; ++i) {
    Sge sg{local.addr() + kLen * i, static_cast<uint32_t>(kLen), local.mr.lkey};
    ASSERT_EQ(post_send(a, qa, wr_of(WrOpcode::kRdmaRead, i, &sg, remote.addr() + kLen * i,
                                     remote.mr.rkey)), 0);
  }
  ASSERT_TRUE(f.run());
  auto wcs = a.poll();
  ASSERT_EQ(wcs.size(), 3u);
  for (auto& wc : wcs) EXPECT_EQ(wc.status, WcStatus::kSuccess) << to_string(wc.status);
  EXPECT_EQ(local.bytes, remote.bytes);
}

INSTANTIATE_TEST_SUITE_P(Seeds, LongReads,
                         ::testing::Combine(::testing::Range<uint64_t>(1, 21),
                                            ::testing::Values(1, 2, 16)));

TEST_F(Rel, retry__peer_gone_gives_retry_exc_err_then_flush) {
  connect({.timeout = 12, .retry_cnt = 3});
  f.wire().set_faults({.loss = 1.0});
  Buffer& src = a.reg(64);
  Sge sg{src.addr(), 64, src.mr.lkey};
  uint64_t t0 = f.clock().now_ns();
  ASSERT_EQ(post_send(a, qa, wr_of(WrOpcode::kRdmaWrite, 1, &sg, 0x1000, 0x100)), 0);
  ASSERT_EQ(post_send(a, qa, wr_of(WrOpcode::kSend, 2, &sg)), 0);
  ASSERT_TRUE(f.run());
  auto wcs = a.poll();
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRetryExcErr);
  EXPECT_EQ(wcs[1].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(a.ctr().ack_timeouts, 4u);  // first try + 3 retries, each timed out
  uint64_t elapsed = f.clock().now_ns() - t0;
  EXPECT_EQ(elapsed, 4 * ack_timeout_ns(12));
  ASSERT_EQ(a.sink.async_events.size(), 1u);
  EXPECT_EQ(a.sink.async_events[0].type, AsyncEventType::kQpFatal);
  EXPECT_EQ(a.dev->next_timer_ns(), UINT64_MAX);
}

TEST_F(Rel, rnr__send_waits_for_a_receive_then_succeeds) {
  connect({.min_rnr_timer = 14});  // 1.28 ms
  Buffer& src = a.reg(3000);
  Buffer& dst = b.reg(3000);
  fill_random(src.data(), 3000, 5);
  Sge sg{src.addr(), 3000, src.mr.lkey};
  ASSERT_EQ(post_send(a, qa, wr_of(WrOpcode::kSend, 1, &sg)), 0);
  f.wire().deliver_all();
  EXPECT_EQ(b.ctr().tx_nak_rnr, 1u);
  EXPECT_EQ(a.ctr().rx_nak_rnr, 1u);
  EXPECT_EQ(a.dev->next_timer_ns(), f.clock().now_ns() + rnr_timer_ns(14));
  ASSERT_EQ(post_recv(b, qb, 7, {{dst.addr(), 3000, dst.mr.lkey}}), 0);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(src.bytes, dst.bytes);
  EXPECT_EQ(a.poll().at(0).status, WcStatus::kSuccess);
  EXPECT_EQ(b.poll().at(0).wr_id, 7u);
  EXPECT_EQ(a.ctr().rnr_retries, 1u);
  EXPECT_EQ(b.ctr().tx_nak_psn_seq, 0u);  // the rest of the window got no PSN NAK
}

TEST_F(Rel, rnr__retry_count_exhausted_gives_rnr_retry_exc_err) {
  connect({.rnr_retry = 2});
  Buffer& src = a.reg(100);
  Sge sg{src.addr(), 100, src.mr.lkey};
  ASSERT_EQ(post_send(a, qa, wr_of(WrOpcode::kSend, 1, &sg)), 0);
  ASSERT_TRUE(f.run());
  auto wcs = a.poll();
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRnrRetryExcErr);
  EXPECT_EQ(b.ctr().tx_nak_rnr, 3u);  // first try + 2 retries
  EXPECT_EQ(a.ctr().rnr_retries, 2u);
}

TEST_F(Rel, rnr__duplicated_rnr_naks_spend_one_retry_each_wait) {
  connect({.rnr_retry = 3});
  f.wire().set_faults({.dup = 1.0});  // every packet, RNR NAKs included, arrives twice
  Buffer& src = a.reg(100);
  Sge sg{src.addr(), 100, src.mr.lkey};
  ASSERT_EQ(post_send(a, qa, wr_of(WrOpcode::kSend, 1, &sg)), 0);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(a.poll().at(0).status, WcStatus::kRnrRetryExcErr);
  EXPECT_EQ(a.ctr().rnr_retries, 3u);
  EXPECT_EQ(b.ctr().rx_send, 2u * 4);  // 4 attempts (1 + 3 retries), each arriving twice
}

TEST_F(Rel, responder__out_of_sequence_packets_get_one_nak_per_gap) {
  connect();
  Buffer& src = a.reg(64 * 1024);
  Buffer& dst = b.reg(64 * 1024);
  fill_random(src.data(), src.bytes.size(), 6);
  int n = 0;
  f.wire().set_drop_filter([&](const WirePacket& p) {
    wire::Packet h = parse(p);
    // Lose the 3rd and the 30th data packet, each once.
    if (h.bth.opcode == wire::kRcWriteMiddle && (h.bth.psn == 102 || h.bth.psn == 129)) return n++ < 2;
    return false;
  });
  Sge sg{src.addr(), 64 * 1024, src.mr.lkey};
  ASSERT_EQ(post_send(a, qa, wr_of(WrOpcode::kRdmaWrite, 1, &sg, dst.addr(), dst.mr.rkey)), 0);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(src.bytes, dst.bytes);
  EXPECT_EQ(b.ctr().tx_nak_psn_seq, 1u);  // 129's first copy was behind the first gap
  EXPECT_EQ(a.poll().at(0).status, WcStatus::kSuccess);
}

}  // namespace
}  // namespace vrnic::engine::testing
