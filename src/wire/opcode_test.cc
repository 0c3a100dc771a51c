// Tests of the opcode table against IBA 9.2.1 table 35: validity, headers, position, payload.
#include "wire/opcode.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "wire/headers.h"

namespace vrnic::wire {
namespace {

TEST(Opcode, opcode_info__valid_set_is_exactly_rc_uc_ud_cnp_xrc) {
  std::set<int> expect;
  for (int op = 0x00; op <= 0x14; ++op) expect.insert(op);
  expect.insert(0x16);
  expect.insert(0x17);
  expect.insert(0x1d);  // RC ATOMIC WRITE (IBA 1.5 Annex A19)
  for (int op = 0x20; op <= 0x2b; ++op) expect.insert(op);
  expect.insert(0x64);
  expect.insert(0x65);
  expect.insert(0x81);
  for (int op = 0xa0; op <= 0xb4; ++op) expect.insert(op);  // XRC: 0xb5 reserved as RC 0x15
  expect.insert(0xb6);
  expect.insert(0xb7);
  for (int op = 0; op < 256; ++op) {
    const OpcodeInfo& i = opcode_info(static_cast<uint8_t>(op));
    EXPECT_EQ(i.valid, expect.count(op) == 1) << std::hex << op;
    if (!i.valid) {
      EXPECT_EQ(header_size(static_cast<uint8_t>(op)), 0u) << std::hex << op;
      EXPECT_STREQ(i.name, "reserved");
    }
  }
}

TEST(Opcode, opcode_info__reserved_and_rd_are_invalid) {
  for (uint8_t op : {0x15, 0x18, 0x1c, 0x1e, 0x1f, 0xbd, 0x2c, 0x40, 0x4a, 0x60, 0x63, 0x66, 0x80, 0x82, 0xb5,
                     0xb8, 0xbf, 0xff}) {
    EXPECT_FALSE(opcode_info(op).valid) << int(op);
  }
}

TEST(Opcode, opcode_info__header_sizes) {
  EXPECT_EQ(opcode_info(kRcSendFirst).header_size, 12);
  EXPECT_EQ(opcode_info(kRcSendLastImm).header_size, 16);
  EXPECT_EQ(opcode_info(kRcWriteFirst).header_size, 28);
  EXPECT_EQ(opcode_info(kRcWriteMiddle).header_size, 12);
  EXPECT_EQ(opcode_info(kRcWriteLastImm).header_size, 16);
  EXPECT_EQ(opcode_info(kRcWriteOnlyImm).header_size, 32);
  EXPECT_EQ(opcode_info(kRcReadRequest).header_size, 28);
  EXPECT_EQ(opcode_info(kRcReadResponseFirst).header_size, 16);
  EXPECT_EQ(opcode_info(kRcReadResponseMiddle).header_size, 12);
  EXPECT_EQ(opcode_info(kRcAck).header_size, 16);
  EXPECT_EQ(opcode_info(kRcAtomicAck).header_size, 24);
  EXPECT_EQ(opcode_info(kRcCompareSwap).header_size, 40);
  EXPECT_EQ(opcode_info(kRcFetchAdd).header_size, 40);
  EXPECT_EQ(opcode_info(kRcSendOnlyInv).header_size, 16);
  EXPECT_EQ(opcode_info(kRcAtomicWrite).header_size, 28);  // BTH + RETH, then 8 payload bytes
  EXPECT_EQ(opcode_info(kUcWriteOnlyImm).header_size, 32);
  EXPECT_EQ(opcode_info(kUdSendOnly).header_size, 20);
  EXPECT_EQ(opcode_info(kUdSendOnlyImm).header_size, 24);
  EXPECT_EQ(opcode_info(kCnp).header_size, 28);
  EXPECT_EQ(header_size(kRcCompareSwap), 40u);
  // XRC requests: the RC size plus the 4-byte XRCETH; responses: the RC size.
  EXPECT_EQ(opcode_info(0xa0).header_size, 16);  // XRC SEND First
  EXPECT_EQ(opcode_info(0xaa).header_size, 32);  // XRC RDMA WRITE Only
  EXPECT_EQ(opcode_info(0xac).header_size, 32);  // XRC RDMA READ Request
  EXPECT_EQ(opcode_info(0xb3).header_size, 44);  // XRC CmpSwap
  EXPECT_EQ(opcode_info(0xad).header_size, 16);  // XRC READ Response First (AETH)
  EXPECT_EQ(opcode_info(kXrcAck).header_size, 16);
  EXPECT_EQ(opcode_info(0xb2).header_size, 24);  // XRC Atomic ACK
}

TEST(Opcode, opcode_info__payload_presence) {
  for (uint8_t op : {kRcReadRequest, kRcAck, kRcAtomicAck, kRcCompareSwap, kRcFetchAdd, kCnp}) {
    EXPECT_FALSE(opcode_info(op).has(kHasPayload)) << opcode_info(op).name;
  }
  for (uint8_t op : {kRcSendFirst, kRcWriteOnlyImm, kRcReadResponseMiddle, kRcSendOnlyInv,
                     kUcSendMiddle, kUdSendOnlyImm, kRcAtomicWrite}) {
    EXPECT_TRUE(opcode_info(op).has(kHasPayload)) << opcode_info(op).name;
  }
}

TEST(Opcode, opcode_info__message_position) {
  EXPECT_TRUE(opcode_info(kRcSendFirst).first());
  EXPECT_FALSE(opcode_info(kRcSendFirst).last());
  EXPECT_TRUE(opcode_info(kRcSendMiddle).has(kIsMiddle));
  EXPECT_FALSE(opcode_info(kRcSendMiddle).first() || opcode_info(kRcSendMiddle).last());
  EXPECT_TRUE(opcode_info(kRcWriteLastImm).last());
  EXPECT_TRUE(opcode_info(kRcSendOnly).first() && opcode_info(kRcSendOnly).last());
  EXPECT_TRUE(opcode_info(kRcReadResponseOnly).first() && opcode_info(kRcReadResponseOnly).last());
  EXPECT_TRUE(opcode_info(kRcReadRequest).first() && opcode_info(kRcReadRequest).last());
  EXPECT_TRUE(opcode_info(kUdSendOnly).first() && opcode_info(kUdSendOnly).last());
  EXPECT_EQ(opcode_info(kRcAck).flags & (kIsFirst | kIsMiddle | kIsLast), 0);
  // Exactly one of first / middle / last / only on every packet of a multi-packet message.
  for (int op = 0; op < 256; ++op) {
    const OpcodeInfo& i = opcode_info(static_cast<uint8_t>(op));
    if (!i.valid || !i.has(kHasPayload)) continue;
    const bool mid = i.has(kIsMiddle);
    EXPECT_TRUE(mid != (i.first() || i.last())) << i.name;
  }
}

TEST(Opcode, opcode_info__extended_headers) {
  EXPECT_TRUE(opcode_info(kRcWriteFirst).has(kHasReth));
  EXPECT_FALSE(opcode_info(kRcWriteLast).has(kHasReth));
  EXPECT_TRUE(opcode_info(kRcWriteOnlyImm).has(kHasReth | kHasImm));
  EXPECT_EQ(opcode_info(kRcReadResponseLast).flags & kHasAeth, kHasAeth);
  EXPECT_FALSE(opcode_info(kRcReadResponseMiddle).has(kHasAeth));
  EXPECT_TRUE(opcode_info(kRcAtomicAck).has(kHasAtomicAckEth));
  EXPECT_TRUE(opcode_info(kRcSendLastInv).has(kHasIeth));
  EXPECT_FALSE(opcode_info(kRcSendLastInv).has(kHasImm));
  EXPECT_TRUE(opcode_info(kUdSendOnlyImm).has(kHasDeth | kHasImm));
  EXPECT_FALSE(opcode_info(kCnp).has(kHasReth | kHasAeth | kHasDeth | kHasImm));
}

TEST(Opcode, opcode_info__transport_kind_and_names) {
  EXPECT_EQ(opcode_info(kRcFetchAdd).transport, Transport::kRc);
  EXPECT_EQ(opcode_info(kRcFetchAdd).kind, OpKind::kFetchAdd);
  EXPECT_EQ(opcode_info(kUcWriteFirst).transport, Transport::kUc);
  EXPECT_EQ(opcode_info(kUcWriteFirst).kind, OpKind::kWrite);
  EXPECT_EQ(opcode_info(kUdSendOnly).transport, Transport::kUd);
  EXPECT_EQ(opcode_info(kCnp).transport, Transport::kCnp);
  EXPECT_EQ(opcode_info(kCnp).kind, OpKind::kCnp);
  EXPECT_EQ(opcode_info(kRcReadResponseFirst).kind, OpKind::kReadResponse);
  EXPECT_EQ(opcode_info(kRcAtomicWrite).transport, Transport::kRc);
  EXPECT_EQ(opcode_info(kRcAtomicWrite).kind, OpKind::kAtomicWrite);
  EXPECT_STREQ(opcode_info(kRcAtomicWrite).name, "RC_ATOMIC_WRITE");
  EXPECT_STREQ(opcode_info(kRcSendOnly).name, "RC_SEND_ONLY");
  EXPECT_STREQ(opcode_info(kUcSendLastImm).name, "UC_SEND_LAST_WITH_IMMEDIATE");
  EXPECT_STREQ(opcode_info(kCnp).name, "CNP");
  // UC SEND/WRITE mirror RC's shape.
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(opcode_info(static_cast<uint8_t>(i)).flags,
              opcode_info(static_cast<uint8_t>(0x20 + i)).flags) << i;
  }
  // Names are unique.
  std::set<std::string> names;
  int valid = 0;
  for (int op = 0; op < 256; ++op) {
    const OpcodeInfo& i = opcode_info(static_cast<uint8_t>(op));
    if (!i.valid) continue;
    ++valid;
    names.insert(i.name);
  }
  EXPECT_EQ(static_cast<int>(names.size()), valid);
  EXPECT_EQ(valid, 62);
}

TEST(Opcode, packet_kind__every_valid_opcode_has_the_kind_of_its_operation) {
  for (int op = 0; op < 256; ++op) {
    const OpcodeInfo& i = opcode_info(static_cast<uint8_t>(op));
    if (!i.valid) continue;
    const PacketKind k = packet_kind(static_cast<uint8_t>(op), 0x123);
    switch (i.kind) {
      case OpKind::kAck: EXPECT_EQ(k, PacketKind::kAck) << i.name; break;
      case OpKind::kCnp: EXPECT_EQ(k, PacketKind::kCnp) << i.name; break;
      case OpKind::kReadResponse:
      case OpKind::kAtomicAck: EXPECT_EQ(k, PacketKind::kResponse) << i.name; break;
      default: EXPECT_EQ(k, PacketKind::kRequest) << i.name; break;
    }
  }
  // The ACKs of both connected transports, XRC's included, are ACKs.
  EXPECT_EQ(packet_kind(kRcAck, 7), PacketKind::kAck);
  EXPECT_EQ(packet_kind(kXrcAck, 7), PacketKind::kAck);
  EXPECT_EQ(packet_kind(kRcAtomicAck, 7), PacketKind::kResponse);
  EXPECT_TRUE(is_control(PacketKind::kAck));
  EXPECT_TRUE(is_control(PacketKind::kCnp));
  EXPECT_FALSE(is_control(PacketKind::kResponse));
}

TEST(Opcode, packet_kind__a_send_to_qp1_is_a_cm_mad) {
  EXPECT_EQ(packet_kind(kUdSendOnly, 1), PacketKind::kCmMad);
  EXPECT_EQ(packet_kind(kUdSendOnly, 2), PacketKind::kRequest);
  EXPECT_STREQ(to_string(PacketKind::kCmMad), "cm_mad");
}

}  // namespace
}  // namespace vrnic::wire
