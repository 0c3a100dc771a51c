// Forged RoCEv2 packets at a connected QP (ReDMArk's injection, USENIX Security 2021): from
// another address, outside the PSN window, with guessed keys; and in authenticated mode any
// packet without the right tag, replayed or altered. Memory never changes, a counter names
// each case, and the connection carries on where the rules allow it.
#include <gtest/gtest.h>

#include <random>

#include "engine/test_fabric.h"
#include "wire/auth_trailer.h"
#include "wire/headers.h"
#include "wire/opcode.h"
#include "wire/psn.h"

namespace vrnic::engine::testing {
namespace {

constexpr uint8_t kA = 1, kB = 2, kStranger = 9;

struct Injection : ::testing::Test {
  Fabric f;
  Node& a = f.add_node(kA);
  Node& b = f.add_node(kB);
  Qp* qa = a.create_qp();
  Qp* qb = b.create_qp();
  Buffer& src = a.reg(4096);
  Buffer& dst = b.reg(4096);
  std::vector<uint8_t> before;
  std::vector<WirePacket> seen_ip;             // what crossed the wire: addresses
  std::vector<std::vector<uint8_t>> seen;      // and bytes

  void SetUp() override {
    Fabric::connect(a, qa, b, qb);
    fill_random(dst.data(), dst.bytes.size(), 3);
    fill_random(src.data(), src.bytes.size(), 4);
    before = dst.bytes;
    f.wire().set_tap([this](const WirePacket& w) {
      seen_ip.push_back(w);
      seen.emplace_back(w.data.begin(), w.data.end());
    });
  }

