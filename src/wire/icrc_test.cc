// Tests of the ICRC: coverage and masking, storage order, verify_icrc and the IPv4 ID solver.
#include "wire/icrc.h"

#include <gtest/gtest.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <zlib.h>

#include <random>
#include <vector>

#include "wire/frame.h"
#include "wire/headers.h"
#include "wire/opcode.h"

namespace vrnic::wire {
namespace {

IpUdpInfo v4(uint16_t id = 0) {
  IpUdpInfo ip;
  ip.src = {10, 1, 2, 3};
  ip.dst = {10, 4, 5, 6};
  ip.src_port = 0xd00d;
  ip.ip_id = id;
  return ip;
}

IpUdpInfo v6() {
  IpUdpInfo ip;
  ip.ipv6 = true;
  ip.src = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7};
  ip.dst = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9};
  ip.src_port = 0xc001;
  return ip;
}

// A SEND Only with `n` payload bytes, padded, with a correct ICRC for `ip`.
std::vector<uint8_t> packet(const IpUdpInfo& ip, size_t n, uint32_t seed = 1) {
  Packet p;
  p.bth.opcode = kRcSendOnly;
  p.bth.dest_qp = 0x12;
  p.bth.psn = seed;
  p.bth.pad_count = pad_for(n);
  std::vector<uint8_t> u(kBthSize + n + p.bth.pad_count + kIcrcSize, 0);
  write_headers(p, u.data());
  std::mt19937 rng(seed);
  for (size_t i = 0; i < n; ++i) u[kBthSize + i] = static_cast<uint8_t>(rng());
  const size_t t = u.size() - kIcrcSize;
  store_icrc(compute_icrc(ip, std::span(u).first(t)), u.data() + t);
  return u;
}

TEST(Icrc, store_icrc__little_endian) {
  uint8_t b[4];
  store_icrc(0x11223344, b);
  EXPECT_EQ(b[0], 0x44);
  EXPECT_EQ(b[3], 0x11);
  const uint8_t pkt[6] = {9, 9, 0x44, 0x33, 0x22, 0x11};
  EXPECT_EQ(stored_icrc(pkt), 0x11223344u);
  EXPECT_EQ(stored_icrc(std::span(pkt).first(3)), 0u);
}

TEST(Icrc, compute_icrc__matches_whole_packet_form) {
  for (const IpUdpInfo& ip : {v4(), v4(0xbeef), v6()}) {
    for (size_t n : {0, 1, 3, 64, 1000}) {
      const auto u = packet(ip, n);
      const auto f = build_frame(ip, u, 0x02);
      uint32_t c = 0;
      ASSERT_TRUE(compute_icrc_ip_packet(std::span(f).subspan(14), c));
      EXPECT_EQ(c, stored_icrc(u)) << n;
    }
  }
}

// The ICRC as IBA A17.3.3 defines it, built byte by byte and run through zlib's CRC-32: 8 bytes
// of 1s, the IPv4 header with TOS, TTL and checksum as 1s, the UDP header with its checksum
// as 1s, the transport packet with BTH byte 4 as 1s.
uint32_t reference_icrc_v4(const IpUdpInfo& ip, std::span<const uint8_t> t) {
  const size_t udp_len = 8 + t.size() + kIcrcSize, ip_len = 20 + udp_len;
  std::vector<uint8_t> b(8, 0xff);
  const uint8_t ip_hdr[20] = {0x45, 0xff, uint8_t(ip_len >> 8), uint8_t(ip_len),
                              uint8_t(ip.ip_id >> 8), uint8_t(ip.ip_id),
                              uint8_t(ip.ip_flags_frag >> 8), uint8_t(ip.ip_flags_frag), 0xff, 17,
                              0xff, 0xff, ip.src[0], ip.src[1], ip.src[2], ip.src[3], ip.dst[0],
                              ip.dst[1], ip.dst[2], ip.dst[3]};
  b.insert(b.end(), ip_hdr, ip_hdr + 20);
  const uint8_t udp[8] = {uint8_t(ip.src_port >> 8), uint8_t(ip.src_port),
                          uint8_t(ip.dst_port >> 8), uint8_t(ip.dst_port), uint8_t(udp_len >> 8),
                          uint8_t(udp_len), 0xff, 0xff};
  b.insert(b.end(), udp, udp + 8);
  const size_t at = b.size();
  b.insert(b.end(), t.begin(), t.end());
  b[at + 4] = 0xff;
  return static_cast<uint32_t>(crc32_z(0, b.data(), b.size()));
}

