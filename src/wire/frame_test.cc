// Tests of build_frame / parse_frame: layout, checksums, MACs and every rejection branch.
#include "wire/frame.h"

#include <gtest/gtest.h>

#include <vector>

namespace vrnic::wire {
namespace {

IpUdpInfo v4() {
  IpUdpInfo ip;
  ip.src = {192, 168, 7, 1};
  ip.dst = {192, 168, 7, 2};
  ip.src_port = 0xc123;
  ip.ip_id = 0x1234;
  return ip;
}

IpUdpInfo v6() {
  IpUdpInfo ip;
  ip.ipv6 = true;
  ip.src = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 0x21};
  ip.dst = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 0x22};
  ip.src_port = 0xc456;
  return ip;
}

std::vector<uint8_t> payload(size_t n) {
  std::vector<uint8_t> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(i * 13 + 5);
  return p;
}

// RFC 1071 sum of a byte range, folded; a valid checksummed range sums to 0xffff.
uint16_t ones_sum(const uint8_t* p, size_t n, uint32_t acc = 0) {
  for (size_t i = 0; i < n; i += 2) acc += (p[i] << 8) | (i + 1 < n ? p[i + 1] : 0);
  while (acc >> 16) acc = (acc & 0xffff) + (acc >> 16);
  return static_cast<uint16_t>(acc);
}

TEST(Frame, build_frame__ipv4_layout) {
  const auto pl = payload(33);
  const auto f = build_frame(v4(), pl, 0x02);
  ASSERT_EQ(f.size(), 14u + 20 + 8 + 33);
  const uint8_t macs[12] = {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1};
  EXPECT_TRUE(std::equal(macs, macs + 12, f.begin()));
  EXPECT_EQ(f[12], 0x08);
  EXPECT_EQ(f[13], 0x00);
  const uint8_t* ip = f.data() + 14;
  EXPECT_EQ(ip[0], 0x45);
  EXPECT_EQ(ip[1], 0x02);
  EXPECT_EQ((ip[2] << 8) | ip[3], 20 + 8 + 33);
  EXPECT_EQ((ip[4] << 8) | ip[5], 0x1234);
  EXPECT_EQ((ip[6] << 8) | ip[7], 0x4000);
  EXPECT_EQ(ip[8], 64);
  EXPECT_EQ(ip[9], 17);
  EXPECT_EQ(ones_sum(ip, 20), 0xffff);
  const uint8_t* udp = ip + 20;
  EXPECT_EQ((udp[0] << 8) | udp[1], 0xc123);
  EXPECT_EQ((udp[2] << 8) | udp[3], 4791);
  EXPECT_EQ((udp[4] << 8) | udp[5], 8 + 33);
  EXPECT_EQ(udp[6] | udp[7], 0);  // no UDP checksum over IPv4
  EXPECT_TRUE(std::equal(pl.begin(), pl.end(), udp + 8));
}

TEST(Frame, build_frame__ipv6_layout_and_udp_checksum) {
  const auto pl = payload(61);
  const auto f = build_frame(v6(), pl, 0xb8);
  ASSERT_EQ(f.size(), 14u + 40 + 8 + 61);
  EXPECT_EQ(f[5], 0x22);
  EXPECT_EQ(f[11], 0x21);
  EXPECT_EQ(f[12], 0x86);
  EXPECT_EQ(f[13], 0xdd);
  const uint8_t* ip = f.data() + 14;
  EXPECT_EQ(ip[0], 0x6b);  // version 6, traffic class 0xb8 split over two bytes
  EXPECT_EQ(ip[1], 0x80);
  EXPECT_EQ(ip[2] | ip[3], 0);
  EXPECT_EQ((ip[4] << 8) | ip[5], 8 + 61);
  EXPECT_EQ(ip[6], 17);
  EXPECT_EQ(ip[7], 64);
  // Pseudo-header (addresses, length, next header) + UDP header + data sums to 0xffff.
  const uint8_t* udp = ip + 40;
  uint32_t acc = 8 + 61 + 17;
  for (int i = 8; i < 40; i += 2) acc += (ip[i] << 8) | ip[i + 1];
  EXPECT_NE(udp[6] | udp[7], 0);
  EXPECT_EQ(ones_sum(udp, 8 + 61, acc), 0xffff);
}

