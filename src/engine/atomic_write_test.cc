// ATOMIC WRITE (IBA 1.5 Annex A19) between two engines over the loop wire: the 8 bytes land
// once, the request and its zero-length READ response are as the annex and rxe shape them,
// a lost response is recovered without writing twice, and the requester counts it against
// its RDMA READ / atomic limit. Also a WRITE between engines with the ICRC off
// (DeviceConfig::icrc, the simulator's NICs).
#include <gtest/gtest.h>

#include "engine/test_ud.h"
#include "wire/headers.h"
#include "wire/icrc.h"
#include "wire/opcode.h"

namespace vrnic::engine::testing {
namespace {

struct AtomicWrite : ::testing::Test {
  Fabric f;
  Node& a = f.add_node(1);
  Node& b = f.add_node(2);
  Qp* qa = a.create_qp();
  Qp* qb = b.create_qp();
  Buffer& dst = b.reg(4096);
  struct Seen {
    wire::Packet p;
    std::vector<uint8_t> bytes;
    bool icrc_ok;
  };
  std::vector<Seen> seen;

  void SetUp() override {
    Fabric::connect(a, qa, b, qb);
    fill_random(dst.data(), dst.bytes.size(), 5);
    f.wire().set_tap([this](const WirePacket& w) {
      Seen s{{}, {w.data.begin(), w.data.end()},
             wire::verify_icrc(w.ip, w.data) == wire::IcrcVerdict::kOk};
      ASSERT_EQ(wire::parse_packet(s.bytes, s.p), wire::ParseError::kOk);
      seen.push_back(std::move(s));
    });
  }
  SendWr atomic_write(uint64_t id, uint64_t off, uint64_t value) {
    SendWr wr;
    wr.wr_id = id;
    wr.opcode = WrOpcode::kAtomicWrite;
    wr.send_flags = kSendSignaled;
    wr.remote_addr = dst.addr() + off;
    wr.rkey = dst.mr.rkey;
    wr.compare_add = value;
    return wr;
  }
  uint64_t word(uint64_t off) {
    uint64_t v;
    std::memcpy(&v, dst.data() + off, 8);
    return v;
  }
};

TEST_F(AtomicWrite, post_send__eight_bytes_land_and_complete_as_atomic_write) {
  const std::vector<uint8_t> before = dst.bytes;
  ASSERT_EQ(post_send(a, qa, atomic_write(9, 64, 0x1122334455667788ull)), 0);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(word(64), 0x1122334455667788ull);
  EXPECT_TRUE(std::equal(before.begin(), before.begin() + 64, dst.bytes.begin()));
  EXPECT_TRUE(std::equal(before.begin() + 72, before.end(), dst.bytes.begin() + 72));
  auto wc = a.poll();
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wc[0].opcode, WcOpcode::kAtomicWrite);
  EXPECT_EQ(wc[0].wr_id, 9u);
  EXPECT_EQ(wc[0].byte_len, 8u);
  EXPECT_TRUE(b.poll().empty());  // no receive consumed, no CQE at the responder
  EXPECT_EQ(a.ctr().tx_atomic, 1u);
  EXPECT_EQ(b.ctr().rx_atomic, 1u);
}

// The request: BTH (0x1d, AckReq) + RETH (va, rkey, length 8) + the 8 bytes as they were in
// the WR's memory; the answer: RDMA READ Response Only (0x10) at the same PSN with an ACK
// AETH and no payload (A19.4.2; rxe's send_read_response_ack). Both with a valid ICRC.
TEST_F(AtomicWrite, post_send__request_and_response_on_the_wire) {
  uint64_t value;
  const uint8_t bytes[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  std::memcpy(&value, bytes, 8);
  ASSERT_EQ(post_send(a, qa, atomic_write(1, 128, value)), 0);
  ASSERT_TRUE(f.run());
  ASSERT_EQ(seen.size(), 2u);
  const Seen& rq = seen[0];
  EXPECT_EQ(rq.p.bth.opcode, 0x1d);
  EXPECT_TRUE(rq.p.bth.ack_req);
  EXPECT_EQ(rq.p.bth.psn, 100u);
  EXPECT_EQ(rq.p.bth.dest_qp, b.dev->qp_num(qb));
  EXPECT_EQ(rq.p.reth.va, dst.addr() + 128);
  EXPECT_EQ(rq.p.reth.rkey, dst.mr.rkey);
  EXPECT_EQ(rq.p.reth.dma_len, 8u);
  ASSERT_EQ(rq.p.payload.size(), 8u);
  EXPECT_EQ(std::memcmp(rq.p.payload.data(), bytes, 8), 0);
  EXPECT_EQ(rq.bytes.size(), 12u + 16 + 8 + 4);
  EXPECT_TRUE(rq.icrc_ok);
  const Seen& rs = seen[1];
  EXPECT_EQ(rs.p.bth.opcode, wire::kRcReadResponseOnly);
  EXPECT_EQ(rs.p.bth.psn, 100u);
  EXPECT_EQ(rs.p.bth.dest_qp, a.dev->qp_num(qa));
  EXPECT_EQ(rs.p.aeth.syndrome, 0x1f);
  EXPECT_EQ(rs.p.aeth.msn, 1u);
  EXPECT_TRUE(rs.p.payload.empty());
  EXPECT_EQ(rs.bytes.size(), 12u + 4 + 4);
  EXPECT_TRUE(rs.icrc_ok);
  EXPECT_EQ(std::memcmp(dst.data() + 128, bytes, 8), 0);
}

// The response is lost: the requester's ACK timer resends the request, the responder finds
// it in its ACK queue and answers again without writing (the word changed since keeps).
TEST_F(AtomicWrite, post_send__lost_response_is_replayed_not_written_again) {
  int dropped = 0;
  f.wire().set_drop_filter([&](const WirePacket& w) {
    return w.data[0] == wire::kRcReadResponseOnly && dropped++ == 0;
  });
  ASSERT_EQ(post_send(a, qa, atomic_write(3, 0, 0xaaaa)), 0);
  while (f.wire().deliver_all() > 0) {}
  ASSERT_EQ(word(0), 0xaaaau);
  std::memcpy(dst.data(), "\x55\x55\x55\x55\x55\x55\x55\x55", 8);  // the host wrote since
  ASSERT_TRUE(f.run());
  EXPECT_EQ(word(0), 0x5555555555555555ull);
  auto wc = a.poll();
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(a.ctr().ack_timeouts, 1u);
  EXPECT_EQ(b.ctr().duplicate_atomics_replayed, 1u);
}

// An ATOMIC WRITE takes a responder resource: with max_rd_atomic 1 the second waits until
// the first is answered (rxe counts it with READs and atomics): the second request leaves
// after the first response, not beside the first request.
TEST_F(AtomicWrite, post_send__counts_against_the_rd_atomic_limit) {
  Qp* qa1 = a.create_qp();
  Qp* qb1 = b.create_qp();
  ConnectOptions o;
  o.max_rd_atomic = 1;
  Fabric::connect(a, qa1, b, qb1, o);
  seen.clear();
  ASSERT_EQ(post_send(a, qa1, atomic_write(1, 0, 1)), 0);
  ASSERT_EQ(post_send(a, qa1, atomic_write(2, 8, 2)), 0);
  ASSERT_TRUE(f.run());
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0].p.bth.opcode, 0x1d);
  EXPECT_EQ(seen[1].p.bth.opcode, wire::kRcReadResponseOnly);
  EXPECT_EQ(seen[2].p.bth.opcode, 0x1d);
  EXPECT_EQ(word(0), 1u);
  EXPECT_EQ(word(8), 2u);
  EXPECT_EQ(a.poll().size(), 2u);
}

