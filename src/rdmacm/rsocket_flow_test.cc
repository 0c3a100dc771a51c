// Tests of a stream rsocket's flow control: what it writes where, with which immediate, as a
// peer running rdma-core v44's rsocket.c expects it (windows, credits, credit updates).
#include "rdmacm/rsocket_flow.h"

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

namespace vrnic::rdmacm::rs {
namespace {

constexpr uint64_t kRbuf = 0x100000;
constexpr uint64_t kTable = 0x200000;
constexpr uint64_t kPeerTable = 0x900000;
constexpr uint64_t kPeerRbuf = 0x800000;

struct Fixture {
  std::vector<uint8_t> table = std::vector<uint8_t>(2 * kSgeSize + 2 * kIomapEntrySize);
  StreamFlow flow{{kRbuf, 0x11, 8192, kTable, 0x22, 2, 8}, table.data()};

  // The peer as rdma-core's rsocket.c: two SGL entries, an I/O map of one, 4 KiB windows.
  ConnData peer(uint16_t credits = 4) {
    ConnData c;
    c.flags = kConnFlagIomap;
    c.credits = credits;
    c.iomap_scale = 1;
    c.target_sgl = {kPeerTable, 0x33, 2};
    c.data_buf = {kPeerRbuf, 0x44, 4096};
    return c;
  }
  // The peer writes a new window into this side's SGL entry `i`, as its RDMA WRITE would.
  void peer_writes_window(uint32_t i, const Sge& s) { put_sge(&table[i * kSgeSize], s, false); }
};

TEST(StreamFlow, conn_data__first_half_table_and_credits) {
  Fixture f;
  const ConnData c = f.flow.conn_data();
  EXPECT_EQ(c.version, 1);
  EXPECT_EQ(c.flags, kConnFlagIomap);
  EXPECT_EQ(c.credits, 8);
  EXPECT_EQ(c.iomap_scale, 2);
  EXPECT_EQ(c.target_sgl, (Sge{kTable, 0x22, 2}));
  EXPECT_EQ(c.data_buf, (Sge{kRbuf, 0x11, 4096}));
}

TEST(StreamFlow, start__peer_with_one_sgl_entry__refused) {
  Fixture f;
  ConnData p = f.peer();
  p.target_sgl.length = 1;
  EXPECT_FALSE(f.flow.start(p));
  EXPECT_FALSE(f.flow.started());
  EXPECT_TRUE(f.flow.start(f.peer()));
  EXPECT_TRUE(f.flow.started());
}

TEST(StreamFlow, data__writes_into_peer_window_in_order_then_waits_for_the_next) {
  Fixture f;
  ASSERT_TRUE(f.flow.start(f.peer(100)));
  ASSERT_TRUE(f.flow.can_send());
  EXPECT_EQ(f.flow.window(), 4096u);
  Write w = f.flow.data(1000);
  EXPECT_EQ(w.remote_addr, kPeerRbuf);
  EXPECT_EQ(w.rkey, 0x44u);
  EXPECT_EQ(w.imm, 1000u);  // RS_OP_DATA | length
  EXPECT_EQ(w.length, 1000u);
  w = f.flow.data(3096);
  EXPECT_EQ(w.remote_addr, kPeerRbuf + 1000);
  EXPECT_FALSE(f.flow.can_send());  // the window is used up; entry 1 is still empty
  // The used-up entry is left empty in the table, for the peer to refill.
  EXPECT_EQ(get_sge(&f.table[0], false).length, 0u);
  f.peer_writes_window(1, {kPeerRbuf + 4096, 0x44, 4096});
  EXPECT_FALSE(f.flow.can_send());  // not before the update's completion
  EXPECT_EQ(f.flow.on_imm(imm_of(Op::kSgl, 100)), Rx::kCredit);
  ASSERT_TRUE(f.flow.can_send());
  EXPECT_EQ(f.flow.data(10).remote_addr, kPeerRbuf + 4096);
}

TEST(StreamFlow, data__message_credits_from_the_peer_limit) {
  Fixture f;
  ASSERT_TRUE(f.flow.start(f.peer(2)));
  f.flow.data(1);
  f.flow.data(1);
  EXPECT_FALSE(f.flow.can_send());
  EXPECT_EQ(f.flow.on_imm(imm_of(Op::kSgl, 3)), Rx::kCredit);  // sequence limit 3
  EXPECT_TRUE(f.flow.can_send());
  f.flow.data(1);
  EXPECT_FALSE(f.flow.can_send());
}

TEST(StreamFlow, grant__first_hands_over_second_half_into_peer_entry_one) {
  Fixture f;
  ASSERT_TRUE(f.flow.start(f.peer()));
  auto g = f.flow.grant(true);
  ASSERT_TRUE(g.has_value());
  EXPECT_TRUE(g->with_sge);
  EXPECT_EQ(g->write.remote_addr, kPeerTable + 16);
  EXPECT_EQ(g->write.rkey, 0x33u);
  EXPECT_EQ(g->write.length, 16u);
  EXPECT_EQ(g->write.imm, 0x80000008u);  // RS_OP_SGL | (0 read + 8 credits)
  EXPECT_EQ(g->sge, (Sge{kRbuf + 4096, 0x11, 4096}));
  const uint8_t want[16] = {0x00, 0x10, 0x10, 0, 0, 0, 0, 0, 0x11, 0, 0, 0, 0, 0x10, 0, 0};
  EXPECT_EQ(std::memcmp(g->bytes.data(), want, 16), 0);
  EXPECT_FALSE(f.flow.grant(true).has_value());  // nothing more is due
}

TEST(StreamFlow, grant__after_half_read_hands_first_half_to_entry_zero) {
  Fixture f;
  ASSERT_TRUE(f.flow.start(f.peer()));
  ASSERT_TRUE(f.flow.grant(true).has_value());
  f.flow.ctrl_completed();
  ASSERT_EQ(f.flow.on_imm(imm_of(Op::kData, 4096)), Rx::kData);
  f.flow.consume(4000);
  EXPECT_FALSE(f.flow.grant(true).has_value());
  f.flow.consume(96);
  auto g = f.flow.grant(true);
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->write.remote_addr, kPeerTable);  // entries 1, 0, 1, …
  EXPECT_EQ(g->sge.addr, kRbuf);
  EXPECT_EQ(g->write.imm, imm_of(Op::kSgl, 1 + 8));
}

TEST(StreamFlow, grant__half_the_credits_used__bare_update) {
  Fixture f;
  ASSERT_TRUE(f.flow.start(f.peer()));
  ASSERT_TRUE(f.flow.grant(true).has_value());
  for (int i = 0; i < 4; ++i) f.flow.on_imm(imm_of(Op::kData, 10));
  f.flow.consume(30);
  EXPECT_FALSE(f.flow.grant(true).has_value());  // 3 of 4 read
  f.flow.consume(10);
  auto g = f.flow.grant(true);
  ASSERT_TRUE(g.has_value());
  EXPECT_FALSE(g->with_sge);
  EXPECT_EQ(g->write.length, 0u);
  EXPECT_EQ(g->write.imm, imm_of(Op::kSgl, 4 + 8));
  EXPECT_FALSE(f.flow.grant(false).has_value());
}

TEST(StreamFlow, ctrl__four_in_flight_at_most) {
  Fixture f;
  ASSERT_TRUE(f.flow.start(f.peer()));
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(f.flow.ctrl_avail());
    EXPECT_EQ(f.flow.ctrl(Ctrl::kShutdown).imm, 0xe0000002u);
  }
  EXPECT_FALSE(f.flow.ctrl_avail());
  EXPECT_FALSE(f.flow.grant(true).has_value());  // a credit update needs a slot too
  f.flow.ctrl_completed();
  EXPECT_TRUE(f.flow.ctrl_avail());
  EXPECT_FALSE(f.flow.ctrl_idle());
}

