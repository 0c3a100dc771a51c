// The opcode table (IBA 9.2.1 table 35 with XRC, RoCEv2 Annex A17.9.3 for the CNP, Annex A19
// for ATOMIC WRITE), built once at compile time.
#include "wire/opcode.h"

#include <array>

#include "wire/cm_mad.h"
#include "wire/headers.h"

namespace vrnic::wire {
namespace {

constexpr uint16_t kOnly = kIsFirst | kIsLast;

// Header bytes implied by the flags; the CNP adds its 16 reserved bytes separately.
constexpr uint8_t headers_for(uint16_t flags) {
  size_t n = kBthSize;
  if (flags & kHasDeth) n += kDethSize;
  if (flags & kHasXrceth) n += kXrcethSize;
  if (flags & kHasReth) n += kRethSize;
  if (flags & kHasAtomicEth) n += kAtomicEthSize;
  if (flags & kHasAeth) n += kAethSize;
  if (flags & kHasAtomicAckEth) n += kAtomicAckEthSize;
  if (flags & kHasImm) n += kImmDtSize;
  if (flags & kHasIeth) n += kIethSize;
  return static_cast<uint8_t>(n);
}

constexpr OpcodeInfo entry(Transport t, OpKind k, uint16_t flags, const char* name) {
  OpcodeInfo i;
  i.valid = true;
  i.transport = t;
  i.kind = k;
  i.flags = flags;
  i.header_size = headers_for(flags);
  i.name = name;
  return i;
}

// SEND and RDMA WRITE have the same shape on RC and UC (IBA 9.2.1: UC opcodes 0x20..0x2b
// mirror RC 0x00..0x0b); only the name and the transport differ.
struct SendWriteNames {
  const char* n[12];
};
constexpr SendWriteNames kRcNames{{"RC_SEND_FIRST", "RC_SEND_MIDDLE", "RC_SEND_LAST",
                                   "RC_SEND_LAST_WITH_IMMEDIATE", "RC_SEND_ONLY",
                                   "RC_SEND_ONLY_WITH_IMMEDIATE", "RC_RDMA_WRITE_FIRST",
                                   "RC_RDMA_WRITE_MIDDLE", "RC_RDMA_WRITE_LAST",
                                   "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", "RC_RDMA_WRITE_ONLY",
                                   "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE"}};
constexpr SendWriteNames kUcNames{{"UC_SEND_FIRST", "UC_SEND_MIDDLE", "UC_SEND_LAST",
                                   "UC_SEND_LAST_WITH_IMMEDIATE", "UC_SEND_ONLY",
                                   "UC_SEND_ONLY_WITH_IMMEDIATE", "UC_RDMA_WRITE_FIRST",
                                   "UC_RDMA_WRITE_MIDDLE", "UC_RDMA_WRITE_LAST",
                                   "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE", "UC_RDMA_WRITE_ONLY",
                                   "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE"}};

constexpr void add_send_write(std::array<OpcodeInfo, 256>& t, uint8_t base, Transport tr,
                              const SendWriteNames& names) {
  constexpr uint16_t P = kHasPayload;
  constexpr uint16_t kFlags[12] = {
      P | kIsFirst,                      // SEND First
      P | kIsMiddle,                     // SEND Middle
      P | kIsLast,                       // SEND Last
      P | kIsLast | kHasImm,             // SEND Last with Immediate
      P | kOnly,                         // SEND Only
      P | kOnly | kHasImm,               // SEND Only with Immediate
      P | kIsFirst | kHasReth,           // RDMA WRITE First: RETH opens the message (9.4.3)
      P | kIsMiddle,                     // RDMA WRITE Middle
      P | kIsLast,                       // RDMA WRITE Last
      P | kIsLast | kHasImm,             // RDMA WRITE Last with Immediate
      P | kOnly | kHasReth,              // RDMA WRITE Only
      P | kOnly | kHasReth | kHasImm,    // RDMA WRITE Only with Immediate
  };
  for (int i = 0; i < 12; ++i) {
    t[base + i] = entry(tr, i < 6 ? OpKind::kSend : OpKind::kWrite, kFlags[i], names.n[i]);
  }
}

// XRC names, indexed by the operation bits (the RC opcode).
constexpr const char* kXrcNames[24] = {
    "XRC_SEND_FIRST", "XRC_SEND_MIDDLE", "XRC_SEND_LAST", "XRC_SEND_LAST_WITH_IMMEDIATE",
    "XRC_SEND_ONLY", "XRC_SEND_ONLY_WITH_IMMEDIATE", "XRC_RDMA_WRITE_FIRST",
    "XRC_RDMA_WRITE_MIDDLE", "XRC_RDMA_WRITE_LAST", "XRC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
    "XRC_RDMA_WRITE_ONLY", "XRC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", "XRC_RDMA_READ_REQUEST",
    "XRC_RDMA_READ_RESPONSE_FIRST", "XRC_RDMA_READ_RESPONSE_MIDDLE",
    "XRC_RDMA_READ_RESPONSE_LAST", "XRC_RDMA_READ_RESPONSE_ONLY", "XRC_ACKNOWLEDGE",
    "XRC_ATOMIC_ACKNOWLEDGE", "XRC_CMP_SWAP", "XRC_FETCH_ADD", "reserved",
    "XRC_SEND_LAST_WITH_INVALIDATE", "XRC_SEND_ONLY_WITH_INVALIDATE"};

// XRC mirrors every RC opcode 0x00..0x17 (IBA 9.2.1). Requests carry the XRCETH right after
// the BTH (IBA 9.2: BTH, [RDETH], [DETH], [XRCETH], RETH ...); responses and ACKs do not.
constexpr void add_xrc(std::array<OpcodeInfo, 256>& t) {
  for (uint8_t op = 0; op < 24; ++op) {
    const OpcodeInfo& rc = t[op];
    if (!rc.valid) continue;
    const bool response = rc.kind == OpKind::kAck || rc.kind == OpKind::kReadResponse ||
                          rc.kind == OpKind::kAtomicAck;
    const uint16_t flags = response ? rc.flags : static_cast<uint16_t>(rc.flags | kHasXrceth);
    t[rc_to_xrc(op)] = entry(Transport::kXrc, rc.kind, flags, kXrcNames[op]);
  }
}

constexpr std::array<OpcodeInfo, 256> make_table() {
  std::array<OpcodeInfo, 256> t{};
  add_send_write(t, 0x00, Transport::kRc, kRcNames);
  add_send_write(t, 0x20, Transport::kUc, kUcNames);

  constexpr Transport rc = Transport::kRc;
  constexpr uint16_t P = kHasPayload;
  // A READ request and an atomic are single-packet requests: they open and close their
  // message, so they are marked ONLY. An ACK acknowledges a range and belongs to no message.
  t[kRcReadRequest] = entry(rc, OpKind::kReadRequest, kOnly | kHasReth, "RC_RDMA_READ_REQUEST");
  t[kRcReadResponseFirst] =
      entry(rc, OpKind::kReadResponse, P | kIsFirst | kHasAeth, "RC_RDMA_READ_RESPONSE_FIRST");
  // Middle READ responses carry no AETH; first, last and only do (IBA 9.2.1 table 35).
  t[kRcReadResponseMiddle] =
      entry(rc, OpKind::kReadResponse, P | kIsMiddle, "RC_RDMA_READ_RESPONSE_MIDDLE");
  t[kRcReadResponseLast] =
      entry(rc, OpKind::kReadResponse, P | kIsLast | kHasAeth, "RC_RDMA_READ_RESPONSE_LAST");
  t[kRcReadResponseOnly] =
      entry(rc, OpKind::kReadResponse, P | kOnly | kHasAeth, "RC_RDMA_READ_RESPONSE_ONLY");
  t[kRcAck] = entry(rc, OpKind::kAck, kHasAeth, "RC_ACKNOWLEDGE");
  t[kRcAtomicAck] =
      entry(rc, OpKind::kAtomicAck, kOnly | kHasAeth | kHasAtomicAckEth, "RC_ATOMIC_ACKNOWLEDGE");
  t[kRcCompareSwap] =
      entry(rc, OpKind::kCompareSwap, kOnly | kHasAtomicEth, "RC_CMP_SWAP");
  t[kRcFetchAdd] = entry(rc, OpKind::kFetchAdd, kOnly | kHasAtomicEth, "RC_FETCH_ADD");
  // 0x15 is reserved on RC. ATOMIC WRITE (IBA 1.5 Annex A19): a RETH naming 8 bytes and
  // their 8-byte payload, a single-packet request; XRC's counterpart is not offered.
  t[kRcAtomicWrite] =
      entry(rc, OpKind::kAtomicWrite, P | kOnly | kHasReth, "RC_ATOMIC_WRITE");
  t[kRcSendLastInv] =
      entry(rc, OpKind::kSend, P | kIsLast | kHasIeth, "RC_SEND_LAST_WITH_INVALIDATE");
  t[kRcSendOnlyInv] =
      entry(rc, OpKind::kSend, P | kOnly | kHasIeth, "RC_SEND_ONLY_WITH_INVALIDATE");

  // UD has only SEND Only (IBA 9.2.1); DETH carries the Q_Key and the source QP.
  t[kUdSendOnly] = entry(Transport::kUd, OpKind::kSend, P | kOnly | kHasDeth, "UD_SEND_ONLY");
  t[kUdSendOnlyImm] = entry(Transport::kUd, OpKind::kSend, P | kOnly | kHasDeth | kHasImm,
                            "UD_SEND_ONLY_WITH_IMMEDIATE");

  // RoCEv2 CNP (Annex A17.9.3): BTH + 16 reserved bytes, which are counted as header, not
  // payload, so that parse_packet reports an empty payload. RD (0x40..0x5f) is not offered.
  t[kCnp] = entry(Transport::kCnp, OpKind::kCnp, 0, "CNP");
  t[kCnp].header_size = static_cast<uint8_t>(kBthSize + kCnpPayloadSize);
  add_xrc(t);
  return t;
}

constexpr std::array<OpcodeInfo, 256> kTable = make_table();

}  // namespace

const OpcodeInfo& opcode_info(uint8_t opcode) { return kTable[opcode]; }

PacketKind packet_kind(uint8_t opcode, uint32_t dest_qpn) {
  switch (opcode_info(opcode).kind) {
    case OpKind::kAck: return PacketKind::kAck;
    case OpKind::kCnp: return PacketKind::kCnp;
    case OpKind::kReadResponse:
    case OpKind::kAtomicAck: return PacketKind::kResponse;
    default: break;
  }
  return dest_qpn == cm::kGsiQpn ? PacketKind::kCmMad : PacketKind::kRequest;
}

const char* to_string(PacketKind k) {
  switch (k) {
    case PacketKind::kRequest: return "request";
    case PacketKind::kResponse: return "response";
    case PacketKind::kAck: return "ack";
    case PacketKind::kCnp: return "cnp";
    case PacketKind::kCmMad: return "cm_mad";
  }
  return "?";
}

}  // namespace vrnic::wire
