// Responder tests with hand-built packets: past / expected / future PSNs, hostile input
// (wrong opcode sequence, oversized payloads, bad ICRC, truncation, unknown QPN), duplicate
// atomics and READs. The packets the responder sends back are captured and parsed.
#include <gtest/gtest.h>

#include "engine/test_fabric.h"
#include "wire/headers.h"
#include "wire/opcode.h"

namespace vrnic::engine::testing {
namespace {

constexpr uint32_t kPeerQpn = 0x77;
constexpr uint32_t kRqPsn = 1000;

struct Responder : ::testing::Test {
  Fabric f;
  transport::LoopPort& peer = f.wire().add_port({10, 0, 0, 1});
  Node& b = f.add_node(2);
  Qp* qb = b.create_qp();
  Buffer& mem = b.reg(8192);
  std::vector<uint8_t> before;
  std::vector<wire::Packet> replies;
  std::vector<std::vector<uint8_t>> reply_bytes;

  void SetUp() override {
    Gid g;
    g.raw = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1};
    Fabric::bring_up(b, qb, g, kPeerQpn, 50, kRqPsn, {});
    fill_random(mem.data(), mem.bytes.size(), 1);
    before = mem.bytes;
    peer.set_receiver([this](std::span<const WirePacket> batch) {
      for (auto& p : batch) reply_bytes.emplace_back(p.data.begin(), p.data.end());
    });
  }

