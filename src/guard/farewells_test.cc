// Farewells in virtual time: what a dead process's guard sends, when, and when it stops.
#include "guard/farewells.h"

#include <gtest/gtest.h>

namespace vrnic::guard {
namespace {

constexpr uint64_t kMs = 1'000'000;

cm::GuardRecord keep(uint32_t conn, uint8_t peer) {
  cm::GuardRecord r;
  r.op = cm::GuardRecord::kKeep;
  r.conn = conn;
  r.from.ip = {127, 0, 0, 1};
  r.to.ip = {127, 0, 0, peer};
  r.mad[0] = uint8_t(conn);
  return r;
}

cm::GuardRecord drop(uint32_t conn) {
  cm::GuardRecord r;
  r.op = cm::GuardRecord::kDrop;
  r.conn = conn;
  return r;
}

TEST(Farewells, OnlyWhatIsStillKeptIsSent) {
  Farewells f;
  f.apply(keep(1, 2));
  f.apply(keep(2, 3));
  f.apply(keep(3, 4));
  f.apply(drop(2));  // disconnected by the process itself
  EXPECT_EQ(f.kept(), 2u);
  EXPECT_TRUE(f.done());  // nothing before the process is gone
  f.start(1000 * kMs);
  auto sent = f.due(1000 * kMs);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0]->conn, 1u);
  EXPECT_EQ(sent[1]->conn, 3u);
  EXPECT_EQ(sent[0]->mad[0], 1);
}

TEST(Farewells, SentThreeTimesOnDoublingGapsThenDone) {
  Farewells f;
  f.apply(keep(7, 2));
  f.apply(keep(8, 3));
  f.start(0);
  std::vector<uint64_t> sent_at;
  for (uint64_t t = 0; !f.done() && t < 10'000 * kMs; t += kMs) {
    const auto d = f.due(t);
    if (!d.empty()) {
      EXPECT_EQ(d.size(), 2u);  // every connection's DREQ each time
      sent_at.push_back(t / kMs);
    }
  }
  EXPECT_EQ(sent_at, (std::vector<uint64_t>{0, 100, 300}));
  EXPECT_TRUE(f.done());
  EXPECT_EQ(f.next(), UINT64_MAX);
}

TEST(Farewells, AKeepAgainReplacesTheDreq) {
  Farewells f;
  f.apply(keep(5, 2));
  cm::GuardRecord r = keep(5, 2);
  r.mad[0] = 42;
  f.apply(r);
  f.start(0);
  auto sent = f.due(0);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0]->mad[0], 42);
}

TEST(GuardRecord, RoundTrip) {
  cm::GuardRecord r = keep(0x01020304, 9);
  r.from.ipv6 = r.to.ipv6 = true;
  r.mad[255] = 0xee;
  const auto bytes = r.encode();
  cm::GuardRecord back;
  ASSERT_TRUE(back.decode(bytes));
  EXPECT_EQ(back.conn, 0x01020304u);
  EXPECT_TRUE(back.from.ipv6);
  EXPECT_EQ(back.to.ip[3], 9);
  EXPECT_EQ(back.mad[255], 0xee);
  auto bad = bytes;
  bad[0] = 9;
  EXPECT_FALSE(back.decode(bad));
}

}  // namespace
}  // namespace vrnic::guard
