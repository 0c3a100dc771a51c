// IcrcPeers: a sender that sends IPv4 ID 0 is checked over all 32 bits once recognised;
// a NIC that numbers its packets keeps the check with the ID solved for.
#include "engine/icrc_peers.h"

#include <gtest/gtest.h>

#include <vector>

#include "wire/headers.h"
#include "wire/opcode.h"

namespace vrnic::engine {
namespace {

struct Sent {
  wire::IpUdpInfo ip;  // as the receiving socket sees it: ID unknown, reported as 0
  std::vector<uint8_t> bytes;
  WirePacket pkt() const {
    WirePacket w;
    w.ip = ip;
    w.data = bytes;
    return w;
  }
};

// A WRITE ONLY of 8 bytes from src, as sent with IPv4 identification ip_id.
Sent packet_from(uint8_t src, uint16_t ip_id, uint32_t psn) {
  wire::Packet p;
  p.bth.opcode = wire::kRcWriteOnly;
  p.bth.dest_qp = 0x11;
  p.bth.psn = psn;
  Sent s;
  size_t h = wire::header_size(p.bth.opcode);
  s.bytes.assign(h + 8 + 4, 0x5a);
  wire::write_headers(p, s.bytes.data());
  s.ip.src = {10, 0, 0, src};
  s.ip.dst = {10, 0, 0, 9};
  s.ip.src_port = 0xc001;
  wire::IpUdpInfo sender = s.ip;
  sender.ip_id = ip_id;
  wire::store_icrc(wire::compute_icrc(sender, {s.bytes.data(), s.bytes.size() - 4}),
                   s.bytes.data() + s.bytes.size() - 4);
  return s;
}

TEST(IcrcPeers, verify__unknown_sender_with_nonzero_id_is_recovered) {
  IcrcPeers peers;
  EXPECT_EQ(peers.verify(packet_from(1, 0x718c, 1).pkt()), wire::IcrcVerdict::kOkRecoveredIpId);
  EXPECT_FALSE(peers.is_zero_id_sender(packet_from(1, 0, 1).ip));
}

TEST(IcrcPeers, verify__unchecked__any_icrc_passes_and_no_sender_is_learned) {
  IcrcPeers peers;
  peers.set_checked(false);  // DeviceConfig::icrc false: a fabric that corrupts nothing
  Sent s = packet_from(3, 0, 1);
  s.bytes.back() ^= 0xff;  // a wrong ICRC
  EXPECT_EQ(peers.verify(s.pkt()), wire::IcrcVerdict::kOk);
  for (uint32_t i = 0; i < IcrcPeers::kZeroIdAfter; ++i) peers.verify(packet_from(3, 0, i).pkt());
  EXPECT_FALSE(peers.is_zero_id_sender(s.ip));
}

TEST(IcrcPeers, verify__zero_id_sender_gets_the_full_check) {
  IcrcPeers peers;
  for (uint32_t i = 0; i < IcrcPeers::kZeroIdAfter; ++i)
    EXPECT_EQ(peers.verify(packet_from(2, 0, i).pkt()), wire::IcrcVerdict::kOk);
  EXPECT_TRUE(peers.is_zero_id_sender(packet_from(2, 0, 0).ip));
  // A packet whose ICRC only matches with some non-zero ID: from this sender, that is
  // corruption, and it is refused.
  EXPECT_EQ(peers.verify(packet_from(2, 0x1234, 99).pkt()), wire::IcrcVerdict::kBad);
  // Other senders are not affected.
  EXPECT_EQ(peers.verify(packet_from(3, 0x1234, 99).pkt()), wire::IcrcVerdict::kOkRecoveredIpId);
}

// Segments of one offload group segmented on the way (software GSO before a veth or a NIC
// without UDP segmentation offload) arrive as lone datagrams numbered 0, 1, 2, ...: a
// zero-ID sender's IDs below kGroupIds are accepted, with the full check on each candidate;
// a corrupted segment is still refused.
TEST(IcrcPeers, verify__zero_id_sender_segments_arriving_alone__accepted) {
  IcrcPeers peers;
  for (uint32_t i = 0; i < IcrcPeers::kZeroIdAfter; ++i) peers.verify(packet_from(6, 0, i).pkt());
  ASSERT_TRUE(peers.is_zero_id_sender(packet_from(6, 0, 0).ip));
  for (uint16_t id : {uint16_t{1}, uint16_t{2}, uint16_t{63}})
    EXPECT_EQ(peers.verify(packet_from(6, id, 40 + id).pkt()), wire::IcrcVerdict::kOkRecoveredIpId)
        << id;
  EXPECT_EQ(peers.verify(packet_from(6, 64, 7).pkt()), wire::IcrcVerdict::kBad);
  Sent bad = packet_from(6, 5, 8);
  bad.bytes[20] ^= 4;
  EXPECT_EQ(peers.verify(bad.pkt()), wire::IcrcVerdict::kBad);
}

TEST(IcrcPeers, verify__numbering_nic_never_becomes_zero_id) {
  IcrcPeers peers;
  // A NIC that counts its IDs: one of them is 0, the run of direct matches restarts.
  for (uint32_t i = 0; i < 3 * IcrcPeers::kZeroIdAfter; ++i) {
    uint16_t id = static_cast<uint16_t>(0xfff0 + i);  // wraps through 0 once
    auto v = peers.verify(packet_from(4, id, i).pkt());
    EXPECT_NE(v, wire::IcrcVerdict::kBad) << i;
  }
  EXPECT_FALSE(peers.is_zero_id_sender(packet_from(4, 0, 0).ip));
}

TEST(IcrcPeers, verify__ipv6_and_known_ids_are_checked_as_is) {
  IcrcPeers peers;
  Sent s = packet_from(5, 0x42, 1);
  s.ip.ip_id = 0x42;
  s.ip.ip_id_known = true;
  EXPECT_EQ(peers.verify(s.pkt()), wire::IcrcVerdict::kOk);
  s.bytes[20] ^= 4;
  EXPECT_EQ(peers.verify(s.pkt()), wire::IcrcVerdict::kBad);
}

}  // namespace
}  // namespace vrnic::engine