// Short packets are CRC'd in one call with the headers, longer ones in two: both forms, and
// the bound between them, give the ICRC of the definition.
TEST(Icrc, compute_icrc__equals_the_definition_on_both_sides_of_the_one_call_bound) {
  for (const IpUdpInfo& ip : {v4(), v4(0xbeef)}) {
    for (size_t n = 0; n <= 160; ++n) {
      const auto u = packet(ip, n, static_cast<uint32_t>(n + 1));
      const auto t = std::span(u).first(u.size() - kIcrcSize);
      EXPECT_EQ(compute_icrc(ip, t), reference_icrc_v4(ip, t)) << n;
    }
  }
}

TEST(Icrc, compute_icrc__masked_fields_do_not_matter) {
  for (const IpUdpInfo& ip : {v4(), v6()}) {
    const auto u = packet(ip, 40);
    auto f = build_frame(ip, u, 0x00);
    uint32_t base = 0;
    ASSERT_TRUE(compute_icrc_ip_packet(std::span(f).subspan(14), base));
    // Rebuild with other DSCP/ECN; then change TTL / hop limit and the UDP checksum by hand.
    auto g = build_frame(ip, u, 0xfb);
    g[14 + (ip.ipv6 ? 7 : 8)] = 3;
    g[14 + (ip.ipv6 ? 40 : 20) + 6] ^= 0x5a;
    uint32_t other = 0;
    ASSERT_TRUE(compute_icrc_ip_packet(std::span(g).subspan(14), other));
    EXPECT_EQ(base, other);
  }
}

TEST(Icrc, compute_icrc__covers_addresses_ports_and_id) {
  const auto u = packet(v4(), 16);
  const auto t = std::span(u).first(u.size() - kIcrcSize);
  const uint32_t base = compute_icrc(v4(), t);
  IpUdpInfo ip = v4();
  ip.src[3] ^= 1;
  EXPECT_NE(compute_icrc(ip, t), base);
  ip = v4();
  ip.dst_port = 4792;
  EXPECT_NE(compute_icrc(ip, t), base);
  ip = v4();
  ip.ip_flags_frag = 0;
  EXPECT_NE(compute_icrc(ip, t), base);
  EXPECT_NE(compute_icrc(v4(1), t), base);
  // IPv6 covers all 16 address bytes; IPv4 only the first 4.
  ip = v4();
  ip.src[10] = 0x77;
  EXPECT_EQ(compute_icrc(ip, t), base);
  IpUdpInfo six = v6();
  const uint32_t b6 = compute_icrc(six, t);
  six.src[10] = 0x77;
  EXPECT_NE(compute_icrc(six, t), b6);
}

#if defined(__x86_64__)
// XINUSE (XGETBV with ECX 1): which parts of the extended state are in use, where the CPU can
// say (CPUID 0Dh.1 EAX bit 2); false if it cannot.
bool extended_state_in_use(uint64_t& in_use) {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(0xd, 1, &a, &b, &c, &d) || !(a & 4)) return false;
  uint32_t lo, hi;
  asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
  in_use = (uint64_t{hi} << 32) | lo;
  return true;
}

