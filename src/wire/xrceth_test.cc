// XRC packets against bytes written out by hand from the IBA 9.2 layout: BTH, XRCETH (one
// reserved byte, the 24-bit XRC SRQ number), RETH, payload, ICRC; and the XRC ACK without XRCETH.
#include <gtest/gtest.h>

#include <vector>

#include "wire/headers.h"
#include "wire/icrc.h"
#include "wire/opcode.h"

namespace vrnic::wire {
namespace {

// XRC RDMA WRITE Only, 4 payload bytes, to QP 0x000123, PSN 0x000456, XRC SRQ 0x00002a.
const std::vector<uint8_t> kWriteOnly = {
    0xaa, 0x40, 0xff, 0xff,  // BTH: opcode, SE=0 M=1 Pad=0 TVer=0, P_Key
    0x00, 0x00, 0x01, 0x23,  // reserved, DestQP
    0x80, 0x00, 0x04, 0x56,  // AckReq, reserved, PSN
    0x00, 0x00, 0x00, 0x2a,  // XRCETH: reserved, XRC SRQ number
    0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x20, 0x00,  // RETH: VA
    0x00, 0x00, 0x12, 0x34,  // R_Key
    0x00, 0x00, 0x00, 0x04,  // DMA length
    0xde, 0xad, 0xbe, 0xef,  // payload
};

IpUdpInfo addresses() {
  IpUdpInfo ip;
  ip.src = {10, 0, 0, 1};
  ip.dst = {10, 0, 0, 2};
  ip.src_port = 0xc001;
  ip.ip_id_known = true;  // the check must not solve for an ID
  return ip;
}

TEST(Xrceth, write_headers__xrc_write_only_matches_hand_bytes) {
  Packet p;
  p.bth.opcode = 0xaa;
  p.bth.dest_qp = 0x123;
  p.bth.ack_req = true;
  p.bth.psn = 0x456;
  p.xrc_srqn = 0x2a;
  p.reth = {0x10002000, 0x1234, 4};
  std::vector<uint8_t> out(header_size(p.bth.opcode));
  ASSERT_EQ(write_headers(p, out.data()), 32u);
  EXPECT_EQ(out, std::vector<uint8_t>(kWriteOnly.begin(), kWriteOnly.begin() + 32));
}

TEST(Xrceth, parse_packet__xrc_write_only_with_icrc) {
  std::vector<uint8_t> pkt = kWriteOnly;
  pkt.resize(pkt.size() + kIcrcSize);
  const IpUdpInfo ip = addresses();
  store_icrc(compute_icrc(ip, {pkt.data(), kWriteOnly.size()}), pkt.data() + kWriteOnly.size());
  EXPECT_EQ(verify_icrc(ip, pkt), IcrcVerdict::kOk);
  Packet p;
  ASSERT_EQ(parse_packet(pkt, p), ParseError::kOk);
  EXPECT_EQ(opcode_info(p.bth.opcode).transport, Transport::kXrc);
  EXPECT_EQ(opcode_info(p.bth.opcode).kind, OpKind::kWrite);
  EXPECT_EQ(p.xrc_srqn, 0x2au);
  EXPECT_EQ(p.bth.dest_qp, 0x123u);
  EXPECT_EQ(p.reth.va, 0x10002000u);
  EXPECT_EQ(p.reth.rkey, 0x1234u);
  EXPECT_EQ(p.reth.dma_len, 4u);
  ASSERT_EQ(p.payload.size(), 4u);
  EXPECT_EQ(p.payload[0], 0xde);
  // The XRCETH is covered by the ICRC: another SRQ number fails the check.
  pkt[15] ^= 0x01;
  EXPECT_EQ(verify_icrc(ip, pkt), IcrcVerdict::kBad);
}

TEST(Xrceth, parse_packet__xrc_ack_has_no_xrceth) {
  const std::vector<uint8_t> ack = {0xb1, 0x40, 0xff, 0xff, 0x00, 0x00, 0x00, 0x07,
                                    0x00, 0x00, 0x04, 0x56,  // BTH
                                    0x00, 0x00, 0x00, 0x09,  // AETH: ACK, MSN 9
                                    0x00, 0x00, 0x00, 0x00};  // ICRC (not checked here)
  Packet p;
  ASSERT_EQ(parse_packet(ack, p), ParseError::kOk);
  EXPECT_EQ(opcode_info(p.bth.opcode).kind, OpKind::kAck);
  EXPECT_EQ(p.aeth.msn, 9u);
  EXPECT_EQ(p.xrc_srqn, 0u);
  EXPECT_EQ(xrc_to_rc(p.bth.opcode), kRcAck);
}

TEST(Xrceth, parse_packet__xrc_send_truncated_inside_xrceth) {
  // An XRC SEND Only needs BTH + XRCETH + ICRC: 19 bytes are too few.
  std::vector<uint8_t> pkt(19, 0);
  pkt[0] = kXrcSendOnly;
  Packet p;
  EXPECT_EQ(parse_packet(pkt, p), ParseError::kTruncated);
}

}  // namespace
}  // namespace vrnic::wire
