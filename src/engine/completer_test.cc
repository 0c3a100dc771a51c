// The completer fed hand-built ACKs / NAKs: past, expected and future PSNs, NAKs, timers.
#include "engine/completer.h"

#include <gtest/gtest.h>

#include <vector>

#include "engine/requester.h"
#include "engine/test_fabric.h"
#include "wire/icrc.h"
#include "wire/opcode.h"

namespace vrnic::engine::testing {
namespace {

constexpr uint8_t kAck = 0x1f;            // AETH ACK, credit field "invalid"
constexpr uint8_t kNakPsnSeq = wire::aeth_nak(wire::kNakPsnSeq);
constexpr uint8_t kNakRemAccess = wire::aeth_nak(wire::kNakRemAccess);
constexpr uint8_t kRnrNak = wire::aeth_rnr_nak(1);  // the shortest timer but one

// a's requester against a responder that is never reached: every packet a sends is recorded
// and dropped, and the test answers with ACKs it builds itself.
struct Completer : ::testing::Test {
  Fabric f;
  Node& a = f.add_node(1);
  Node& b = f.add_node(2);
  Qp* qa = nullptr;
  Qp* qb = nullptr;
  Buffer* src = nullptr;
  std::vector<uint32_t> sent_psns;  // PSN of every packet a sent, in order