// The ICRC of a 4 KiB packet takes ISA-L's widest CRC (AVX-512 where the CPU has it), which
// returns with the upper halves of the vector registers in use; compute_icrc must not leave
// them so, or every SSE instruction after it runs in the mixed state (docs/live.md).
TEST(Icrc, compute_icrc__leaves_no_upper_vector_state) {
  uint64_t in_use = 0;
  if (!extended_state_in_use(in_use)) GTEST_SKIP() << "this CPU has no XGETBV 1 (XINUSE)";
  std::vector<uint8_t> transport(4096, 0x5a);
  const uint32_t icrc = compute_icrc(v4(), transport);
  ASSERT_TRUE(extended_state_in_use(in_use));
  constexpr uint64_t kYmmHi128 = 1u << 2, kZmmHi256 = 1u << 6;
  EXPECT_EQ(in_use & (kYmmHi128 | kZmmHi256), 0u) << std::hex << in_use;
  EXPECT_EQ(compute_icrc(v4(), transport), icrc);
}
#endif

TEST(Icrc, compute_icrc_ip_packet__rejects_non_udp_and_short) {
  const auto u = packet(v4(), 8);
  auto f = build_frame(v4(), u);
  std::vector<uint8_t> ip(f.begin() + 14, f.end());
  uint32_t c = 0;
  EXPECT_FALSE(compute_icrc_ip_packet({}, c));
  auto bad = ip;
  bad[9] = 6;  // TCP
  EXPECT_FALSE(compute_icrc_ip_packet(bad, c));
  bad = ip;
  bad[0] = 0x55;  // version 5
  EXPECT_FALSE(compute_icrc_ip_packet(bad, c));
  bad = ip;
  bad[0] = 0x44;  // IHL 4
  EXPECT_FALSE(compute_icrc_ip_packet(bad, c));
  EXPECT_FALSE(compute_icrc_ip_packet(std::span(ip).first(ip.size() - 1), c));  // total > size
  EXPECT_FALSE(compute_icrc_ip_packet(std::span(ip).first(19), c));
  bad = ip;
  bad[2] = 0;
  bad[3] = 20 + 8 + 3;  // too short for an ICRC
  EXPECT_FALSE(compute_icrc_ip_packet(bad, c));
  // Trailing bytes beyond the IP total length (Ethernet padding) are ignored.
  auto padded = ip;
  padded.resize(ip.size() + 6, 0xaa);
  ASSERT_TRUE(compute_icrc_ip_packet(padded, c));
  EXPECT_EQ(c, stored_icrc(u));
}

TEST(Icrc, verify_icrc__ok_and_bad) {
  for (const IpUdpInfo& ip : {v4(), v6()}) {
    auto u = packet(ip, 100);
    EXPECT_EQ(verify_icrc(ip, u), IcrcVerdict::kOk);
    u[20] ^= 0x10;
    EXPECT_EQ(verify_icrc(ip, u), IcrcVerdict::kBad);
  }
  const uint8_t tiny[3] = {1, 2, 3};
  EXPECT_EQ(verify_icrc(v4(), tiny), IcrcVerdict::kBad);
}

TEST(Icrc, verify_icrc__recovers_any_ipv4_id) {
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    const uint16_t id = static_cast<uint16_t>(rng());
    IpUdpInfo sender = v4(id);
    sender.ip_flags_frag = (i & 1) ? 0x4000 : 0x0000;
    const auto u = packet(sender, rng() % 2000, static_cast<uint32_t>(i));
    IpUdpInfo receiver = v4(0);  // a UDP socket: ID unseen, DF assumed
    uint16_t got = 0;
    const IcrcVerdict want = id == 0 && sender.ip_flags_frag == 0x4000
                                 ? IcrcVerdict::kOk
                                 : IcrcVerdict::kOkRecoveredIpId;
    ASSERT_EQ(verify_icrc(receiver, u, &got), want) << i;
    if (want == IcrcVerdict::kOkRecoveredIpId) {
      EXPECT_EQ(got, id) << i;
    }
    // Solving is optional output: no pointer is fine.
    EXPECT_EQ(verify_icrc(receiver, u), want);
  }
}