TEST(Frame, parse_frame__round_trip) {
  for (const IpUdpInfo& in : {v4(), v6()}) {
    const auto pl = payload(100);
    const auto f = build_frame(in, pl);
    IpUdpInfo out;
    const auto u = parse_frame(f, out);
    ASSERT_EQ(u.size(), pl.size());
    EXPECT_TRUE(std::equal(pl.begin(), pl.end(), u.begin()));
    EXPECT_EQ(out.ipv6, in.ipv6);
    EXPECT_EQ(out.src, in.src);
    EXPECT_EQ(out.dst, in.dst);
    EXPECT_EQ(out.src_port, in.src_port);
    EXPECT_EQ(out.dst_port, in.dst_port);
    if (!in.ipv6) {
      EXPECT_EQ(out.ip_id, in.ip_id);
      EXPECT_EQ(out.ip_flags_frag, in.ip_flags_frag);
    }
    EXPECT_TRUE(out.ip_id_known);
  }
}

TEST(Frame, parse_frame__ethernet_padding_and_vlan) {
  const auto pl = payload(4);
  auto f = build_frame(v4(), pl);
  f.resize(60, 0);  // a short frame padded to the Ethernet minimum
  IpUdpInfo out;
  EXPECT_EQ(parse_frame(f, out).size(), 4u);
  // Insert an 802.1Q tag (VLAN 5).
  auto tagged = build_frame(v4(), pl);
  tagged.insert(tagged.begin() + 12, {0x81, 0x00, 0x00, 0x05});
  EXPECT_EQ(parse_frame(tagged, out).size(), 4u);
  EXPECT_TRUE(parse_frame(std::span(tagged).first(16), out).empty());
}

TEST(Frame, parse_frame__rejects) {
  const auto good4 = build_frame(v4(), payload(20));
  const auto good6 = build_frame(v6(), payload(20));
  IpUdpInfo out;
  auto expect_reject = [&](std::vector<uint8_t> f, const char* why) {
    EXPECT_TRUE(parse_frame(f, out).empty()) << why;
  };
  expect_reject({good4.begin(), good4.begin() + 13}, "short Ethernet");
  auto f = good4;
  f[12] = 0x08, f[13] = 0x06;
  expect_reject(f, "ARP");
  expect_reject({good4.begin(), good4.begin() + 30}, "short IPv4 header");
  f = good4;
  f[14] = 0x46;
  expect_reject(f, "IPv4 options");
  f = good4;
  f[14 + 9] = 6;
  expect_reject(f, "TCP");
  f = good4;
  f[14 + 6] |= 0x20;
  expect_reject(f, "more fragments");
  f = good4;
  f[14 + 7] = 1;
  expect_reject(f, "fragment offset");
  f = good4;
  f[14 + 8] = 1;  // TTL changed, checksum not updated
  expect_reject(f, "IPv4 header checksum");
  expect_reject({good4.begin(), good4.end() - 1}, "IP total length beyond frame");
  f = good4;
  f[14 + 20 + 5] += 1;
  expect_reject(f, "UDP length mismatch");
  f = good4;
  f[14 + 20 + 7] = 1;  // a non-zero but wrong UDP checksum
  expect_reject(f, "bad UDP checksum (IPv4)");
  f = good6;
  f.back() ^= 1;
  expect_reject(f, "bad UDP checksum (IPv6)");
  f = good6;
  f[14 + 6] = 0;  // hop-by-hop extension header
  expect_reject(f, "IPv6 extension header");
  f = good6;
  f[14] = 0x40;
  expect_reject(f, "IPv6 EtherType, version 4");
  expect_reject({good6.begin(), good6.begin() + 50}, "short IPv6 header");
}

TEST(Frame, parse_frame__zero_udp_checksum_on_ipv6_is_accepted) {
  // RoCEv2 peers may leave the UDP checksum 0 over IPv6 and rely on the ICRC.
  auto f = build_frame(v6(), payload(8));
  f[14 + 40 + 6] = f[14 + 40 + 7] = 0;
  IpUdpInfo out;
  EXPECT_EQ(parse_frame(f, out).size(), 8u);
}

}  // namespace
}  // namespace vrnic::wire
