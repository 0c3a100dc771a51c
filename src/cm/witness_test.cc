// The Manager's Witness: each established connection's DREQ handed out, dropped when it ends, and good for the peer.
#include <map>

#include "cm/manager_test_wire.h"

namespace vrnic::cm {
namespace {

struct Kept {
  Endpoint from, to;
  std::vector<uint8_t> dreq;
};

// What a guard would hold: the DREQs still owed, by comm ID; every keep and drop counted.
struct RecordingWitness : Witness {
  std::map<uint32_t, Kept> kept;
  int keeps = 0, drops = 0;
  void keep(uint32_t conn, const Endpoint& from, const Endpoint& to,
            std::span<const uint8_t, wc::kMadSize> dreq) override {
    kept[conn] = Kept{from, to, {dreq.begin(), dreq.end()}};
    ++keeps;
  }
  void drop(uint32_t conn) override {
    kept.erase(conn);
    ++drops;
  }
};

struct WitnessedWire {
  Wire w;
  RecordingWitness seen[2];
  WitnessedWire() {
    w.cm[0]->set_witness(&seen[0]);
    w.cm[1]->set_witness(&seen[1]);
  }
};

TEST(CmWitness, established__each_side_keeps_the_dreq_the_kernel_would_send) {
  WitnessedWire x;
  listen_on_a(x.w);
  const Connected c = connect_both(x.w);
  ASSERT_EQ(x.seen[1].kept.count(c.b), 1u);
  ASSERT_EQ(x.seen[0].kept.count(c.a), 1u);
  const Kept& k = x.seen[1].kept[c.b];
  EXPECT_TRUE(k.from.same_address(x.w.addr[1]));
  EXPECT_TRUE(k.to.same_address(x.w.addr[0]));
  wc::Mad m;
  ASSERT_EQ(wc::parse_mad(k.dreq, m), wc::MadError::kOk);
  const auto* d = std::get_if<wc::Dreq>(&m.msg);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->local_comm_id, c.b);
  EXPECT_EQ(d->remote_comm_id, c.a);
  EXPECT_EQ(d->remote_qpn, 0x456u);  // the passive side's QP
  EXPECT_EQ(x.w.sent_of(wc::Attr::kDreq), 0);  // only kept, nothing sent
}

// Side B is killed: its CM sends nothing more; the kept DREQ, sent for it, ends A's side.
TEST(CmWitness, kept_dreq__sent_for_a_dead_side__the_peer_disconnects) {
  WitnessedWire x;
  listen_on_a(x.w);
  const Connected c = connect_both(x.w);
  const Kept k = x.seen[1].kept[c.b];
  x.w.cm[0]->receive(k.from, k.to, k.dreq);
  EXPECT_TRUE(x.w.got(0, EventType::kDisconnected));
  EXPECT_EQ(x.w.cm[0]->state(c.a), State::kDreqRcvd);
  EXPECT_EQ(x.seen[0].kept.count(c.a), 0u);  // A owes nothing once the peer has ended it
  EXPECT_EQ(x.w.cm[0]->counters().rx_unmatched, 0u);
}

TEST(CmWitness, disconnect__both_sides_drop) {
  WitnessedWire x;
  listen_on_a(x.w);
  const Connected c = connect_both(x.w);
  ASSERT_EQ(x.w.cm[1]->disconnect(c.b), 0);
  EXPECT_TRUE(x.seen[1].kept.empty());  // dropped as the DREQ leaves
  ASSERT_TRUE(x.w.run([&] { return x.w.got(0, EventType::kDisconnected); }));
  EXPECT_TRUE(x.seen[0].kept.empty());
  EXPECT_EQ(x.seen[0].keeps, 1);
  EXPECT_EQ(x.seen[1].keeps, 1);
  EXPECT_EQ(x.seen[0].drops, 1);
  EXPECT_EQ(x.seen[1].drops, 1);
}

TEST(CmWitness, transport_lost_and_shutdown__dropped) {
  WitnessedWire x;
  listen_on_a(x.w);
  const Connected c = connect_both(x.w);
  ASSERT_EQ(x.w.cm[1]->transport_lost(c.b), 0);
  EXPECT_TRUE(x.seen[1].kept.empty());
  x.w.cm[0]->shutdown();  // a normal exit: nothing left for a guard to send
  EXPECT_TRUE(x.seen[0].kept.empty());
}

}  // namespace
}  // namespace vrnic::cm