TEST(StreamFlow, on_imm__control_codes_and_bad_length) {
  Fixture f;
  ASSERT_TRUE(f.flow.start(f.peer()));
  EXPECT_EQ(f.flow.on_imm(0xe0000000u), Rx::kDisconnect);
  EXPECT_EQ(f.flow.on_imm(0xe0000002u), Rx::kShutdown);
  EXPECT_EQ(f.flow.on_imm(0xe0000001u), Rx::kIgnored);
  EXPECT_EQ(f.flow.on_imm(imm_of(Op::kData, 8193)), Rx::kBad);
  EXPECT_FALSE(f.flow.has_data());
}

TEST(StreamFlow, chunks__across_messages_and_the_end_of_the_ring) {
  Fixture f;
  ASSERT_TRUE(f.flow.start(f.peer()));
  f.flow.on_imm(imm_of(Op::kData, 8000));
  f.flow.consume(8000);
  f.flow.on_imm(imm_of(Op::kData, 100));  // wraps: 192 bytes to the end
  f.flow.on_imm(imm_of(Op::kData, 300));
  const auto c = f.flow.chunks(192);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].offset, 8000u);
  EXPECT_EQ(c[0].length, 100u);
  EXPECT_EQ(c[1].offset, 8100u);
  EXPECT_EQ(c[1].length, 92u);
  const auto d = f.flow.chunks(400);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[2].offset, 0u);
  EXPECT_EQ(d[2].length, 208u);
  f.flow.consume(400);
  EXPECT_FALSE(f.flow.has_data());
}