  void SetUp() override {
    qa = a.create_qp();
    qb = b.create_qp();
    Fabric::connect(a, qa, b, qb);  // a's first PSN 100, MTU 1024
    src = &a.reg(64 * 1024);
    f.wire().set_drop_filter([this](const WirePacket& p) {
      wire::Packet h;
      if (p.ip.src[3] == 1 && wire::parse_packet(p.data, h) == wire::ParseError::kOk)
        sent_psns.push_back(h.bth.psn);
      return true;
    });
  }
  // A WRITE of `packets` MTU-sized packets to b.
  void write(uint64_t id, uint32_t packets) {
    Sge sge{src->addr(), packets * 1024, src->mr.lkey};
    ASSERT_EQ(post_send(a, qa, wr_of(WrOpcode::kRdmaWrite, id, &sge, 0x1000, 0x99)), 0);
  }
  // Delivers to a an ACK (or NAK) from b for `psn`.
  void answer(uint32_t psn, uint8_t syndrome) {
    wire::Packet p;
    p.bth.opcode = wire::kRcAck;
    p.bth.dest_qp = a.dev->qp_num(qa);
    p.bth.psn = psn;
    p.aeth.syndrome = syndrome;
    p.aeth.msn = 1;
    std::vector<uint8_t> bytes(wire::header_size(p.bth.opcode) + wire::kIcrcSize);
    const size_t n = wire::write_headers(p, bytes.data());
    WirePacket pkt;
    pkt.ip.src = {10, 0, 0, 2};
    pkt.ip.dst = {10, 0, 0, 1};
    pkt.ip.src_port = 0xc000;
    pkt.ip.ip_id_known = true;
    wire::store_icrc(wire::compute_icrc(pkt.ip, {bytes.data(), n}), bytes.data() + n);
    pkt.data = bytes;
    a.dev->receive({&pkt, 1});
  }
};

TEST_F(Completer, completer_receive__ack_of_the_last_psn_retires_the_wqe) {
  write(1, 3);  // PSNs 100..102
  answer(102, kAck);
  auto wcs = a.poll();
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(a.ctr().rx_ack, 1u);
}

TEST_F(Completer, completer_receive__partial_ack_completes_nothing_yet) {
  write(1, 3);
  answer(100, kAck);  // the first packet only
  EXPECT_TRUE(a.poll().empty());
  answer(102, kAck);
  EXPECT_EQ(a.poll().size(), 1u);
}

TEST_F(Completer, completer_receive__ack_covering_two_messages_retires_both_in_order) {
  write(1, 2);  // 100..101
  write(2, 1);  // 102
  answer(102, kAck);  // coalesced: one ACK for both
  auto wcs = a.poll();
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_EQ(wcs[1].wr_id, 2u);
}

TEST_F(Completer, completer_receive__past_psn_is_a_duplicate) {
  write(1, 3);
  answer(102, kAck);
  ASSERT_EQ(a.poll().size(), 1u);
  write(2, 1);     // PSN 103
  answer(101, kAck);  // older than una - 1: a late copy
  EXPECT_TRUE(a.poll().empty());
  EXPECT_EQ(a.ctr().rx_duplicate, 1u);
  EXPECT_EQ(a.ctr().rx_ack, 1u);
}

TEST_F(Completer, completer_receive__future_psn_is_ignored) {
  write(1, 3);
  answer(103, kAck);  // nothing was sent at 103: acknowledges nothing
  answer(0x800100, kAck);
  EXPECT_TRUE(a.poll().empty());
  EXPECT_EQ(a.ctr().rx_duplicate, 2u);
  answer(102, kAck);
  EXPECT_EQ(a.poll().size(), 1u);
}

TEST_F(Completer, completer_receive__psn_sequence_nak_resends_from_that_psn) {
  write(1, 4);  // 100..103
  ASSERT_EQ(sent_psns.size(), 4u);
  answer(102, kNakPsnSeq);  // 100, 101 arrived; the responder expects 102
  EXPECT_EQ(a.ctr().rx_nak_psn_seq, 1u);
  ASSERT_EQ(sent_psns.size(), 6u);
  EXPECT_EQ(sent_psns[4], 102u);
  EXPECT_EQ(sent_psns[5], 103u);
  EXPECT_EQ(a.ctr().retransmitted_packets, 2u);
  answer(102, kNakPsnSeq);  // a copy of the same NAK: no second resend
  EXPECT_EQ(sent_psns.size(), 6u);
  answer(103, kAck);
  EXPECT_EQ(a.poll().size(), 1u);
}

TEST_F(Completer, completer_receive__rnr_nak_waits_for_the_timer_then_resends) {
  write(1, 1);
  answer(100, kRnrNak);
  EXPECT_EQ(a.ctr().rx_nak_rnr, 1u);
  EXPECT_EQ(sent_psns.size(), 1u);  // nothing before the RNR timer
  const uint64_t due = a.dev->next_timer_ns();
  ASSERT_LE(due - f.clock().now_ns(), rnr_timer_ns(1));
  f.clock().advance_to(due);
  a.dev->on_timer();
  ASSERT_EQ(sent_psns.size(), 2u);
  EXPECT_EQ(sent_psns[1], 100u);
}

TEST_F(Completer, completer_receive__remote_access_nak_fails_the_wqe_and_the_qp) {
  write(1, 1);
  write(2, 1);
  answer(100, kNakRemAccess);
  auto wcs = a.poll();
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRemAccessErr);
  EXPECT_EQ(wcs[1].status, WcStatus::kWrFlushErr);
  QpAttr attr;
  QpInitAttr init;
  ASSERT_EQ(a.dev->query_qp(qa, attr, init), 0);
  EXPECT_EQ(attr.qp_state, QpState::kErr);
}

TEST_F(Completer, completer_on_timer__ack_timeout_resends_from_una) {
  write(1, 2);
  answer(100, kAck);  // una = 101; the ACK restarts the timer
  // The device's timer hint may first be the deadline the ACK replaced: a wake-up early.
  for (int i = 0; i < 3 && a.ctr().ack_timeouts == 0; ++i) {
    const uint64_t due = a.dev->next_timer_ns();
    ASSERT_NE(due, UINT64_MAX);
    f.clock().advance_to(due);
    a.dev->on_timer();
  }
  EXPECT_EQ(a.ctr().ack_timeouts, 1u);
  ASSERT_EQ(sent_psns.size(), 3u);
  EXPECT_EQ(sent_psns[2], 101u);
}

}  // namespace
}  // namespace vrnic::engine::testing
