// Tests of ACKs held for the program's answer (Device::receive with hold_acks_ns): what is
// held, what lets it go and in which order, the deadline and its bound, over the loop wire.
#include <gtest/gtest.h>

#include <string>

#include "engine/test_fabric.h"

namespace vrnic::engine::testing {
namespace {

constexpr uint64_t kHoldNs = 250'000;

struct AckHold : ::testing::Test {
  Fabric f;
  Node& a = f.add_node(1);
  Node& b = f.add_node(2);
  Qp* qa = nullptr;
  Qp* qb = nullptr;
  uint64_t b_hold_ns = kHoldNs;    // what b's receives pass as hold_acks_ns
  uint64_t b_crossed_ns = UINT64_MAX;  // and as crossed_hold_ns
  bool drop_a_acks = false;        // a's ACKs are lost on the wire
  bool drop_b_acks = false;        // and b's
  Device::ReceiveResult last_b{};  // what b's last receive returned
  std::string sent;                // every packet sent, as "a:request b:ack ..."
  Buffer* a_buf = nullptr;
  Buffer* b_buf = nullptr;

  void SetUp() override {
    f.wire().set_drop_filter([this](const WirePacket& p) {
      sent += (p.ip.src[3] == 1 ? "a:" : "b:") + std::string(wire::to_string(p.kind)) + " ";
      return p.kind == wire::PacketKind::kAck && (p.ip.src[3] == 1 ? drop_a_acks : drop_b_acks);
    });
    b.port->set_receiver([this](std::span<const WirePacket> batch) {
      last_b = b.dev->receive(batch, b_hold_ns, b_crossed_ns);
    });
  }
  void connect(uint8_t timeout = 14) {
    qa = a.create_qp();
    qb = b.create_qp();
    ConnectOptions o;
    o.timeout = timeout;
    Fabric::connect(a, qa, b, qb, o);
    a_buf = &a.reg(4096);
    b_buf = &b.reg(4096);
  }
  // a SENDs 8 bytes to b, and b's receive takes them (b posts the receive first).
  void a_sends_to_b(uint64_t id) {
    ASSERT_EQ(post_recv(b, qb, id, {{b_buf->addr(), 64, b_buf->mr.lkey}}), 0);
    Sge sg{a_buf->addr(), 8, a_buf->mr.lkey};
    ASSERT_EQ(post_send(a, qa, wr_of(WrOpcode::kSend, id, &sg)), 0);
    f.wire().deliver_all();
  }
  // a WRITEs 8 bytes into b's buffer (b's program is told of nothing).
  void a_writes_to_b(uint64_t id) {
    Sge sg{a_buf->addr(), 8, a_buf->mr.lkey};
    ASSERT_EQ(post_send(a, qa, wr_of(WrOpcode::kRdmaWrite, id, &sg, b_buf->addr() + 512,
                                     b_buf->mr.rkey)), 0);
    f.wire().deliver_all();
  }
  // a's WRITE is held by b until its deadline runs out unanswered.
  void write_hold_runs_out() {
    const uint64_t t0 = f.clock().now_ns();
    a_writes_to_b(1);
    ASSERT_TRUE(last_b.acks_held);
    f.clock().advance_to(t0 + kHoldNs);
    b.dev->on_timer();
    ASSERT_EQ(b.dev->held_acks_deadline(), UINT64_MAX);
    f.wire().deliver_all();
    ASSERT_EQ(a.poll().size(), 1u);
    sent.clear();
  }
  // a WRITEs to b (not held: the QP stopped holding WRITEs), and b's program WRITEs back
  // `after` ns later, as ib_write_lat's does when it sees the bytes.
  void b_writes_back_after(uint64_t after) {
    a_writes_to_b(2);
    f.clock().advance(after);
    Sge sg{b_buf->addr() + 1024, 8, b_buf->mr.lkey};
    ASSERT_EQ(post_send(b, qb, wr_of(WrOpcode::kRdmaWrite, 9, &sg, a_buf->addr() + 2048,
                                     a_buf->mr.rkey)), 0);
    ASSERT_TRUE(f.run());
    sent.clear();
  }
  void b_answers(uint64_t id) {
    ASSERT_EQ(post_recv(a, qa, id, {{a_buf->addr() + 1024, 64, a_buf->mr.lkey}}), 0);
    Sge sg{b_buf->addr() + 1024, 8, b_buf->mr.lkey};
    ASSERT_EQ(post_send(b, qb, wr_of(WrOpcode::kSend, id, &sg)), 0);
  }
};

TEST_F(AckHold, receive__holding_receive_keeps_its_ack_until_the_answer_which_goes_first) {
  connect();
  const uint64_t t0 = f.clock().now_ns();
  a_sends_to_b(1);
  EXPECT_EQ(sent, "a:request ");  // b's ACK waits
  EXPECT_TRUE(last_b.acks_held);
  EXPECT_EQ(last_b.sent, 0u);
  EXPECT_EQ(b.dev->held_acks_deadline(), t0 + kHoldNs);
  EXPECT_LE(b.dev->next_timer_ns(), t0 + kHoldNs);  // the runtime wakes for it
  EXPECT_TRUE(a.poll().empty());  // a's SEND is not acknowledged yet
  sent.clear();
  b_answers(2);  // one engine call: the answer, then the ACK behind it
  EXPECT_EQ(sent, "b:request b:ack ");
  EXPECT_EQ(b.dev->held_acks_deadline(), UINT64_MAX);
  ASSERT_TRUE(f.run());
  auto wc = a.poll();
  ASSERT_EQ(wc.size(), 2u);  // the SEND's completion and the answer's receive
  for (const WorkCompletion& w : wc) EXPECT_EQ(w.status, WcStatus::kSuccess);
}

TEST_F(AckHold, on_timer__an_unanswered_hold_leaves_at_its_deadline) {
  connect();
  const uint64_t t0 = f.clock().now_ns();
  a_sends_to_b(1);
  sent.clear();
  f.clock().advance_to(t0 + kHoldNs - 1);
  b.dev->on_timer();
  EXPECT_EQ(sent, "");  // not yet
  f.clock().advance_to(t0 + kHoldNs);
  b.dev->on_timer();
  EXPECT_EQ(sent, "b:ack ");
  EXPECT_EQ(b.dev->held_acks_deadline(), UINT64_MAX);
  f.wire().deliver_all();
  ASSERT_EQ(a.poll().size(), 1u);
}

TEST_F(AckHold, receive__a_call_that_makes_acks_without_holding_lets_the_held_ones_go) {
  connect();
  a_sends_to_b(1);
  EXPECT_TRUE(last_b.acks_held);
  sent.clear();
  b_hold_ns = 0;  // the next receive does not hold (the program stopped answering)
  a_sends_to_b(2);
  EXPECT_EQ(sent, "a:request b:ack ");  // one cumulative ACK for both
  EXPECT_FALSE(last_b.acks_held);
  EXPECT_EQ(last_b.sent, 1u);
  f.wire().deliver_all();
  EXPECT_EQ(a.poll().size(), 2u);
}

TEST_F(AckHold, receive__further_holding_receives_coalesce_into_one_held_ack) {
  connect();
  const uint64_t t0 = f.clock().now_ns();
  a_sends_to_b(1);
  f.clock().advance(1000);
  a_sends_to_b(2);
  EXPECT_EQ(sent, "a:request a:request ");
  EXPECT_EQ(b.dev->held_acks_deadline(), t0 + kHoldNs);  // the first hold's deadline stands
  sent.clear();
  b.dev->release_acks();
  EXPECT_EQ(sent, "b:ack ");
  f.wire().deliver_all();
  EXPECT_EQ(a.poll().size(), 2u);
}

TEST_F(AckHold, receive__a_batch_that_makes_a_response_holds_nothing) {
  connect();
  Sge sg{a_buf->addr(), 8, a_buf->mr.lkey};
  ASSERT_EQ(post_send(a, qa, wr_of(WrOpcode::kRdmaRead, 1, &sg, b_buf->addr(), b_buf->mr.rkey)), 0);
  f.wire().deliver_all();
  EXPECT_FALSE(last_b.acks_held);
  EXPECT_EQ(last_b.sent, 1u);
  EXPECT_EQ(sent, "a:request b:response ");
}

TEST_F(AckHold, receive__the_hold_never_exceeds_half_the_ack_timeout) {
  connect(/*timeout=*/1);  // 8.192 us
  const uint64_t t0 = f.clock().now_ns();
  a_sends_to_b(1);
  ASSERT_TRUE(last_b.acks_held);
  EXPECT_EQ(b.dev->held_acks_deadline(), t0 + 4096);
}

// Both sides send at once (a collective's exchange): b's own SEND still awaits a's ACK when
// a's SEND comes. a may be holding that ACK for its answer as b holds its own, so b's hold is
// bounded by crossed_hold_ns; once nothing of b's awaits an ACK, the full hold again.
TEST_F(AckHold, receive__crossed_holds_are_bounded_by_crossed_hold_ns) {
  connect();
  b_crossed_ns = 20'000;
  drop_a_acks = true;
  ASSERT_EQ(post_recv(a, qa, 7, {{a_buf->addr() + 2048, 64, a_buf->mr.lkey}}), 0);
  Sge sg{b_buf->addr() + 2048, 8, b_buf->mr.lkey};
  ASSERT_EQ(post_send(b, qb, wr_of(WrOpcode::kSend, 7, &sg)), 0);
  f.wire().deliver_all();  // b's SEND lands; a's ACK of it is lost
  const uint64_t t0 = f.clock().now_ns();
  a_sends_to_b(1);
  ASSERT_TRUE(last_b.acks_held);
  EXPECT_EQ(b.dev->held_acks_deadline(), t0 + 20'000);
  f.clock().advance_to(t0 + 20'000);
  b.dev->on_timer();  // b's ACK leaves after 20 us, not 250
  EXPECT_EQ(b.dev->held_acks_deadline(), UINT64_MAX);
  drop_a_acks = false;
  f.clock().advance_to(t0 + 20'000 + ack_timeout_ns(14));  // b resends; a ACKs it now
  b.dev->on_timer();
  f.wire().deliver_all();
  EXPECT_EQ(b.poll().size(), 2u);  // b's SEND completed, a's SEND received
  const uint64_t t1 = f.clock().now_ns();
  a_sends_to_b(2);  // nothing of b's awaits an ACK: the full hold
  ASSERT_TRUE(last_b.acks_held);
  EXPECT_EQ(b.dev->held_acks_deadline(), t1 + kHoldNs);
}

// A one-sided put and a flush (UCX's put_zcopy rendezvous, MPI_Put + MPI_Win_flush): the
// target's program is told of no WRITE and never answers one; its peer waits for the ACK.
TEST_F(AckHold, on_timer__a_write_hold_run_out_unanswered_holds_that_qps_writes_no_more) {
  connect();
  write_hold_runs_out();
  EXPECT_EQ(b.ctr().ack_holds_expired, 1u);
  a_writes_to_b(2);
  EXPECT_EQ(sent, "a:request b:ack ");  // at once, as if nothing were held
  EXPECT_FALSE(last_b.acks_held);
  EXPECT_EQ(b.ctr().ack_holds_expired, 1u);
  f.wire().deliver_all();
  EXPECT_EQ(a.poll().size(), 1u);
  sent.clear();
  const uint64_t t0 = f.clock().now_ns();
  a_sends_to_b(3);  // a SEND is a message the program is told of: still held
  EXPECT_EQ(sent, "a:request ");
  EXPECT_EQ(b.dev->held_acks_deadline(), t0 + kHoldNs);
}

// The runtime may find the deadline passed first (at the end of a call) and release them.
TEST_F(AckHold, release_acks__past_the_deadline_counts_as_a_hold_run_out) {
  connect();
  const uint64_t t0 = f.clock().now_ns();
  a_writes_to_b(1);
  f.clock().advance_to(t0 + kHoldNs);
  b.dev->release_acks();
  f.wire().deliver_all();
  ASSERT_EQ(a.poll().size(), 1u);
  sent.clear();
  a_writes_to_b(2);
  EXPECT_EQ(sent, "a:request b:ack ");
}

// ib_write_lat: the program polls memory and answers each WRITE with its own.
TEST_F(AckHold, post_send__a_program_that_answers_a_write_has_its_writes_held_again) {
  connect();
  write_hold_runs_out();
  b_writes_back_after(kHoldNs - 1);  // b's program sees the bytes and answers in the hold
  a_writes_to_b(3);
  EXPECT_EQ(sent, "a:request ");  // held again
  EXPECT_TRUE(last_b.acks_held);
}

TEST_F(AckHold, post_send__an_answer_later_than_the_hold_does_not_hold_writes_again) {
  connect();
  write_hold_runs_out();
  b_writes_back_after(kHoldNs);  // when the hold would have run out
  a_writes_to_b(3);
  EXPECT_EQ(sent, "a:request b:ack ");
}

// Held WRITE and SEND ACKs of one QP coalesce; the hold that runs out covered a message the
// program was told of, so WRITEs are still held afterwards.
TEST_F(AckHold, on_timer__a_hold_that_covered_a_send_leaves_writes_held) {
  connect();
  const uint64_t t0 = f.clock().now_ns();
  a_writes_to_b(1);
  a_sends_to_b(2);
  EXPECT_EQ(sent, "a:request a:request ");
  f.clock().advance_to(t0 + kHoldNs);
  b.dev->on_timer();
  EXPECT_EQ(sent, "a:request a:request b:ack ");
  f.wire().deliver_all();
  EXPECT_EQ(a.poll().size(), 2u);
  sent.clear();
  a_writes_to_b(3);
  EXPECT_EQ(sent, "a:request ");
  EXPECT_TRUE(last_b.acks_held);
}

// Both sides WRITE at once and wait for their ACKs (MPI_Put + MPI_Win_flush on both ranks):
// a WRITE that finds b's own WRITE unacknowledged is acknowledged at once, a SEND in its
// place gets the crossed hold.
TEST_F(AckHold, receive__a_crossed_write_is_acknowledged_at_once) {
  connect();
  b_crossed_ns = 20'000;
  drop_a_acks = true;
  Sge sg{b_buf->addr() + 2048, 8, b_buf->mr.lkey};
  ASSERT_EQ(post_send(b, qb, wr_of(WrOpcode::kRdmaWrite, 7, &sg, a_buf->addr() + 2048,
                                   a_buf->mr.rkey)), 0);
  f.wire().deliver_all();  // b's WRITE lands; a's ACK of it is lost
  drop_a_acks = false;
  sent.clear();
  a_writes_to_b(1);
  EXPECT_EQ(sent, "a:request b:ack ");
  EXPECT_FALSE(last_b.acks_held);
  sent.clear();
  const uint64_t t0 = f.clock().now_ns();
  a_sends_to_b(2);
  EXPECT_EQ(sent, "a:request ");
  EXPECT_EQ(b.dev->held_acks_deadline(), t0 + 20'000);
}

// b's ACK is lost; a resends at its ACK timeout, and b acknowledges the duplicate at once,
// though b's program answers what it receives.
TEST_F(AckHold, receive__a_duplicates_ack_is_never_held) {
  connect();
  drop_b_acks = true;
  a_sends_to_b(1);
  ASSERT_TRUE(last_b.acks_held);
  b.dev->release_acks();  // the answer's moment: the ACK leaves, and is lost
  drop_b_acks = false;
  ASSERT_EQ(b.poll().size(), 1u);
  sent.clear();
  f.clock().advance(ack_timeout_ns(14));
  a.dev->on_timer();
  f.wire().deliver_all();
  EXPECT_EQ(sent, "a:request b:ack ");
  EXPECT_FALSE(last_b.acks_held);
  EXPECT_EQ(b.ctr().rx_duplicate, 1u);
  f.wire().deliver_all();
  auto wc = a.poll();
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(b.poll().size(), 0u);  // placed once
}

TEST_F(AckHold, receive__without_hold_acks_leave_at_the_end_of_the_batch) {
  connect();
  b_hold_ns = 0;
  a_sends_to_b(1);
  EXPECT_EQ(sent, "a:request b:ack ");
  EXPECT_FALSE(last_b.acks_held);
  EXPECT_EQ(b.dev->held_acks_deadline(), UINT64_MAX);
}

TEST_F(AckHold, poll_cq__a_call_that_sends_nothing_leaves_the_hold_in_place) {
  connect();
  a_sends_to_b(1);
  sent.clear();
  EXPECT_EQ(b.poll().size(), 1u);  // the receive's completion; no packet
  EXPECT_EQ(sent, "");
  EXPECT_NE(b.dev->held_acks_deadline(), UINT64_MAX);
}

TEST_F(AckHold, destroy_qp__a_held_ack_leaves_before_its_qp_goes) {
  connect();
  a_sends_to_b(1);
  sent.clear();
  ASSERT_EQ(b.dev->destroy_qp(qb), 0);  // ibv_rc_pingpong's last message: then it exits
  EXPECT_EQ(sent, "b:ack ");
  f.wire().deliver_all();
  auto wc = a.poll();
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
}

TEST_F(AckHold, modify_qp__a_held_ack_leaves_before_its_qp_changes_state) {
  connect();
  a_sends_to_b(1);
  sent.clear();
  QpAttr attr;
  attr.qp_state = QpState::kErr;
  ASSERT_EQ(b.dev->modify_qp(qb, attr, kAttrState), 0);
  EXPECT_EQ(sent, "b:ack ");
  f.wire().deliver_all();
  auto wc = a.poll();
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
}

}  // namespace
}  // namespace vrnic::engine::testing
