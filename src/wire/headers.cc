// Parse and build of the BTH and its extended headers; the parser is the datapath's first line of defence.
#include "wire/headers.h"

#include <cstring>

#include "wire/bytes.h"
#include "wire/opcode.h"

namespace vrnic::wire {
namespace {

// BTH byte 1: SE | M | PadCnt(2) | TVer(4). Byte 4 is Resv8a on RoCEv2, FECN | BECN on IB.
// Byte 8: AckReq | Resv7.
void read_bth(const uint8_t* p, Bth& b) {
  b.opcode = p[0];
  b.solicited = (p[1] & 0x80) != 0;
  b.mig_req = (p[1] & 0x40) != 0;
  b.pad_count = (p[1] >> 4) & 3;
  b.tver = p[1] & 0x0f;
  b.pkey = get16(p + 2);
  b.fecn = (p[4] & 0x80) != 0;
  b.becn = (p[4] & 0x40) != 0;
  b.dest_qp = get24(p + 5);
  b.ack_req = (p[8] & 0x80) != 0;
  b.psn = get24(p + 9);
}

void write_bth(const Bth& b, uint8_t* p) {
  p[0] = b.opcode;
  p[1] = static_cast<uint8_t>((b.solicited ? 0x80 : 0) | (b.mig_req ? 0x40 : 0) |
                              (b.pad_count & 3) << 4 | (b.tver & 0x0f));
  put16(p + 2, b.pkey);
  p[4] = static_cast<uint8_t>((b.fecn ? 0x80 : 0) | (b.becn ? 0x40 : 0));
  put24(p + 5, b.dest_qp);
  p[8] = b.ack_req ? 0x80 : 0;
  put24(p + 9, b.psn);
}

}  // namespace

const char* to_string(ParseError e) {
  switch (e) {
    case ParseError::kOk: return "ok";
    case ParseError::kTruncated: return "truncated";
    case ParseError::kBadVersion: return "bad transport version";
    case ParseError::kUnknownOpcode: return "unknown opcode";
    case ParseError::kBadPadCount: return "bad pad count";
    case ParseError::kPayloadNotAllowed: return "payload not allowed";
  }
  return "?";
}

size_t header_size(uint8_t opcode) {
  const OpcodeInfo& info = opcode_info(opcode);
  return info.valid ? info.header_size : 0;
}

// Extended headers follow the BTH in the order of IBA 9.2 (RDETH, DETH, XRCETH, RETH, AtomicETH,
// AETH, AtomicAckETH, ImmDt, IETH); the parser and the writer share that order.
bool parse_bth(std::span<const uint8_t> udp_payload, Bth& out) {
  if (udp_payload.size() < kBthSize) return false;
  read_bth(udp_payload.data(), out);
  return true;
}

ParseError parse_packet(std::span<const uint8_t> udp_payload, Packet& out) {
  out = Packet{};
  const size_t size = udp_payload.size();
  if (size < kBthSize) return ParseError::kTruncated;
  const uint8_t* p = udp_payload.data();
  read_bth(p, out.bth);
  // TVer 0 is the only transport header version (IBA 9.2.1); anything else is dropped.
  if (out.bth.tver != 0) return ParseError::kBadVersion;
  const OpcodeInfo& info = opcode_info(out.bth.opcode);
  if (!info.valid) return ParseError::kUnknownOpcode;
  if (size < static_cast<size_t>(info.header_size) + kIcrcSize) return ParseError::kTruncated;

  // Everything between the headers and the ICRC is payload followed by pad bytes.
  const size_t rest = size - info.header_size - kIcrcSize;
  const uint8_t pad = out.bth.pad_count;
  if (!info.has(kHasPayload)) {
    if (pad != 0) return ParseError::kBadPadCount;
    if (rest != 0) return ParseError::kPayloadNotAllowed;
  } else {
    // PadCnt brings payload + pad to a multiple of 4 (IBA 9.2): pad bytes must be present
    // and the padded length aligned, or the sender and we disagree on the payload size.
    if (pad > rest || (rest & 3) != 0) return ParseError::kBadPadCount;
  }

  const uint8_t* h = p + kBthSize;
  if (info.has(kHasDeth)) {
    out.deth.qkey = get32(h);
    out.deth.src_qp = get24(h + 5);
    h += kDethSize;
  }
  if (info.has(kHasXrceth)) {
    out.xrc_srqn = get24(h + 1);  // byte 0 reserved
    h += kXrcethSize;
  }
  if (info.has(kHasReth)) {
    out.reth.va = get64(h);
    out.reth.rkey = get32(h + 8);
    out.reth.dma_len = get32(h + 12);
    h += kRethSize;
  }
  if (info.has(kHasAtomicEth)) {
    out.atomic.va = get64(h);
    out.atomic.rkey = get32(h + 8);
    out.atomic.swap_add = get64(h + 12);
    out.atomic.compare = get64(h + 20);
    h += kAtomicEthSize;
  }
  if (info.has(kHasAeth)) {
    out.aeth.syndrome = h[0];
    out.aeth.msn = get24(h + 1);
    h += kAethSize;
  }
  if (info.has(kHasAtomicAckEth)) {
    out.atomic_ack.orig = get64(h);
    h += kAtomicAckEthSize;
  }
  if (info.has(kHasImm)) {
    std::memcpy(&out.imm, h, sizeof(out.imm));  // kept in network order, as ibv_wc.imm_data
    h += kImmDtSize;
  }
  if (info.has(kHasIeth)) {
    out.ieth_rkey = get32(h);
    h += kIethSize;
  }
  // The CNP's reserved bytes are ignored on receipt (Annex A17.9.3); header_size covers them.
  out.payload = udp_payload.subspan(info.header_size, rest - pad);
  return ParseError::kOk;
}

size_t write_headers(const Packet& pkt, uint8_t* out) {
  const OpcodeInfo& info = opcode_info(pkt.bth.opcode);
  if (!info.valid) return 0;
  write_bth(pkt.bth, out);
  uint8_t* h = out + kBthSize;
  if (info.has(kHasDeth)) {
    put32(h, pkt.deth.qkey);
    h[4] = 0;  // reserved
    put24(h + 5, pkt.deth.src_qp);
    h += kDethSize;
  }
  if (info.has(kHasXrceth)) {
    h[0] = 0;  // reserved
    put24(h + 1, pkt.xrc_srqn);
    h += kXrcethSize;
  }
  if (info.has(kHasReth)) {
    put64(h, pkt.reth.va);
    put32(h + 8, pkt.reth.rkey);
    put32(h + 12, pkt.reth.dma_len);
    h += kRethSize;
  }
  if (info.has(kHasAtomicEth)) {
    put64(h, pkt.atomic.va);
    put32(h + 8, pkt.atomic.rkey);
    put64(h + 12, pkt.atomic.swap_add);
    put64(h + 20, pkt.atomic.compare);
    h += kAtomicEthSize;
  }
  if (info.has(kHasAeth)) {
    h[0] = pkt.aeth.syndrome;
    put24(h + 1, pkt.aeth.msn);
    h += kAethSize;
  }
  if (info.has(kHasAtomicAckEth)) {
    put64(h, pkt.atomic_ack.orig);
    h += kAtomicAckEthSize;
  }
  if (info.has(kHasImm)) {
    std::memcpy(h, &pkt.imm, sizeof(pkt.imm));
    h += kImmDtSize;
  }
  if (info.has(kHasIeth)) {
    put32(h, pkt.ieth_rkey);
    h += kIethSize;
  }
  const size_t written = static_cast<size_t>(h - out);
  if (written < info.header_size) {  // the CNP's reserved bytes are sent as zero
    std::memset(h, 0, info.header_size - written);
  }
  return info.header_size;
}

}  // namespace vrnic::wire
