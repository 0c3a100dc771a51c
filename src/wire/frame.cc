// Ethernet II / IPv4 / IPv6 / UDP framing of RoCEv2 packets, for the capture writer and the vector tests.
#include "wire/frame.h"

#include <cstring>

#include "wire/bytes.h"

namespace vrnic::wire {
namespace {

constexpr size_t kEthSize = 14, kVlanTagSize = 4, kIpv4Size = 20, kIpv6Size = 40, kUdpSize = 8;
constexpr uint16_t kEtherIpv4 = 0x0800, kEtherIpv6 = 0x86dd, kEtherVlan = 0x8100;
constexpr uint8_t kProtoUdp = 17, kTtl = 64;

// RFC 1071 one's-complement sum, not yet folded or inverted.
uint32_t sum16(const uint8_t* p, size_t n, uint32_t acc = 0) {
  for (size_t i = 0; i + 1 < n; i += 2) acc += get16(p + i);
  if (n & 1) acc += static_cast<uint32_t>(p[n - 1]) << 8;
  return acc;
}
uint16_t fold(uint32_t acc) {
  while (acc >> 16) acc = (acc & 0xffff) + (acc >> 16);
  return static_cast<uint16_t>(acc);
}

// UDP over IPv6 pseudo-header sum (RFC 8200 8.1) plus the UDP header and data.
uint32_t udp6_sum(const uint8_t* ip6, const uint8_t* udp, size_t udp_len) {
  uint32_t acc = sum16(ip6 + 8, 32);  // source and destination addresses
  acc += static_cast<uint32_t>(udp_len >> 16) + static_cast<uint32_t>(udp_len & 0xffff);
  acc += kProtoUdp;
  return sum16(udp, udp_len, acc);
}

// A locally administered unicast MAC, 02:00:00:00:00:<last address byte>. The frames are
// only ever written to captures (the live transport is a UDP socket), where they must be
// well formed and match the vectors' convention; the IPs identify the hosts.
void mac_for(const IpUdpInfo& ip, const std::array<uint8_t, 16>& addr, uint8_t* out) {
  const uint8_t mac[6] = {0x02, 0, 0, 0, 0, addr[ip.ipv6 ? 15 : 3]};
  std::memcpy(out, mac, 6);
}

}  // namespace

size_t write_ip_header(const IpUdpInfo& ip, size_t udp_len, uint8_t tos, uint8_t* h) {
  if (ip.ipv6) {
    h[0] = static_cast<uint8_t>(0x60 | tos >> 4);
    h[1] = static_cast<uint8_t>(tos << 4);  // flow label 0
    h[2] = h[3] = 0;
    put16(h + 4, static_cast<uint16_t>(udp_len));
    h[6] = kProtoUdp;
    h[7] = kTtl;
    std::memcpy(h + 8, ip.src.data(), 16);
    std::memcpy(h + 24, ip.dst.data(), 16);
  } else {
    h[0] = 0x45;
    h[1] = tos;
    put16(h + 2, static_cast<uint16_t>(kIpv4Size + udp_len));
    put16(h + 4, ip.ip_id);
    put16(h + 6, ip.ip_flags_frag);
    h[8] = kTtl;
    h[9] = kProtoUdp;
    std::memcpy(h + 12, ip.src.data(), 4);
    std::memcpy(h + 16, ip.dst.data(), 4);
    put16(h + 10, 0);
    put16(h + 10, static_cast<uint16_t>(~fold(sum16(h, kIpv4Size))));
  }
  return ip.ipv6 ? kIpv6Size : kIpv4Size;
}

std::vector<uint8_t> build_frame(const IpUdpInfo& ip, std::span<const uint8_t> udp_payload,
                                 uint8_t tos) {
  const size_t udp_len = kUdpSize + udp_payload.size();
  const size_t ip_size = ip.ipv6 ? kIpv6Size : kIpv4Size;
  std::vector<uint8_t> f(kEthSize + ip_size + udp_len);
  uint8_t* p = f.data();
  mac_for(ip, ip.dst, p);
  mac_for(ip, ip.src, p + 6);
  put16(p + 12, ip.ipv6 ? kEtherIpv6 : kEtherIpv4);
  uint8_t* h = p + kEthSize;
  write_ip_header(ip, udp_len, tos, h);

  uint8_t* u = h + ip_size;
  put16(u, ip.src_port);
  put16(u + 2, ip.dst_port);
  put16(u + 4, static_cast<uint16_t>(udp_len));
  if (!udp_payload.empty()) std::memcpy(u + kUdpSize, udp_payload.data(), udp_payload.size());
  if (ip.ipv6) {
    // Mandatory over IPv6 (RFC 8200 8.1); a computed 0 is sent as 0xffff.
    uint16_t c = static_cast<uint16_t>(~fold(udp6_sum(h, u, udp_len)));
    put16(u + 6, c == 0 ? 0xffff : c);
  }  // IPv4: checksum 0, the ICRC protects the packet (RoCEv2 Annex A17)
  return f;
}

std::span<const uint8_t> parse_frame(std::span<const uint8_t> frame, IpUdpInfo& ip) {
  ip = IpUdpInfo{};
  if (frame.size() < kEthSize) return {};
  size_t off = kEthSize;
  uint16_t ether = get16(frame.data() + 12);
  if (ether == kEtherVlan) {  // one 802.1Q tag, as a capture on a VLAN shows
    if (frame.size() < kEthSize + kVlanTagSize) return {};
    ether = get16(frame.data() + 16);
    off += kVlanTagSize;
  }
  const uint8_t* h = frame.data() + off;
  const size_t avail = frame.size() - off;  // may include Ethernet padding after the packet
  size_t ip_size = 0, ip_total = 0;
  if (ether == kEtherIpv4) {
    // RoCEv2 sends no IPv4 options and no fragments; anything else is not ours.
    if (avail < kIpv4Size || h[0] != 0x45 || h[9] != kProtoUdp) return {};
    if ((get16(h + 6) & 0x3fff) != 0) return {};  // MF or a fragment offset
    if (fold(sum16(h, kIpv4Size)) != 0xffff) return {};
    ip_size = kIpv4Size;
    ip_total = get16(h + 2);
    ip.ip_id = get16(h + 4);
    ip.ip_flags_frag = get16(h + 6);
    std::memcpy(ip.src.data(), h + 12, 4);
    std::memcpy(ip.dst.data(), h + 16, 4);
  } else if (ether == kEtherIpv6) {
    if (avail < kIpv6Size || (h[0] >> 4) != 6 || h[6] != kProtoUdp) return {};
    ip.ipv6 = true;
    ip_size = kIpv6Size;
    ip_total = kIpv6Size + get16(h + 4);
    std::memcpy(ip.src.data(), h + 8, 16);
    std::memcpy(ip.dst.data(), h + 24, 16);
  } else {
    return {};
  }
  if (ip_total > avail || ip_total < ip_size + kUdpSize) return {};
  const uint8_t* u = h + ip_size;
  const size_t udp_len = get16(u + 4);
  if (udp_len != ip_total - ip_size) return {};
  // A zero checksum means none (IPv4, and IPv6 RoCEv2 peers that rely on the ICRC).
  const uint16_t csum = get16(u + 6);
  if (csum != 0) {
    const uint32_t acc = ip.ipv6 ? udp6_sum(h, u, udp_len)
                                 : sum16(h + 12, 8, kProtoUdp + static_cast<uint32_t>(udp_len)) +
                                       sum16(u, udp_len);
    if (fold(acc) != 0xffff) return {};
  }
  ip.src_port = get16(u);
  ip.dst_port = get16(u + 2);
  ip.ip_id_known = true;
  return frame.subspan(off + ip_size + kUdpSize, udp_len - kUdpSize);
}

}  // namespace vrnic::wire
