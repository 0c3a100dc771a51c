// The IBA / RoCEv2 opcode table: transport, message position and the headers each opcode carries.
#pragma once
#include <cstdint>

#include "wire/packet_kind.h"

namespace vrnic::wire {

// Opcode byte = transport (bits 7..5) | operation (bits 4..0) (IBA 9.2.1 table 35).
enum Opcode : uint8_t {
  kRcSendFirst = 0x00, kRcSendMiddle = 0x01, kRcSendLast = 0x02, kRcSendLastImm = 0x03,
  kRcSendOnly = 0x04, kRcSendOnlyImm = 0x05, kRcWriteFirst = 0x06, kRcWriteMiddle = 0x07,
  kRcWriteLast = 0x08, kRcWriteLastImm = 0x09, kRcWriteOnly = 0x0a, kRcWriteOnlyImm = 0x0b,
  kRcReadRequest = 0x0c, kRcReadResponseFirst = 0x0d, kRcReadResponseMiddle = 0x0e,
  kRcReadResponseLast = 0x0f, kRcReadResponseOnly = 0x10, kRcAck = 0x11, kRcAtomicAck = 0x12,
  kRcCompareSwap = 0x13, kRcFetchAdd = 0x14, kRcSendLastInv = 0x16, kRcSendOnlyInv = 0x17,
  kRcAtomicWrite = 0x1d,  // IBA 1.5 Annex A19 (rxe: IB_OPCODE_RC_ATOMIC_WRITE)
  kUcSendFirst = 0x20, kUcSendMiddle = 0x21, kUcSendLast = 0x22, kUcSendLastImm = 0x23,
  kUcSendOnly = 0x24, kUcSendOnlyImm = 0x25, kUcWriteFirst = 0x26, kUcWriteMiddle = 0x27,
  kUcWriteLast = 0x28, kUcWriteLastImm = 0x29, kUcWriteOnly = 0x2a, kUcWriteOnlyImm = 0x2b,
  kUdSendOnly = 0x64, kUdSendOnlyImm = 0x65,
  kCnp = 0x81,
  // XRC (IBA 9.2.1 table 35, transport 101): the RC operations at 0xa0 | (RC opcode), 0xa0..0xb7.
  kXrcBase = 0xa0, kXrcSendOnly = 0xa4, kXrcAck = 0xb1,
};

// The RC opcode of an XRC opcode's operation (the two transports share the operation bits).
constexpr uint8_t xrc_to_rc(uint8_t opcode) { return opcode & 0x1f; }
constexpr uint8_t rc_to_xrc(uint8_t opcode) { return opcode | kXrcBase; }

enum class Transport : uint8_t { kRc, kUc, kRd, kUd, kCnp, kXrc };

// What the packet does, independent of transport.
enum class OpKind : uint8_t {
  kSend, kWrite, kReadRequest, kReadResponse, kAck, kAtomicAck, kCompareSwap, kFetchAdd, kCnp,
  kAtomicWrite,  // answered by a zero-length RDMA READ response (IBA A19.4.2)
};

// Header flags.
enum : uint16_t {
  kHasReth = 1 << 0, kHasAeth = 1 << 1, kHasAtomicEth = 1 << 2, kHasAtomicAckEth = 1 << 3,
  kHasImm = 1 << 4, kHasIeth = 1 << 5, kHasDeth = 1 << 6, kHasPayload = 1 << 7,
  kIsFirst = 1 << 8, kIsMiddle = 1 << 9, kIsLast = 1 << 10,  // ONLY = first | last
  kHasXrceth = 1 << 11,  // XRC requests: the XRC SRQ number (IBA 9.3.x XRCETH)
};
// Position: single-packet requests and responses (READ request, atomics, ATOMIC ACK) are
// ONLY; an ACK and a CNP belong to no message and carry none of the three. The CNP's 16
// reserved bytes count in header_size, so it has no payload.

struct OpcodeInfo {
  bool valid = false;
  Transport transport = Transport::kRc;
  OpKind kind = OpKind::kSend;
  uint16_t flags = 0;
  uint8_t header_size = 0;  // BTH + extended headers
  const char* name = "reserved";

  bool has(uint16_t f) const { return (flags & f) != 0; }
  bool first() const { return has(kIsFirst); }
  bool last() const { return has(kIsLast); }
};

const OpcodeInfo& opcode_info(uint8_t opcode);

// The kind of a packet with this opcode sent to dest_qpn (QP1 takes the connection
// manager's MADs, IBA 13.5): the one classifier of outgoing packets.
PacketKind packet_kind(uint8_t opcode, uint32_t dest_qpn);

}  // namespace vrnic::wire