TEST(Icrc, verify_icrc__recovered_id_is_the_only_one) {
  // Brute force over all 2^16 IDs with DF set: exactly the true one matches.
  const IpUdpInfo sender = v4(0x718c);
  const auto u = packet(sender, 20);
  const auto t = std::span(u).first(u.size() - kIcrcSize);
  int matches = 0;
  for (uint32_t id = 0; id < 65536; ++id) {
    matches += compute_icrc(v4(static_cast<uint16_t>(id)), t) == stored_icrc(u);
  }
  EXPECT_EQ(matches, 1);
  uint16_t got = 0;
  EXPECT_EQ(verify_icrc(v4(0x1234), u, &got), IcrcVerdict::kOkRecoveredIpId);
  EXPECT_EQ(got, 0x718c);
}

TEST(Icrc, verify_icrc__no_recovery_when_id_known_or_ipv6) {
  const auto u = packet(v4(0x4242), 30);
  IpUdpInfo ip = v4(0);
  ip.ip_id_known = true;
  uint16_t got = 0xaaaa;
  EXPECT_EQ(verify_icrc(ip, u, &got), IcrcVerdict::kBad);
  EXPECT_EQ(got, 0xaaaa);  // untouched
  ip.ip_id = 0x4242;
  EXPECT_EQ(verify_icrc(ip, u), IcrcVerdict::kOk);
  // An IPv6 packet has no ID: a mismatch is final.
  auto w = packet(v6(), 30);
  w[12] ^= 1;
  EXPECT_EQ(verify_icrc(v6(), w, &got), IcrcVerdict::kBad);
}

TEST(Icrc, verify_icrc__fragment_flags_are_not_solved) {
  // Only DF set / clear are tried: a packet whose ICRC covered MF is rejected.
  IpUdpInfo sender = v4(0x0101);
  sender.ip_flags_frag = 0x2000;
  const auto u = packet(sender, 12);
  EXPECT_EQ(verify_icrc(v4(0), u), IcrcVerdict::kBad);
  sender.ip_id_known = true;
  EXPECT_EQ(verify_icrc(sender, u), IcrcVerdict::kOk);
}

}  // namespace
}  // namespace vrnic::wire

namespace vrnic::wire {
namespace {

TEST(Icrc, icrc_with_ip_id_change__equals_a_full_recompute) {
  for (size_t n : {0u, 8u, 256u, 1024u, 4096u}) {
    const auto u = packet(v4(0), n, static_cast<uint32_t>(n + 3));
    const auto transport = std::span<const uint8_t>(u).first(u.size() - kIcrcSize);
    const uint32_t at0 = compute_icrc(v4(0), transport);
    for (uint16_t id : {1, 2, 3, 17, 0x718c, 0xffff}) {
      EXPECT_EQ(icrc_with_ip_id_change(at0, transport.size(), id), compute_icrc(v4(id), transport))
          << n << " " << id;
    }
    EXPECT_EQ(icrc_with_ip_id_change(at0, transport.size(), 0), at0);
  }
}

TEST(Icrc, icrc_with_ip_id_change__interleaved_lengths_each_their_own) {
  // More lengths than the per-thread bases hold, revisited in turn: every answer is still
  // that length's (an entry replaced or found is never another length's).
  std::vector<std::vector<uint8_t>> packets;
  for (size_t n = 0; n < 12; ++n) packets.push_back(packet(v4(0), 100 * n + 4, uint32_t(n)));
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < packets.size(); i += (round == 1 ? 2 : 1)) {
      const auto transport =
          std::span<const uint8_t>(packets[i]).first(packets[i].size() - kIcrcSize);
      const uint32_t at0 = compute_icrc(v4(0), transport);
      EXPECT_EQ(icrc_with_ip_id_change(at0, transport.size(), 0x1234),
                compute_icrc(v4(0x1234), transport))
          << round << " " << i;
    }
  }
}

}  // namespace
}  // namespace vrnic::wire