  // Builds a packet from the peer to b's QP, with a correct ICRC unless told otherwise.
  std::vector<uint8_t> build(wire::Packet p, std::span<const uint8_t> payload) {
    if (p.bth.dest_qp == 0) p.bth.dest_qp = b.dev->qp_num(qb);
    p.bth.pad_count = wire::pad_for(payload.size());
    size_t h = wire::header_size(p.bth.opcode);
    std::vector<uint8_t> out(h + payload.size() + p.bth.pad_count + 4, 0);
    wire::write_headers(p, out.data());
    std::copy(payload.begin(), payload.end(), out.begin() + h);
    wire::IpUdpInfo ip = ip_info();
    uint32_t icrc = wire::compute_icrc(ip, {out.data(), out.size() - 4});
    wire::store_icrc(icrc, out.data() + out.size() - 4);
    return out;
  }
  wire::IpUdpInfo ip_info() {
    wire::IpUdpInfo ip;
    ip.src = {10, 0, 0, 1};
    ip.dst = {10, 0, 0, 2};
    ip.src_port = 0xC123;
    return ip;
  }
  void inject(const std::vector<uint8_t>& bytes) { inject_batch({bytes}); }
  // The packets arrive in one receive batch (ACKs coalesce across it).
  void inject_batch(const std::vector<std::vector<uint8_t>>& packets) {
    std::vector<WirePacket> batch(packets.size());
    for (size_t i = 0; i < packets.size(); ++i) {
      batch[i].ip = ip_info();
      batch[i].data = packets[i];
    }
    b.dev->receive(batch);
    f.wire().deliver_all();
    replies.clear();
    for (auto& r : reply_bytes) {
      wire::Packet p;
      EXPECT_EQ(wire::parse_packet(r, p), wire::ParseError::kOk);
      replies.push_back(p);
    }
  }
  static wire::Packet req(uint8_t opcode, uint32_t psn, bool ack_req = true) {
    wire::Packet p;
    p.bth.opcode = opcode;
    p.bth.psn = psn;
    p.bth.ack_req = ack_req;
    return p;
  }
  wire::Packet write_req(uint8_t opcode, uint32_t psn, uint64_t va, uint32_t len) {
    wire::Packet p = req(opcode, psn);
    p.reth = {va, mem.mr.rkey, len};
    return p;
  }
  const wire::Packet& last_reply() { return replies.back(); }
};

std::vector<uint8_t> bytes_of(size_t n, uint8_t v) { return std::vector<uint8_t>(n, v); }

TEST_F(Responder, receive__expected_psn_write_is_placed_and_acked) {
  auto data = bytes_of(100, 0xAB);
  inject(build(write_req(wire::kRcWriteOnly, kRqPsn, mem.addr() + 10, 100), data));
  EXPECT_EQ(0, std::memcmp(mem.data() + 10, data.data(), 100));
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(last_reply().bth.opcode, wire::kRcAck);
  EXPECT_EQ(last_reply().bth.psn, kRqPsn);
  EXPECT_EQ(last_reply().bth.dest_qp, kPeerQpn);
  EXPECT_EQ(last_reply().aeth.syndrome, 0x1f);
  EXPECT_EQ(last_reply().aeth.msn, 1u);
}

TEST_F(Responder, receive__future_psn_gets_one_nak_then_silence) {
  auto data = bytes_of(8, 1);
  inject(build(write_req(wire::kRcWriteOnly, kRqPsn + 5, mem.addr(), 8), data));
  inject(build(write_req(wire::kRcWriteOnly, kRqPsn + 6, mem.addr(), 8), data));
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(last_reply().aeth.syndrome, 0x60);  // NAK, PSN sequence error
  EXPECT_EQ(last_reply().bth.psn, kRqPsn);      // carries the expected PSN
  EXPECT_EQ(mem.bytes, before);
  EXPECT_EQ(b.ctr().rx_out_of_sequence, 2u);
  // The expected packet ends the silence; a new gap gets a new NAK.
  inject(build(write_req(wire::kRcWriteOnly, kRqPsn, mem.addr(), 8), data));
  inject(build(write_req(wire::kRcWriteOnly, kRqPsn + 3, mem.addr(), 8), data));
  ASSERT_EQ(replies.size(), 3u);
  EXPECT_EQ(replies[1].aeth.syndrome, 0x1f);
  EXPECT_EQ(replies[2].aeth.syndrome, 0x60);
  EXPECT_EQ(replies[2].bth.psn, kRqPsn + 1);
}

TEST_F(Responder, receive__past_psn_write_is_acked_not_placed_again) {
  auto data = bytes_of(8, 1);
  inject(build(write_req(wire::kRcWriteOnly, kRqPsn, mem.addr(), 8), data));
  mem.bytes[0] = 0x42;  // the application changed the byte since
  inject(build(write_req(wire::kRcWriteOnly, kRqPsn, mem.addr(), 8), data));
  EXPECT_EQ(mem.bytes[0], 0x42);
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_EQ(replies[1].aeth.syndrome, 0x1f);
  EXPECT_EQ(replies[1].bth.psn, kRqPsn);
  EXPECT_EQ(b.ctr().rx_duplicate, 1u);
}

TEST_F(Responder, receive__middle_without_first_is_invalid_request) {
  auto data = bytes_of(1024, 2);
  inject(build(req(wire::kRcWriteMiddle, kRqPsn), data));
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(last_reply().aeth.syndrome, 0x61);
  EXPECT_EQ(mem.bytes, before);
  EXPECT_EQ(b.ctr().tx_nak_inv_req, 1u);
}

TEST_F(Responder, receive__payload_longer_than_mtu_is_invalid_request) {
  auto data = bytes_of(1028, 3);
  inject(build(write_req(wire::kRcWriteOnly, kRqPsn, mem.addr(), 1028), data));
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(last_reply().aeth.syndrome, 0x61);
  EXPECT_EQ(mem.bytes, before);
}

TEST_F(Responder, receive__payload_longer_than_reth_length_is_invalid_request) {
  auto data = bytes_of(100, 4);
  inject(build(write_req(wire::kRcWriteOnly, kRqPsn, mem.addr(), 50), data));
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(last_reply().aeth.syndrome, 0x61);
  EXPECT_EQ(mem.bytes, before);
}

TEST_F(Responder, receive__first_packet_shorter_than_mtu_is_invalid_request) {
  auto data = bytes_of(512, 4);
  inject(build(write_req(wire::kRcWriteFirst, kRqPsn, mem.addr(), 4000), data));
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(last_reply().aeth.syndrome, 0x61);
  EXPECT_EQ(mem.bytes, before);
}

TEST_F(Responder, receive__zero_length_write_checks_no_rkey) {
  wire::Packet p = write_req(wire::kRcWriteOnly, kRqPsn, 0xdead0000, 0);
  p.reth.rkey = 0x12345678;
  inject(build(p, {}));
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(last_reply().aeth.syndrome, 0x1f);
}

TEST_F(Responder, receive__bad_icrc_is_dropped_and_counted) {
  auto pkt = build(write_req(wire::kRcWriteOnly, kRqPsn, mem.addr(), 8), bytes_of(8, 5));
  pkt[wire::kBthSize + wire::kRethSize] ^= 1;  // a payload bit
  inject(pkt);
  EXPECT_TRUE(replies.empty());
  EXPECT_EQ(mem.bytes, before);
  EXPECT_EQ(b.ctr().rx_icrc_errors, 1u);
}

TEST_F(Responder, receive__packet_from_another_address_is_dropped_and_counted) {
  // A valid WRITE at the expected PSN with the right rkey, but from 10.0.0.7, not the
  // connected peer 10.0.0.1: a stranger on a reused address must not touch memory.
  auto pkt = build(write_req(wire::kRcWriteOnly, kRqPsn, mem.addr(), 8), bytes_of(8, 5));
  wire::IpUdpInfo stranger = ip_info();
  stranger.src = {10, 0, 0, 7};
  wire::store_icrc(wire::compute_icrc(stranger, {pkt.data(), pkt.size() - 4}),
                   pkt.data() + pkt.size() - 4);
  WirePacket w;
  w.ip = stranger;
  w.data = pkt;
  b.dev->receive({&w, 1});
  f.wire().deliver_all();
  EXPECT_TRUE(reply_bytes.empty());
  EXPECT_EQ(mem.bytes, before);
  EXPECT_EQ(b.ctr().rx_wrong_source, 1u);
  // The same request from the peer is placed.
  inject(build(write_req(wire::kRcWriteOnly, kRqPsn, mem.addr(), 8), bytes_of(8, 5)));
  EXPECT_NE(mem.bytes, before);
  EXPECT_EQ(b.ctr().rx_wrong_source, 1u);
}

TEST_F(Responder, receive__truncated_packet_is_malformed) {
  auto pkt = build(write_req(wire::kRcWriteOnly, kRqPsn, mem.addr(), 0), {});
  std::vector<uint8_t> cut(pkt.begin(), pkt.begin() + 16);  // BTH + 4 bytes of RETH
  wire::IpUdpInfo ip = ip_info();
  wire::store_icrc(wire::compute_icrc(ip, {cut.data(), cut.size() - 4}), cut.data() + cut.size() - 4);
  inject(cut);
  EXPECT_TRUE(replies.empty());
  EXPECT_EQ(b.ctr().rx_malformed, 1u);
}

TEST_F(Responder, receive__unknown_qpn_is_dropped_and_counted) {
  wire::Packet p = write_req(wire::kRcWriteOnly, kRqPsn, mem.addr(), 8);
  p.bth.dest_qp = 0x4444;
  inject(build(p, bytes_of(8, 6)));
  EXPECT_TRUE(replies.empty());
  EXPECT_EQ(mem.bytes, before);
  EXPECT_EQ(b.ctr().rx_unknown_qp, 1u);
}

TEST_F(Responder, receive__qp_in_init_drops_requests) {
  Qp* q = b.create_qp();
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.port_num = 1;
  ASSERT_EQ(b.dev->modify_qp(q, a, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags), 0);
  wire::Packet p = write_req(wire::kRcWriteOnly, 0, mem.addr(), 8);
  p.bth.dest_qp = b.dev->qp_num(q);
  inject(build(p, bytes_of(8, 6)));
  EXPECT_TRUE(replies.empty());
  EXPECT_EQ(b.ctr().rx_bad_state, 1u);
}

TEST_F(Responder, receive__duplicate_atomic_returns_saved_value_without_executing) {
  uint64_t v = 100;
  std::memcpy(mem.data() + 64, &v, 8);
  wire::Packet p = req(wire::kRcFetchAdd, kRqPsn);
  p.atomic = {mem.addr() + 64, mem.mr.rkey, 5, 0};
  inject(build(p, {}));
  inject(build(p, {}));
  inject(build(p, {}));
  ASSERT_EQ(replies.size(), 3u);
  for (auto& r : replies) {
    EXPECT_EQ(r.bth.opcode, wire::kRcAtomicAck);
    EXPECT_EQ(r.atomic_ack.orig, 100u);
    EXPECT_EQ(r.bth.psn, kRqPsn);
  }
  std::memcpy(&v, mem.data() + 64, 8);
  EXPECT_EQ(v, 105u);  // added once
  EXPECT_EQ(b.ctr().duplicate_atomics_replayed, 2u);
}

TEST_F(Responder, receive__duplicate_read_replays_a_subset_only) {
  wire::Packet p = req(wire::kRcReadRequest, kRqPsn);
  p.reth = {mem.addr(), mem.mr.rkey, 3000};  // 3 responses: PSN 1000..1002
  inject(build(p, {}));
  ASSERT_EQ(replies.size(), 3u);
  EXPECT_EQ(replies[0].bth.opcode, wire::kRcReadResponseFirst);
  EXPECT_EQ(replies[2].bth.opcode, wire::kRcReadResponseLast);
  EXPECT_EQ(0, std::memcmp(replies[1].payload.data(), mem.data() + 1024, 1024));
  // The tail from the second response on: replayed as a READ of 1976 bytes at PSN 1001.
  wire::Packet tail = req(wire::kRcReadRequest, kRqPsn + 1);
  tail.reth = {mem.addr() + 1024, mem.mr.rkey, 3000 - 1024};
  inject(build(tail, {}));
  ASSERT_EQ(replies.size(), 5u);
  EXPECT_EQ(replies[3].bth.psn, kRqPsn + 1);
  EXPECT_EQ(replies[3].bth.opcode, wire::kRcReadResponseFirst);
  EXPECT_EQ(replies[4].payload.size(), 3000u - 2048);
  // Asking for more than the original range is not a replay: dropped.
  wire::Packet more = req(wire::kRcReadRequest, kRqPsn + 1);
  more.reth = {mem.addr() + 1024, mem.mr.rkey, 4000};
  inject(build(more, {}));
  EXPECT_EQ(replies.size(), 5u);
  EXPECT_EQ(b.ctr().duplicate_reads_replayed, 1u);
}

// An ACK coalesced for the requests before a READ or an atomic leaves before its response
// and acknowledges those requests only: were it to carry the READ's PSN, the requester
// would take it for a response passed over (an implicit NAK, IBA 9.7.5.1.3) and ask again.
TEST_F(Responder, receive__ack_before_a_read_or_atomic_response_names_the_psn_before_it) {
  wire::Packet rd = req(wire::kRcReadRequest, kRqPsn + 1);
  rd.reth = {mem.addr(), mem.mr.rkey, 100};
  wire::Packet fa = req(wire::kRcFetchAdd, kRqPsn + 3);
  fa.atomic = {mem.addr() + 64, mem.mr.rkey, 1, 0};
  inject_batch({build(write_req(wire::kRcWriteOnly, kRqPsn, mem.addr() + 200, 8), bytes_of(8, 1)),
                build(rd, {}),
                build(write_req(wire::kRcWriteOnly, kRqPsn + 2, mem.addr() + 300, 8),
                      bytes_of(8, 2)),
                build(fa, {})});
  ASSERT_EQ(replies.size(), 4u);
  EXPECT_EQ(replies[0].bth.opcode, wire::kRcAck);
  EXPECT_EQ(replies[0].bth.psn, kRqPsn);
  EXPECT_EQ(replies[1].bth.opcode, wire::kRcReadResponseOnly);
  EXPECT_EQ(replies[1].bth.psn, kRqPsn + 1);
  EXPECT_EQ(replies[2].bth.opcode, wire::kRcAck);
  EXPECT_EQ(replies[2].bth.psn, kRqPsn + 2);
  EXPECT_EQ(replies[3].bth.opcode, wire::kRcAtomicAck);
  EXPECT_EQ(replies[3].bth.psn, kRqPsn + 3);
}

wire::Packet atomic_write_req(uint32_t psn, uint64_t va, uint32_t rkey, uint32_t len = 8) {
  wire::Packet p;
  p.bth.opcode = wire::kRcAtomicWrite;
  p.bth.psn = psn;
  p.bth.ack_req = true;
  p.reth = {va, rkey, len};
  return p;
}

// ATOMIC WRITE at the responder (rxe_resp.c's checks): written once, answered by a
// zero-length READ response; a duplicate is answered again and writes nothing.
TEST_F(Responder, receive__atomic_write_is_written_once_and_answered_like_a_read) {
  const std::vector<uint8_t> v{9, 8, 7, 6, 5, 4, 3, 2};
  inject(build(atomic_write_req(kRqPsn, mem.addr() + 16, mem.mr.rkey), v));
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(last_reply().bth.opcode, wire::kRcReadResponseOnly);
  EXPECT_EQ(last_reply().bth.psn, kRqPsn);
  EXPECT_EQ(last_reply().aeth.syndrome, 0x1f);
  EXPECT_EQ(last_reply().aeth.msn, 1u);
  EXPECT_TRUE(last_reply().payload.empty());
  EXPECT_EQ(std::memcmp(mem.data() + 16, v.data(), 8), 0);
  mem.bytes[16] = 0x42;
  inject(build(atomic_write_req(kRqPsn, mem.addr() + 16, mem.mr.rkey), v));
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_EQ(last_reply().bth.opcode, wire::kRcReadResponseOnly);
  EXPECT_EQ(last_reply().bth.psn, kRqPsn);
  EXPECT_EQ(mem.bytes[16], 0x42);  // not written again
  EXPECT_EQ(b.ctr().duplicate_atomics_replayed, 1u);
  EXPECT_EQ(b.ctr().rx_atomic, 2u);
  // The next request follows it in sequence.
  inject(build(write_req(wire::kRcWriteOnly, kRqPsn + 1, mem.addr(), 8), bytes_of(8, 3)));
  EXPECT_EQ(last_reply().bth.psn, kRqPsn + 1);
  EXPECT_EQ(last_reply().aeth.syndrome, 0x1f);
}

// Each refusal NAKs before a byte moves and ends the QP: misaligned (A19.4.2) or not exactly
// 8 bytes (oA19-28): Invalid Request; a bad R_Key, an MR or QP without remote write: Remote
// Access Error.
TEST_F(Responder, receive__atomic_write_refusals_nak_and_write_nothing) {
  Buffer& ro = b.reg(4096, kRemoteRead);
  struct Case {
    const char* name;
    uint64_t va;
    uint32_t rkey, len;
    size_t payload;
    uint32_t qp_access;
    uint8_t syndrome;
  } cases[] = {
      {"misaligned", mem.addr() + 4, mem.mr.rkey, 8, 8, kRemoteWrite, 0x61},
      {"RETH length 16", mem.addr(), mem.mr.rkey, 16, 8, kRemoteWrite, 0x61},
      {"payload 4", mem.addr(), mem.mr.rkey, 8, 4, kRemoteWrite, 0x61},
      {"bad rkey", mem.addr(), mem.mr.rkey ^ 0x100, 8, 8, kRemoteWrite, 0x62},
      {"past the MR", mem.addr() + 8192 - 4, mem.mr.rkey, 8, 8, kRemoteWrite, 0x62},
      {"MR without remote write", ro.addr(), ro.mr.rkey, 8, 8, kRemoteWrite, 0x62},
      {"QP without remote write", mem.addr(), mem.mr.rkey, 8, 8, kRemoteRead, 0x62},
  };
  Gid g;
  g.raw = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1};
  for (const Case& k : cases) {
    Qp* q = b.create_qp();
    ConnectOptions o;
    o.access = k.qp_access | kLocalWrite;
    Fabric::bring_up(b, q, g, kPeerQpn, 50, kRqPsn, o);
    wire::Packet p = atomic_write_req(kRqPsn, k.va, k.rkey, k.len);
    p.bth.dest_qp = b.dev->qp_num(q);
    reply_bytes.clear();
    inject(build(p, bytes_of(k.payload, 0xee)));
    ASSERT_EQ(replies.size(), 1u) << k.name;
    EXPECT_EQ(last_reply().bth.opcode, wire::kRcAck) << k.name;
    EXPECT_EQ(last_reply().aeth.syndrome, k.syndrome) << k.name;
    EXPECT_EQ(q->state(), QpState::kErr) << k.name;
    EXPECT_EQ(mem.bytes, before) << k.name;
  }
}

TEST_F(Responder, receive__send_without_receive_wqe_gets_rnr_nak) {
  inject(build(req(wire::kRcSendOnly, kRqPsn), bytes_of(10, 7)));
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(last_reply().aeth.syndrome, 0x20 | 1);  // RNR NAK with min_rnr_timer 1
  EXPECT_EQ(last_reply().bth.psn, kRqPsn);
  // The same PSN again, now with a receive posted: accepted.
  ASSERT_EQ(post_recv(b, qb, 3, {{mem.addr(), 64, mem.mr.lkey}}), 0);
  inject(build(req(wire::kRcSendOnly, kRqPsn), bytes_of(10, 7)));
  EXPECT_EQ(last_reply().aeth.syndrome, 0x1f);
  auto rc = b.poll();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].byte_len, 10u);
  EXPECT_EQ(rc[0].src_qp, kPeerQpn);
}

}  // namespace
}  // namespace vrnic::engine::testing
