// Tests of parse_packet / write_headers: round trips for every opcode and every ParseError branch.
#include "wire/headers.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "wire/opcode.h"

namespace vrnic::wire {
namespace {

// A packet with distinct, non-zero values in every field the opcode carries.
Packet sample(uint8_t opcode) {
  Packet p;
  p.bth.opcode = opcode;
  p.bth.solicited = true;
  p.bth.mig_req = false;
  p.bth.pkey = 0x8001;
  p.bth.becn = true;
  p.bth.dest_qp = 0xabcdef;
  p.bth.ack_req = true;
  p.bth.psn = 0xfedcba;
  p.reth = {0x0102030405060708, 0x11223344, 0x55667788};
  p.aeth = {0x1f, 0x123456};
  p.atomic = {0x8877665544332211, 0xa1b2c3d4, 0x0f0e0d0c0b0a0908, 0x1020304050607080};
  p.atomic_ack.orig = 0xdeadbeefcafef00d;
  p.imm = htonl(0xcafef00d);
  p.ieth_rkey = 0x0badf00d;
  p.deth = {0x80010000, 0x000033};
  p.xrc_srqn = 0x5a5a5a;
  return p;
}

// BTH .. ICRC with `payload_len` payload bytes and the right pad; the ICRC bytes are zero.
std::vector<uint8_t> build(Packet p, size_t payload_len) {
  const OpcodeInfo& info = opcode_info(p.bth.opcode);
  const uint8_t pad = info.has(kHasPayload) ? pad_for(payload_len) : 0;
  p.bth.pad_count = pad;
  std::vector<uint8_t> out(header_size(p.bth.opcode) + payload_len + pad + kIcrcSize, 0);
  EXPECT_EQ(write_headers(p, out.data()), header_size(p.bth.opcode));
  for (size_t i = 0; i < payload_len; ++i) out[header_size(p.bth.opcode) + i] = uint8_t(i * 7 + 1);
  return out;
}

void expect_fields_equal(const Packet& a, const Packet& b, const OpcodeInfo& info) {
  EXPECT_EQ(a.bth.opcode, b.bth.opcode);
  EXPECT_EQ(a.bth.solicited, b.bth.solicited);
  EXPECT_EQ(a.bth.mig_req, b.bth.mig_req);
  EXPECT_EQ(a.bth.tver, b.bth.tver);
  EXPECT_EQ(a.bth.pkey, b.bth.pkey);
  EXPECT_EQ(a.bth.fecn, b.bth.fecn);
  EXPECT_EQ(a.bth.becn, b.bth.becn);
  EXPECT_EQ(a.bth.dest_qp, b.bth.dest_qp);
  EXPECT_EQ(a.bth.ack_req, b.bth.ack_req);
  EXPECT_EQ(a.bth.psn, b.bth.psn);
  auto want = [&](uint16_t f) { return info.has(f); };
  // Headers the opcode does not carry must come back zero, not stale.
  EXPECT_EQ(b.reth.va, want(kHasReth) ? a.reth.va : 0);
  EXPECT_EQ(b.reth.rkey, want(kHasReth) ? a.reth.rkey : 0);
  EXPECT_EQ(b.reth.dma_len, want(kHasReth) ? a.reth.dma_len : 0);
  EXPECT_EQ(b.aeth.syndrome, want(kHasAeth) ? a.aeth.syndrome : 0);
  EXPECT_EQ(b.aeth.msn, want(kHasAeth) ? a.aeth.msn : 0);
  EXPECT_EQ(b.atomic.va, want(kHasAtomicEth) ? a.atomic.va : 0);
  EXPECT_EQ(b.atomic.rkey, want(kHasAtomicEth) ? a.atomic.rkey : 0);
  EXPECT_EQ(b.atomic.swap_add, want(kHasAtomicEth) ? a.atomic.swap_add : 0);
  EXPECT_EQ(b.atomic.compare, want(kHasAtomicEth) ? a.atomic.compare : 0);
  EXPECT_EQ(b.atomic_ack.orig, want(kHasAtomicAckEth) ? a.atomic_ack.orig : 0);
  EXPECT_EQ(b.imm, want(kHasImm) ? a.imm : 0);
  EXPECT_EQ(b.ieth_rkey, want(kHasIeth) ? a.ieth_rkey : 0);
  EXPECT_EQ(b.deth.qkey, want(kHasDeth) ? a.deth.qkey : 0);
  EXPECT_EQ(b.deth.src_qp, want(kHasDeth) ? a.deth.src_qp : 0);
  EXPECT_EQ(b.xrc_srqn, want(kHasXrceth) ? a.xrc_srqn : 0);
}

TEST(Headers, parse_packet__round_trip_every_opcode) {
  int tested = 0;
  for (int op = 0; op < 256; ++op) {
    const OpcodeInfo& info = opcode_info(static_cast<uint8_t>(op));
    if (!info.valid) continue;
    ++tested;
    for (size_t len : {0, 1, 2, 3, 4, 5, 255, 1024}) {
      if (!info.has(kHasPayload) && len != 0) continue;
      const Packet in = sample(static_cast<uint8_t>(op));
      const std::vector<uint8_t> bytes = build(in, len);
      Packet out;
      ASSERT_EQ(parse_packet(bytes, out), ParseError::kOk) << info.name << " len " << len;
      expect_fields_equal(in, out, info);
      EXPECT_EQ(out.bth.pad_count, info.has(kHasPayload) ? pad_for(len) : 0);
      ASSERT_EQ(out.payload.size(), len) << info.name;
      EXPECT_EQ(out.payload.data(), bytes.data() + header_size(static_cast<uint8_t>(op)));
      for (size_t i = 0; i < len; ++i) ASSERT_EQ(out.payload[i], uint8_t(i * 7 + 1));
      // Writing the parsed packet again gives the same header bytes.
      std::vector<uint8_t> again(header_size(static_cast<uint8_t>(op)));
      write_headers(out, again.data());
      EXPECT_TRUE(std::equal(again.begin(), again.end(), bytes.begin())) << info.name;
    }
  }
  EXPECT_EQ(tested, 62);
}

TEST(Headers, write_headers__bth_layout) {
  Packet p = sample(kRcSendOnly);
  p.bth.pad_count = 2;
  p.bth.fecn = true;
  uint8_t b[12];
  ASSERT_EQ(write_headers(p, b), 12u);
  const uint8_t want[12] = {0x04, 0xa0, 0x80, 0x01, 0xc0, 0xab, 0xcd, 0xef, 0x80, 0xfe, 0xdc, 0xba};
  EXPECT_EQ(std::memcmp(b, want, 12), 0);
}

TEST(Headers, write_headers__extended_header_order_and_fields) {
  // WRITE Only with Immediate: BTH, RETH, ImmDt.
  Packet p = sample(kRcWriteOnlyImm);
  uint8_t b[32];
  ASSERT_EQ(write_headers(p, b), 32u);
  const uint8_t reth[16] = {1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88};
  EXPECT_EQ(std::memcmp(b + 12, reth, 16), 0);
  const uint8_t imm[4] = {0xca, 0xfe, 0xf0, 0x0d};
  EXPECT_EQ(std::memcmp(b + 28, imm, 4), 0);
  // UD SEND Only with Immediate: BTH, DETH (Q_Key, reserved, source QP), ImmDt.
  p = sample(kUdSendOnlyImm);
  uint8_t u[24];
  ASSERT_EQ(write_headers(p, u), 24u);
  const uint8_t deth[8] = {0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x33};
  EXPECT_EQ(std::memcmp(u + 12, deth, 8), 0);
  EXPECT_EQ(std::memcmp(u + 20, imm, 4), 0);
  // ATOMIC ACK: BTH, AETH, AtomicAckETH.
  p = sample(kRcAtomicAck);
  uint8_t a[24];
  ASSERT_EQ(write_headers(p, a), 24u);
  const uint8_t aeth_orig[12] = {0x1f, 0x12, 0x34, 0x56, 0xde, 0xad, 0xbe, 0xef,
                                 0xca, 0xfe, 0xf0, 0x0d};
  EXPECT_EQ(std::memcmp(a + 12, aeth_orig, 12), 0);
  // ATOMIC WRITE (IBA 1.5 Annex A19, opcode 0x1d): BTH, RETH, then the 8-byte payload.
  p = sample(kRcAtomicWrite);
  uint8_t w[28];
  ASSERT_EQ(write_headers(p, w), 28u);
  EXPECT_EQ(w[0], 0x1d);
  EXPECT_EQ(std::memcmp(w + 12, reth, 16), 0);
}

TEST(Headers, write_headers__cnp_reserved_bytes_zero) {
  Packet p = sample(kCnp);
  uint8_t b[28];
  std::memset(b, 0xee, sizeof(b));
  ASSERT_EQ(write_headers(p, b), 28u);
  for (int i = 12; i < 28; ++i) EXPECT_EQ(b[i], 0) << i;
}

TEST(Headers, write_headers__unknown_opcode_writes_nothing) {
  Packet p = sample(0x15);
  uint8_t b[4] = {9, 9, 9, 9};
  EXPECT_EQ(write_headers(p, b), 0u);
  EXPECT_EQ(b[0], 9);
  EXPECT_EQ(header_size(0x15), 0u);
}

TEST(Headers, parse_packet__truncated_bth) {
  const std::vector<uint8_t> bytes = build(sample(kRcSendOnly), 8);
  Packet out;
  for (size_t n = 0; n < kBthSize; ++n) {
    EXPECT_EQ(parse_packet(std::span(bytes).first(n), out), ParseError::kTruncated) << n;
  }
}

TEST(Headers, parse_packet__truncation_at_every_length_every_opcode) {
  // Shorter than headers + ICRC is kTruncated; anything the parser accepts must have its
  // payload inside the span.
  for (int op = 0; op < 256; ++op) {
    const OpcodeInfo& info = opcode_info(static_cast<uint8_t>(op));
    if (!info.valid) continue;
    const std::vector<uint8_t> bytes = build(sample(uint8_t(op)), info.has(kHasPayload) ? 13 : 0);
    for (size_t n = 0; n < bytes.size(); ++n) {
      // A heap copy of exactly n bytes, so ASan sees any read past the span.
      std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + n);
      Packet out;
      const ParseError e = parse_packet(cut, out);
      if (n < size_t{info.header_size} + kIcrcSize) {
        EXPECT_EQ(e, ParseError::kTruncated) << info.name << " n=" << n;
      } else {
        // Headers present but the padded payload cut short: rejected when misaligned or
        // shorter than the pad; an aligned cut looks like a shorter packet, which only the
        // ICRC can tell, and its payload must still end before the pad and the ICRC.
        const size_t rest = n - info.header_size - kIcrcSize;
        if (rest % 4 == 0 && rest >= 3) {
          ASSERT_EQ(e, ParseError::kOk) << info.name << " n=" << n;
          EXPECT_EQ(out.payload.data(), cut.data() + info.header_size);
          EXPECT_EQ(out.payload.size(), rest - 3);
        } else {
          EXPECT_EQ(e, ParseError::kBadPadCount) << info.name << " n=" << n;
        }
      }
    }
  }
}

TEST(Headers, parse_packet__bad_version) {
  std::vector<uint8_t> bytes = build(sample(kRcSendOnly), 4);
  for (uint8_t tver = 1; tver < 16; ++tver) {
    bytes[1] = static_cast<uint8_t>((bytes[1] & 0xf0) | tver);
    Packet out;
    EXPECT_EQ(parse_packet(bytes, out), ParseError::kBadVersion) << int(tver);
  }
}

TEST(Headers, parse_packet__unknown_opcode) {
  std::vector<uint8_t> bytes = build(sample(kRcSendOnly), 4);
  for (int op = 0; op < 256; ++op) {
    if (opcode_info(static_cast<uint8_t>(op)).valid) continue;
    bytes[0] = static_cast<uint8_t>(op);
    Packet out;
    EXPECT_EQ(parse_packet(bytes, out), ParseError::kUnknownOpcode) << op;
  }
}

TEST(Headers, parse_packet__pad_without_payload) {
  // An ACK (no payload allowed) with pad count 2 and 2 bytes before the ICRC.
  std::vector<uint8_t> bytes = build(sample(kRcAck), 0);
  bytes[1] |= 2 << 4;
  Packet out;
  EXPECT_EQ(parse_packet(bytes, out), ParseError::kBadPadCount);
  bytes.insert(bytes.begin() + 16, {0, 0});
  EXPECT_EQ(parse_packet(bytes, out), ParseError::kBadPadCount);
}

TEST(Headers, parse_packet__pad_larger_than_bytes_present) {
  // SEND Only with no payload at all but pad count 3: the pad bytes are not there.
  std::vector<uint8_t> bytes = build(sample(kRcSendOnly), 0);
  bytes[1] |= 3 << 4;
  Packet out;
  EXPECT_EQ(parse_packet(bytes, out), ParseError::kBadPadCount);
}

TEST(Headers, parse_packet__misaligned_payload) {
  // 5 payload bytes with pad count 0: payload + pad is not a multiple of 4.
  Packet p = sample(kRcSendOnly);
  std::vector<uint8_t> bytes(12 + 5 + 4);
  write_headers(p, bytes.data());
  Packet out;
  EXPECT_EQ(parse_packet(bytes, out), ParseError::kBadPadCount);
  // With pad count 3 the same 8 bytes are 5 payload + 3 pad.
  bytes.insert(bytes.begin() + 17, {0, 0, 0});
  bytes[1] = static_cast<uint8_t>((bytes[1] & 0xcf) | 3 << 4);
  ASSERT_EQ(parse_packet(bytes, out), ParseError::kOk);
  EXPECT_EQ(out.payload.size(), 5u);
}

TEST(Headers, parse_packet__payload_not_allowed) {
  for (uint8_t op : {kRcAck, kRcReadRequest, kRcCompareSwap, kRcAtomicAck, kCnp}) {
    std::vector<uint8_t> bytes = build(sample(op), 0);
    bytes.insert(bytes.begin() + header_size(op), {1, 2, 3, 4});
    Packet out;
    EXPECT_EQ(parse_packet(bytes, out), ParseError::kPayloadNotAllowed) << int(op);
  }
}

TEST(Headers, parse_packet__resets_output_on_error) {
  Packet out = sample(kRcWriteFirst);
  const uint8_t junk[3] = {1, 2, 3};
  EXPECT_EQ(parse_packet(junk, out), ParseError::kTruncated);
  EXPECT_EQ(out.reth.va, 0u);
  EXPECT_TRUE(out.payload.empty());
}

TEST(Headers, parse_packet__cnp_ignores_reserved_bytes) {
  std::vector<uint8_t> bytes = build(sample(kCnp), 0);
  for (int i = 12; i < 28; ++i) bytes[i] = 0x5a;
  Packet out;
  ASSERT_EQ(parse_packet(bytes, out), ParseError::kOk);
  EXPECT_TRUE(out.payload.empty());
  EXPECT_TRUE(out.bth.becn);
}

TEST(Headers, to_string__every_error) {
  EXPECT_STREQ(to_string(ParseError::kOk), "ok");
  EXPECT_STREQ(to_string(ParseError::kTruncated), "truncated");
  EXPECT_STREQ(to_string(ParseError::kBadVersion), "bad transport version");
  EXPECT_STREQ(to_string(ParseError::kUnknownOpcode), "unknown opcode");
  EXPECT_STREQ(to_string(ParseError::kBadPadCount), "bad pad count");
  EXPECT_STREQ(to_string(ParseError::kPayloadNotAllowed), "payload not allowed");
  EXPECT_STREQ(to_string(static_cast<ParseError>(99)), "?");
}

TEST(Headers, pad_for__values) {
  EXPECT_EQ(pad_for(0), 0);
  EXPECT_EQ(pad_for(1), 3);
  EXPECT_EQ(pad_for(2), 2);
  EXPECT_EQ(pad_for(3), 1);
  EXPECT_EQ(pad_for(4), 0);
  EXPECT_EQ(pad_for(4097), 3);
}

}  // namespace
}  // namespace vrnic::wire
