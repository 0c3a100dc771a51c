// Corruption tests on shared/vectors: every flipped bit the ICRC covers is rejected, masked ones are not.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <utility>
#include <vector>

#include "wire/frame.h"
#include "wire/headers.h"
#include "wire/icrc.h"
#include "wire/opcode.h"
#include "wire/vectors_reader.h"

namespace vrnic::wire {
namespace {

using namespace vrnic::wire::vector_files;

constexpr size_t kEth = 14;

// Is byte `i` of the IP packet (IP header, UDP header, BTH..) one the ICRC replaces with 1s?
// Returns the mask of the affected bits (A17.3.3).
uint8_t masked_bits(bool ipv6, size_t i) {
  const size_t ip = ipv6 ? 40 : 20;
  if (ipv6) {
    if (i == 0) return 0x0f;                 // low half of the traffic class
    if (i >= 1 && i <= 3) return 0xff;      // traffic class, flow label
    if (i == 7) return 0xff;                 // hop limit
  } else {
    if (i == 1 || i == 8 || i == 10 || i == 11) return 0xff;  // TOS, TTL, checksum
  }
  if (i == ip + 6 || i == ip + 7) return 0xff;  // UDP checksum
  if (i == ip + 8 + 4) return 0xff;             // BTH byte 4 (Resv8a / FECN, BECN)
  return 0;
}

// Every bit of the IP packet (headers, transport, ICRC), checked with the whole-packet ICRC:
// a flip in a masked field keeps the ICRC, any other flip changes or invalidates it.
TEST(VectorsFlip, compute_icrc_ip_packet__every_bit) {
  size_t flips = 0, masked = 0;
  for (const Vector& v : vectors()) {
    SCOPED_TRACE(v.json.at("name").str);
    const bool ipv6 = num(v.json, "ipv6") != 0;
    const std::vector<uint8_t> pkt(v.frame.begin() + kEth, v.frame.end());
    uint32_t good = 0;
    ASSERT_TRUE(compute_icrc_ip_packet(pkt, good));
    for (size_t i = 0; i + kIcrcSize < pkt.size(); ++i) {
      for (int b = 0; b < 8; ++b) {
        std::vector<uint8_t> bad = pkt;
        bad[i] ^= static_cast<uint8_t>(1 << b);
        uint32_t c = 0;
        const bool ok = compute_icrc_ip_packet(bad, c);
        ++flips;
        if (masked_bits(ipv6, i) & (1 << b)) {
          ++masked;
          ASSERT_TRUE(ok) << "byte " << i << " bit " << b;
          EXPECT_EQ(c, good) << "masked byte " << i << " bit " << b;
        } else {
          EXPECT_TRUE(!ok || c != good) << "byte " << i << " bit " << b;
        }
      }
    }
  }
  std::printf("[ flips ] %zu bits flipped in IP packets, %zu of them in masked fields\n", flips,
              masked);
  EXPECT_GT(masked, 0u);
}

// Every bit of the UDP payload (BTH .. ICRC) as a UDP receiver gets it. With the IPv4 ID
// known, every covered flip is rejected outright. With it unknown (the live path), the
// solver accepts a flip when the flip's CRC delta lies in the span of the ID-bit deltas
// (with DF set or clear). That depends only on the flip's distance from the ID field, so a
// given UDP-payload offset is either always or never explained away, whatever the packet:
// about 2 * 2^-16 of all offsets are (see docs/protocol.md).
TEST(VectorsFlip, verify_icrc__every_bit_of_the_udp_payload) {
  size_t flips = 0, accepted_given_id = 0, accepted_hidden_id = 0;
  std::set<std::pair<size_t, int>> accepted_at;  // (byte offset in the UDP payload, bit)
  for (const Vector& v : vectors()) {
    SCOPED_TRACE(v.json.at("name").str);
    IpUdpInfo ip;
    const auto udp = parse_frame(v.frame, ip);
    ASSERT_FALSE(udp.empty());
    IpUdpInfo known = ip;
    known.ip_id_known = true;
    IpUdpInfo given = ip;  // the right ID, but recovery allowed
    given.ip_id_known = false;
    IpUdpInfo hidden = given;
    hidden.ip_id = 0;
    for (size_t i = 0; i < udp.size(); ++i) {
      for (int b = 0; b < 8; ++b) {
        std::vector<uint8_t> bad(udp.begin(), udp.end());
        bad[i] ^= static_cast<uint8_t>(1 << b);
        Packet p;
        (void)parse_packet(bad, p);  // must not crash on any of them
        ++flips;
        if (i == 4) {  // BTH byte 4 is masked
          EXPECT_EQ(verify_icrc(known, bad), IcrcVerdict::kOk) << "byte 4 bit " << b;
          EXPECT_EQ(verify_icrc(hidden, bad), v.json.at("ip_id").num ? IcrcVerdict::kOkRecoveredIpId
                                                                     : IcrcVerdict::kOk);
          continue;
        }
        const auto transport = std::span(bad).first(bad.size() - kIcrcSize);
        ASSERT_NE(compute_icrc(ip, transport), stored_icrc(bad)) << "byte " << i << " bit " << b;
        ASSERT_EQ(verify_icrc(known, bad), IcrcVerdict::kBad) << "byte " << i << " bit " << b;
        const IcrcVerdict g = verify_icrc(given, bad);
        const IcrcVerdict h = verify_icrc(hidden, bad);
        ASSERT_NE(g, IcrcVerdict::kOk);
        ASSERT_NE(h, IcrcVerdict::kOk);
        if (ip.ipv6) {
          ASSERT_EQ(g, IcrcVerdict::kBad);
          ASSERT_EQ(h, IcrcVerdict::kBad);
        }
        // Whether the ID is given or hidden only moves the target within the ID span.
        ASSERT_EQ(g, h) << "byte " << i << " bit " << b;
        if (g != IcrcVerdict::kBad) {
          ++accepted_given_id;
          accepted_at.insert({i, b});
        }
        if (h != IcrcVerdict::kBad) ++accepted_hidden_id;
      }
    }
  }
  std::printf("[ flips ] %zu UDP payload bits flipped; accepted through ID recovery: %zu with the "
              "true ID given, %zu with the ID hidden, at %zu distinct offsets:",
              flips, accepted_given_id, accepted_hidden_id, accepted_at.size());
  for (const auto& [byte, bit] : accepted_at) std::printf(" byte %zu bit %d", byte, bit);
  std::printf("\n");
  RecordProperty("flips", static_cast<int>(flips));
  RecordProperty("accepted_given_id", static_cast<int>(accepted_given_id));
  RecordProperty("accepted_hidden_id", static_cast<int>(accepted_hidden_id));
  // The frames reach 288 bytes: 2304 offsets, so about 0.07 are expected to be explainable;
  // these vectors hit one (byte 173 bit 3, counted once per frame long enough to have it).
  EXPECT_LE(accepted_at.size(), 2u);
  EXPECT_LE(accepted_given_id, 12u);
}

// The offsets where recovery explains a single flipped bit, over a 4 KiB-MTU packet: a
// property of the distance to the ID field alone, so one long packet shows them all.
TEST(VectorsFlip, verify_icrc__explainable_offsets_are_rare) {
  IpUdpInfo ip;
  ip.src = {10, 0, 0, 1};
  ip.dst = {10, 0, 0, 2};
  ip.src_port = 0xc011;
  std::vector<uint8_t> pkt(kBthSize + 4096 + kIcrcSize, 0);
  Packet p;
  p.bth.opcode = kRcSendOnly;
  write_headers(p, pkt.data());
  const size_t transport = pkt.size() - kIcrcSize;
  store_icrc(compute_icrc(ip, std::span(pkt).first(transport)), pkt.data() + transport);
  ASSERT_EQ(verify_icrc(ip, pkt), IcrcVerdict::kOk);
  std::set<std::pair<size_t, int>> accepted_at;
  for (size_t i = 0; i < pkt.size(); ++i) {
    for (int b = 0; b < 8; ++b) {
      pkt[i] ^= static_cast<uint8_t>(1 << b);
      if (i != 4 && verify_icrc(ip, pkt) != IcrcVerdict::kBad) accepted_at.insert({i, b});
      pkt[i] ^= static_cast<uint8_t>(1 << b);
    }
  }
  std::printf("[ flips ] %zu of %zu offsets of a %zu-byte UDP payload are explainable as an ID:",
              accepted_at.size(), pkt.size() * 8, pkt.size());
  for (const auto& [byte, bit] : accepted_at) std::printf(" byte %zu bit %d", byte, bit);
  std::printf("\n");
  EXPECT_TRUE(accepted_at.count({173, 3}));  // the one the vectors show
  // Expected about 2 * 2^-16 * 32896 = 1.0; a broken solver would accept far more.
  EXPECT_LE(accepted_at.size(), 8u);
}

// A flip in the IPv4 ID or the DF bit is invisible to a UDP receiver, which recovers the
// original ID; a flip in the rest of the flags/fragment word is not explained that way.
TEST(VectorsFlip, verify_icrc__id_and_flags_flips_are_recovered) {
  for (const Vector& v : vectors()) {
    if (num(v.json, "ipv6")) continue;
    SCOPED_TRACE(v.json.at("name").str);
    IpUdpInfo ip;
    const auto udp = parse_frame(v.frame, ip);
    const uint16_t true_id = ip.ip_id;
    ip.ip_id_known = false;
    for (int b = 0; b < 16; ++b) {
      IpUdpInfo seen = ip;
      seen.ip_id = static_cast<uint16_t>(true_id ^ (1 << b));
      uint16_t id = 0;
      ASSERT_EQ(verify_icrc(seen, udp, &id), IcrcVerdict::kOkRecoveredIpId) << b;
      EXPECT_EQ(id, true_id);
    }
    IpUdpInfo no_df = ip;
    no_df.ip_flags_frag = 0;
    uint16_t id = 1;
    EXPECT_EQ(verify_icrc(no_df, udp, &id), IcrcVerdict::kOkRecoveredIpId);
    EXPECT_EQ(id, true_id);
    // MF or a fragment offset are not among the tried flags: no ID explains them (2^-15
    // chance aside, which these frames do not hit).
    IpUdpInfo frag = ip;
    frag.ip_id = 0;
    for (uint16_t f : {0x2000, 0x0001, 0x6000}) {
      // Build a frame whose ICRC covers these flags, then check it as a DF/no-DF receiver.
      IpUdpInfo sender = ip;
      sender.ip_flags_frag = f;
      std::vector<uint8_t> t(udp.begin(), udp.end());
      store_icrc(compute_icrc(sender, std::span(t).first(t.size() - kIcrcSize)),
                 t.data() + t.size() - kIcrcSize);
      EXPECT_EQ(verify_icrc(frag, t), IcrcVerdict::kBad) << f;
      sender.ip_id_known = true;
      EXPECT_EQ(verify_icrc(sender, t), IcrcVerdict::kOk) << f;
    }
  }
}

}  // namespace
}  // namespace vrnic::wire
