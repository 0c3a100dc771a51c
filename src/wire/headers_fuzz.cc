// libFuzzer harness: parse_packet, verify_icrc and parse_frame on arbitrary bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "wire/frame.h"
#include "wire/headers.h"
#include "wire/icrc.h"
#include "wire/opcode.h"

using namespace vrnic::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A heap copy of exactly `size` bytes, so ASan flags any read past the span.
  std::vector<uint8_t> buf(data, data + size);
  const std::span<const uint8_t> in(buf);

  Packet p;
  if (parse_packet(in, p) == ParseError::kOk) {
    // Anything accepted must be self-consistent: payload inside the span, after the headers,
    // before pad and ICRC, and a rewrite of the headers gives back the same bytes.
    const size_t hdr = header_size(p.bth.opcode);
    if (hdr == 0 || p.payload.data() != buf.data() + hdr ||
        hdr + p.payload.size() + p.bth.pad_count + kIcrcSize != size) {
      std::abort();
    }
    std::vector<uint8_t> again(hdr);
    if (write_headers(p, again.data()) != hdr) std::abort();
    // Reserved bits (and the CNP's reserved bytes) are not kept; compare what is.
    const OpcodeInfo& info = opcode_info(p.bth.opcode);
    if (info.transport != Transport::kCnp && !info.has(kHasDeth)) {
      for (size_t i = 0; i < hdr; ++i) {
        uint8_t mask = 0xff;
        if (i == 4) mask = 0xc0;  // Resv6 after FECN/BECN
        if (i == 8) mask = 0x80;  // Resv7 after AckReq
        if (i == kBthSize && info.has(kHasXrceth)) mask = 0;  // the XRCETH's reserved byte
        if ((again[i] & mask) != (buf[i] & mask)) std::abort();
      }
    }
  }

  // verify_icrc on the raw bytes, for IPv4 with the ID unknown (the recovery path) and IPv6.
  IpUdpInfo ip;
  ip.src = {10, 0, 0, 1};
  ip.dst = {10, 0, 0, 2};
  uint16_t id = 0;
  const IcrcVerdict v = verify_icrc(ip, in, &id);
  if (v == IcrcVerdict::kOkRecoveredIpId) {
    // The recovered ID must really make the ICRC match.
    IpUdpInfo check = ip;
    check.ip_id = id;
    check.ip_id_known = true;
    IpUdpInfo check_no_df = check;
    check_no_df.ip_flags_frag = 0;
    if (verify_icrc(check, in) != IcrcVerdict::kOk && verify_icrc(check_no_df, in) != IcrcVerdict::kOk) {
      std::abort();
    }
  }
  ip.ipv6 = true;
  (void)verify_icrc(ip, in);

  // The same bytes as an Ethernet frame.
  IpUdpInfo fip;
  const auto udp = parse_frame(in, fip);
  if (!udp.empty()) {
    if (udp.data() < buf.data() || udp.data() + udp.size() > buf.data() + size) std::abort();
    uint32_t c = 0;
    (void)compute_icrc_ip_packet(in.subspan(14), c);
    (void)verify_icrc(fip, udp);
  }
  return 0;
}