// Refused at post: not on UC (nor UD), not inline (the 8 bytes come with the WR).
TEST_F(AtomicWrite, post_send__uc_and_inline_are_einval) {
  Qp* uc = make_qp(a, QpType::kUc);
  Qp* ucb = make_qp(b, QpType::kUc);
  uc_up(a, uc, b.gid, b.dev->qp_num(ucb), 1, 2);
  uc_up(b, ucb, a.gid, a.dev->qp_num(uc), 2, 1);
  SendWr ok = atomic_write(0, 0, 1);
  ok.opcode = WrOpcode::kRdmaWrite;  // the UC QP posts: only the opcode is refused
  Sge sg{0, 0, 0};
  ok.sg_list = &sg;
  EXPECT_EQ(post_send(a, uc, ok), 0);
  EXPECT_EQ(post_send(a, uc, atomic_write(1, 0, 1)), EINVAL);
  SendWr wr = atomic_write(2, 0, 1);
  wr.send_flags |= kSendInline;
  EXPECT_EQ(post_send(a, qa, wr), EINVAL);
  ASSERT_TRUE(f.run());
  auto wc = a.poll();
  ASSERT_EQ(wc.size(), 1u);  // the UC WRITE only
  EXPECT_EQ(wc[0].opcode, WcOpcode::kRdmaWrite);
}

// DeviceConfig::icrc false on both ends (the simulator's NICs): packets leave with a zero ICRC,
// are taken without a check, and the data lands as with the check.
TEST(IcrcOff, write__lands_with_a_zero_icrc_on_the_wire) {
  Fabric f;
  const auto off = [](DeviceConfig& c) { c.icrc = false; };
  Node& a = f.add_node(1, off);
  Node& b = f.add_node(2, off);
  Qp* qa = a.create_qp();
  Qp* qb = b.create_qp();
  Buffer& src = a.reg(4096);
  Buffer& dst = b.reg(4096);
  Fabric::connect(a, qa, b, qb);
  fill_random(src.data(), src.bytes.size(), 7);
  std::vector<uint32_t> icrcs;
  f.wire().set_tap([&](const WirePacket& w) { icrcs.push_back(wire::stored_icrc(w.data)); });
  SendWr wr;
  wr.wr_id = 1;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.send_flags = kSendSignaled;
  Sge sge{src.addr(), 4096, src.mr.lkey};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.remote_addr = dst.addr();
  wr.rkey = dst.mr.rkey;
  ASSERT_EQ(post_send(a, qa, wr), 0);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(dst.bytes, src.bytes);
  ASSERT_FALSE(icrcs.empty());
  for (uint32_t v : icrcs) EXPECT_EQ(v, 0u);
  EXPECT_EQ(b.ctr().rx_icrc_errors, 0u);
}

}  // namespace
}  // namespace vrnic::engine::testing