  uint32_t epsn() {
    QpAttr at;
    QpInitAttr init;
    EXPECT_EQ(b.dev->query_qp(qb, at, init), 0);
    return at.rq_psn;
  }
  static wire::IpUdpInfo ip_from(uint8_t last) {
    wire::IpUdpInfo ip;
    ip.src = {10, 0, 0, last};
    ip.dst = {10, 0, 0, kB};
    ip.src_port = 0xC001;
    ip.ip_flags_frag = 0x4000;
    return ip;
  }
  // A WRITE ONLY of 8 bytes of 0x66 to b's region, as if from 10.0.0.<from>.
  std::vector<uint8_t> forged_write(uint32_t psn, uint32_t rkey, uint8_t from = kA,
                                    uint32_t qpn = 0) {
    wire::Packet p;
    p.bth.opcode = wire::kRcWriteOnly;
    p.bth.dest_qp = qpn ? qpn : b.dev->qp_num(qb);
    p.bth.psn = psn & wire::kPsnMask;
    p.bth.ack_req = true;
    p.reth = {dst.addr(), rkey, 8};
    const size_t h = wire::header_size(p.bth.opcode);
    std::vector<uint8_t> out(h + 8 + wire::kIcrcSize, 0x66);
    wire::write_headers(p, out.data());
    store_icrc(out, from);
    return out;
  }
  static void store_icrc(std::vector<uint8_t>& bytes, uint8_t from) {
    store_icrc(bytes, ip_from(from));
  }
  static void store_icrc(std::vector<uint8_t>& bytes, const wire::IpUdpInfo& ip) {
    const size_t body = bytes.size() - wire::kIcrcSize;
    wire::store_icrc(wire::compute_icrc(ip, {bytes.data(), body}), bytes.data() + body);
  }
  void inject(const std::vector<uint8_t>& bytes, uint8_t from = kA) { inject(bytes, ip_from(from)); }
  // As it was sent (the ICRC covers the UDP source port).
  void inject(const std::vector<uint8_t>& bytes, const wire::IpUdpInfo& ip) {
    WirePacket w;
    w.ip = ip;
    w.data = bytes;
    b.dev->receive({&w, 1});
    ASSERT_TRUE(f.run());  // whatever b answers reaches a
  }
  // The connection still carries data: a WRITE from a lands, a READ brings bytes back.
  void expect_connection_works() {
    Sge wsg{src.addr(), 256, src.mr.lkey};
    ASSERT_EQ(post_send(a, qa, wr_of(WrOpcode::kRdmaWrite, 1, &wsg, dst.addr() + 1024,
                                     dst.mr.rkey)), 0);
    Sge rsg{src.addr() + 2048, 512, src.mr.lkey};
    ASSERT_EQ(post_send(a, qa, wr_of(WrOpcode::kRdmaRead, 2, &rsg, dst.addr() + 3072,
                                     dst.mr.rkey)), 0);
    ASSERT_TRUE(f.run());
    auto wc = a.poll();
    ASSERT_EQ(wc.size(), 2u);
    EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
    EXPECT_EQ(wc[1].status, WcStatus::kSuccess);
    EXPECT_EQ(std::memcmp(dst.data() + 1024, src.data(), 256), 0);
    EXPECT_EQ(std::memcmp(src.data() + 2048, dst.data() + 3072, 512), 0);
  }
  bool memory_unchanged() const { return dst.bytes == before; }
  void refill(uint8_t v) {  // in place: the region stays registered over the same bytes
    std::fill(dst.bytes.begin(), dst.bytes.end(), v);
    before = dst.bytes;
  }
};

TEST_F(Injection, from_another_address__dropped_before_the_psn_and_counted) {
  inject(forged_write(epsn(), dst.mr.rkey, kStranger), kStranger);  // PSN and key right
  EXPECT_TRUE(memory_unchanged());
  EXPECT_EQ(b.ctr().rx_wrong_source, 1u);  // IBA 9.6.1: only the connected peer's packets
  EXPECT_EQ(b.ctr().tx_packets, 0u);       // not even a NAK
  expect_connection_works();
}

TEST_F(Injection, psn_outside_the_window__never_placed_and_counted) {
  const uint32_t e = epsn();
  for (int32_t d : {1, 2, 1000, (1 << 23) - 1})  // ahead of the expected PSN: a gap
    inject(forged_write(e + d, dst.mr.rkey));
  for (int32_t d : {-1, -2, -1000, -(1 << 23) + 1})  // behind it: "duplicates"
    inject(forged_write(e + d, dst.mr.rkey));
  EXPECT_TRUE(memory_unchanged());
  EXPECT_EQ(b.ctr().rx_out_of_sequence, 4u);
  EXPECT_EQ(b.ctr().rx_duplicate, 4u);  // acknowledged again, never placed (C9-105)
  EXPECT_EQ(b.ctr().tx_nak_psn_seq, 1u);  // once per gap (9.7.5.2.2); a ignores it
  EXPECT_EQ(epsn(), e);
  expect_connection_works();
}

TEST_F(Injection, guessed_rkeys_at_guessed_psns__memory_unchanged) {
  std::mt19937 rng(7);
  const uint32_t e = epsn();
  for (int i = 0; i < 1000; ++i) {
    uint32_t psn = rng() & wire::kPsnMask;
    if (psn == e) ++psn;
    inject(forged_write(psn, rng()));
  }
  EXPECT_TRUE(memory_unchanged());
  EXPECT_EQ(b.ctr().rx_out_of_sequence + b.ctr().rx_duplicate, 1000u);
  EXPECT_EQ(b.ctr().rx_access_errors, 0u);
  expect_connection_works();
}

// A spoofer that knows the QPN, the peer's address and the expected PSN: a wrong R_Key is
// refused before a byte moves, and the rules end the connection (a class C error: NAK,
// responder QP to ERR, IBA 9.9.3.1.2). Only the authenticated mode keeps it (below).
TEST_F(Injection, guessed_rkey_at_the_expected_psn__refused_and_the_rules_end_the_connection) {
  inject(forged_write(epsn(), dst.mr.rkey ^ 0x5a00));
  EXPECT_TRUE(memory_unchanged());
  EXPECT_EQ(b.ctr().rx_access_errors, 1u);
  EXPECT_EQ(b.ctr().tx_nak_rem_access, 1u);
  QpAttr at;
  QpInitAttr init;
  ASSERT_EQ(b.dev->query_qp(qb, at, init), 0);
  EXPECT_EQ(at.cur_qp_state, QpState::kErr);
}

TEST_F(Injection, guessed_qpn__unknown_qp_counted) {
  inject(forged_write(epsn(), dst.mr.rkey, kA, b.dev->qp_num(qb) ^ 0x10));
  EXPECT_TRUE(memory_unchanged());
  EXPECT_EQ(b.ctr().rx_unknown_qp, 1u);
  expect_connection_works();
}

// Both ends of the connection with the keys the connection manager would have agreed.
struct AuthInjection : Injection {
  void SetUp() override {
    Injection::SetUp();
    AuthKeys ka, kb;
    for (size_t i = 0; i < 32; ++i) ka.tx[i] = uint8_t(i), ka.rx[i] = uint8_t(100 + i);
    kb.tx = ka.rx;
    kb.rx = ka.tx;
    ASSERT_EQ(a.dev->set_qp_auth(a.dev->qp_num(qa), ka), 0);
    ASSERT_EQ(b.dev->set_qp_auth(b.dev->qp_num(qb), kb), 0);
  }
  // The first WRITE a sends: its bytes and addresses as they crossed the wire.
  std::pair<WirePacket, std::vector<uint8_t>> genuine_write() {
    for (size_t i = 0; i < seen.size(); ++i)
      if (seen[i][0] == wire::kRcWriteOnly) return {seen_ip[i], seen[i]};
    ADD_FAILURE() << "no WRITE seen";
    return {};
  }
};

TEST_F(AuthInjection, traffic__every_packet_carries_a_trailer_and_is_taken) {
  expect_connection_works();
  auto [w, bytes] = genuine_write();
  EXPECT_EQ(bytes.size(), wire::header_size(wire::kRcWriteOnly) + 256 + wire::kAuthTrailerSize +
                              wire::kIcrcSize);
  EXPECT_EQ(wire::verify_icrc(w.ip, bytes), wire::IcrcVerdict::kOk);
  EXPECT_EQ(b.ctr().rx_auth_failed + a.ctr().rx_auth_failed, 0u);
  EXPECT_GT(a.ctr().rx_read_response, 0u);  // a's side opens b's packets too
}

TEST_F(AuthInjection, forged_with_everything_but_the_key__dropped_connection_lives) {
  inject(forged_write(epsn(), dst.mr.rkey));       // right address, PSN and R_Key
  inject(forged_write(epsn(), dst.mr.rkey ^ 1));   // and a guessed key: never reaches the check
  EXPECT_TRUE(memory_unchanged());
  EXPECT_EQ(b.ctr().rx_auth_failed, 2u);
  EXPECT_EQ(b.ctr().rx_access_errors, 0u);
  EXPECT_EQ(b.ctr().tx_packets, 0u);
  expect_connection_works();
}

TEST_F(AuthInjection, replayed__dropped_and_counted) {
  expect_connection_works();
  auto [w, bytes] = genuine_write();
  refill(0x11);
  inject(bytes, w.ip);  // the same packet again, as captured
  EXPECT_TRUE(memory_unchanged());
  EXPECT_EQ(b.ctr().rx_auth_replayed, 1u);
  for (int i = 0; i < 40; ++i) expect_connection_works();  // the packet falls out of the window
  refill(0x22);
  inject(bytes, w.ip);
  EXPECT_TRUE(memory_unchanged());
  EXPECT_EQ(b.ctr().rx_auth_replayed, 2u);
}

TEST_F(AuthInjection, altered__dropped_and_counted) {
  expect_connection_works();
  auto [w, bytes] = genuine_write();
  refill(0x33);
  const size_t payload = wire::header_size(wire::kRcWriteOnly);
  for (size_t at : {payload + 5, size_t{9} /* PSN */, size_t{20} /* R_Key */}) {
    std::vector<uint8_t> changed = bytes;
    changed[at] ^= 0x80;
    store_icrc(changed, w.ip);  // a right ICRC: only the tag tells
    inject(changed, w.ip);
  }
  std::vector<uint8_t> stripped(bytes.begin(), bytes.end() - wire::kAuthTrailerSize);
  store_icrc(stripped, w.ip);  // the plain packet without its trailer
  inject(stripped, w.ip);
  EXPECT_TRUE(memory_unchanged());
  EXPECT_EQ(b.ctr().rx_auth_failed, 4u);
  expect_connection_works();
}

TEST_F(AuthInjection, keys_that_differ__nothing_taken_the_requester_gives_up) {
  AuthKeys other;
  other.tx[0] = 1;
  ASSERT_EQ(b.dev->set_qp_auth(b.dev->qp_num(qb), other), 0);
  Sge sg{src.addr(), 64, src.mr.lkey};
  ASSERT_EQ(post_send(a, qa, wr_of(WrOpcode::kRdmaWrite, 1, &sg, dst.addr(), dst.mr.rkey)), 0);
  ASSERT_TRUE(f.run());
  auto wc = a.poll();
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kRetryExcErr);
  EXPECT_TRUE(memory_unchanged());
  EXPECT_GT(b.ctr().rx_auth_failed, 0u);
}

TEST_F(AuthInjection, set_qp_auth__only_rc_qps_and_the_keys_go_with_a_reset) {
  EXPECT_EQ(b.dev->set_qp_auth(0x123456, AuthKeys{}), EINVAL);  // no such QP
  QpAttr at;
  at.qp_state = QpState::kReset;
  ASSERT_EQ(b.dev->modify_qp(qb, at, kAttrState), 0);
  // Reconnected without keys: b takes a's plain packets again (a is made plain too).
  ASSERT_EQ(a.dev->modify_qp(qa, at, kAttrState), 0);
  Fabric::connect(a, qa, b, qb);
  expect_connection_works();
  EXPECT_EQ(b.ctr().rx_auth_failed, 0u);
}

}  // namespace
}  // namespace vrnic::engine::testing