TEST(StreamFlow, iomap__entry_into_peer_table_and_find_in_own) {
  Fixture f;
  ASSERT_TRUE(f.flow.start(f.peer()));
  EXPECT_EQ(f.flow.peer_iomap_entries(), 1u);
  uint8_t bytes[kIomapEntrySize];
  const Write w = f.flow.iomap(0, {0, {0x7000, 0x55, 65536}}, bytes);
  EXPECT_EQ(w.remote_addr, kPeerTable + 32);  // after the peer's two SGL entries
  EXPECT_EQ(w.rkey, 0x33u);
  EXPECT_EQ(w.imm, 0xc0000000u);
  EXPECT_EQ(get_iomap_entry(bytes, false), (IomapEntry{0, {0x7000, 0x55, 65536}}));
  // The peer's mapping lands in this side's table (after its SGL), then its notice.
  put_iomap_entry(&f.table[32 + 24], {4096, {0xa000, 0x66, 100}}, false);
  EXPECT_EQ(f.flow.find_iomap(4100), nullptr);
  EXPECT_EQ(f.flow.on_imm(imm_of(Op::kIomapSgl, 1)), Rx::kIomap);
  const IomapEntry* e = f.flow.find_iomap(4100);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->sge.addr, 0xa000u);
  EXPECT_EQ(f.flow.find_iomap(4196), nullptr);
}

TEST(SendRing, take__in_order_then_wraps_to_the_front_once_freed) {
  SendRing r(100);
  Chunk a = r.take(60, 10), b = r.take(60, 10);
  EXPECT_EQ(a.offset, 0u);
  EXPECT_EQ(a.length, 60u);
  EXPECT_EQ(b.offset, 60u);
  EXPECT_EQ(b.length, 40u);  // what is left, at least the low mark
  EXPECT_EQ(r.take(10, 10).length, 0u);  // full
  r.release_oldest();
  Chunk c = r.take(50, 10);
  EXPECT_EQ(c.offset, 0u);  // the front, freed
  EXPECT_EQ(c.length, 50u);
  EXPECT_EQ(r.take(20, 20).length, 0u);  // 10 bytes before the oldest
  EXPECT_EQ(r.take(20, 5).length, 10u);
  r.release_oldest();  // b: the oldest is now c
  Chunk d = r.take(30, 30);
  EXPECT_EQ(d.offset, 60u);  // the end again
  EXPECT_EQ(d.length, 30u);
}

TEST(SendRing, take__too_little_at_the_end__skips_it) {
  SendRing r(100);
  r.take(90, 90);
  r.take(5, 5);  // 5 left at the end
  r.release_oldest();
  Chunk c = r.take(50, 20);
  EXPECT_EQ(c.offset, 0u);
  EXPECT_EQ(c.length, 50u);
  r.release_oldest();
  r.release_oldest();
  EXPECT_TRUE(r.empty());
  EXPECT_EQ(r.take(100, 1).length, 100u);
  EXPECT_EQ(r.take(0, 0).length, 0u);
}

}  // namespace
}  // namespace vrnic::rdmacm::rs
