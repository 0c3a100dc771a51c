// pcap records and PFC frames as bytes (pcap.h).
#include "wire/pcap.h"

#include <algorithm>
#include <cstring>

namespace vrnic::wire {
namespace {

void put32(std::vector<uint8_t>& out, uint32_t v) {
  uint8_t b[4];
  std::memcpy(b, &v, 4);  // host byte order, as the magic announces
  out.insert(out.end(), b, b + 4);
}

}  // namespace

std::vector<uint8_t> pcap_header(bool nanoseconds) {
  std::vector<uint8_t> h;
  put32(h, nanoseconds ? kPcapMagicNano : kPcapMagicMicro);
  const uint16_t version[2] = {2, 4};  // 2.4, each in host byte order
  const auto* v = reinterpret_cast<const uint8_t*>(version);
  h.insert(h.end(), v, v + 4);
  put32(h, 0);                      // thiszone
  put32(h, 0);                      // sigfigs
  put32(h, kPcapSnapLen);
  put32(h, 1);                      // LINKTYPE_ETHERNET
  return h;
}

void append_pcap_record(std::vector<uint8_t>& out, uint32_t sec, uint32_t frac,
                        std::span<const uint8_t> frame) {
  const auto orig = static_cast<uint32_t>(frame.size());
  const uint32_t incl = std::min(orig, kPcapSnapLen);
  put32(out, sec);
  put32(out, frac);
  put32(out, incl);
  put32(out, orig);
  out.insert(out.end(), frame.begin(), frame.begin() + incl);
}

std::vector<uint8_t> build_pfc_frame(const std::array<uint8_t, 6>& src_mac, uint8_t prio,
                                     uint16_t quanta) {
  std::vector<uint8_t> f(60, 0);
  const uint8_t dst[6] = {0x01, 0x80, 0xc2, 0x00, 0x00, 0x01};
  std::memcpy(f.data(), dst, 6);
  std::memcpy(f.data() + 6, src_mac.data(), 6);
  f[12] = 0x88, f[13] = 0x08;  // MAC control
  f[14] = 0x01, f[15] = 0x01;  // opcode: priority-based flow control
  f[16] = 0, f[17] = static_cast<uint8_t>(1u << (prio & 7));  // class-enable vector
  uint8_t* t = f.data() + 18 + 2 * (prio & 7);  // time[prio], big-endian
  t[0] = static_cast<uint8_t>(quanta >> 8);
  t[1] = static_cast<uint8_t>(quanta);
  return f;
}

}  // namespace vrnic::wire
