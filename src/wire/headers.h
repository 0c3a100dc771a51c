// RoCEv2 transport headers (BTH and its extended headers): field structs, parse and build.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

namespace vrnic::wire {

inline constexpr uint16_t kRoceV2Port = 4791;
inline constexpr size_t kBthSize = 12, kRethSize = 16, kAethSize = 4, kAtomicEthSize = 28,
                        kAtomicAckEthSize = 8, kImmDtSize = 4, kIethSize = 4, kDethSize = 8,
                        kXrcethSize = 4, kIcrcSize = 4;
// The CNP (opcode 0x81) carries 16 reserved bytes after the BTH (RoCEv2 Annex A17.9.3).
inline constexpr size_t kCnpPayloadSize = 16;

// Base Transport Header (IBA 9.2). All fields host order; dest_qp and psn are 24-bit.
struct Bth {
  uint8_t opcode = 0;
  bool solicited = false;
  bool mig_req = true;
  uint8_t pad_count = 0;  // 0..3
  uint8_t tver = 0;
  uint16_t pkey = 0xffff;
  bool fecn = false;  // RoCEv2 reuses these two reserved bits only on InfiniBand; kept for completeness
  bool becn = false;
  uint32_t dest_qp = 0;
  bool ack_req = false;
  uint32_t psn = 0;
};

struct Reth {  // RDMA Extended Transport Header
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t dma_len = 0;
};

// AETH syndrome (IBA 9.7.5.1.1): bits 7..5 select ACK / RNR NAK / NAK, bits 4..0 the value.
struct Aeth {
  uint8_t syndrome = 0;
  uint32_t msn = 0;  // 24-bit
};

// The AETH syndrome (IBA 9.7.5.1.1, table 43): bits 7..5 the type, bits 4..0 the credit
// count (ACK), the RNR timer (RNR NAK) or the NAK code.
enum class AethType : uint8_t { kAck = 0, kRnrNak = 1, kNak = 3 };
enum NakCode : uint8_t {
  kNakPsnSeq = 0, kNakInvRequest = 1, kNakRemAccess = 2, kNakRemOp = 3, kNakInvRdRequest = 4,
};
inline constexpr uint8_t kAethAckNoCredit = 0x1f;  // ACK, credit count "invalid" (RC w/o EEC flow control)
constexpr uint8_t aeth_rnr_nak(uint8_t timer) { return 0x20 | (timer & 0x1f); }
constexpr uint8_t aeth_nak(uint8_t code) { return 0x60 | (code & 0x1f); }
constexpr AethType aeth_type(uint8_t syndrome) { return static_cast<AethType>(syndrome >> 5); }
constexpr uint8_t aeth_value(uint8_t syndrome) { return syndrome & 0x1f; }

struct AtomicEth {
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint64_t swap_add = 0;
  uint64_t compare = 0;
};

struct AtomicAckEth {
  uint64_t orig = 0;
};

struct Deth {
  uint32_t qkey = 0;
  uint32_t src_qp = 0;  // 24-bit
};

// A transport packet as seen from the BTH onward (the UDP payload). Which optional headers
// are meaningful is decided by the opcode (see opcode.h); the others are left zero.
struct Packet {
  Bth bth;
  Reth reth;
  Aeth aeth;
  AtomicEth atomic;
  AtomicAckEth atomic_ack;
  uint32_t imm = 0;        // ImmDt, in network byte order as carried (as ibv_wc.imm_data)
  uint32_t ieth_rkey = 0;  // IETH (SEND_WITH_INVALIDATE)
  Deth deth;
  uint32_t xrc_srqn = 0;   // XRCETH: the XRC SRQ a request is for (24-bit)
  std::span<const uint8_t> payload;  // without pad bytes and without the ICRC
};

enum class ParseError : uint8_t {
  kOk = 0,
  kTruncated,       // shorter than the headers the opcode requires, or than pad + ICRC
  kBadVersion,      // BTH TVer != 0
  kUnknownOpcode,   // reserved / unsupported opcode
  kBadPadCount,     // pad on a packet that carries no payload, pad longer than the bytes
                    // present, or payload + pad not a multiple of 4 (IBA 9.2)
  kPayloadNotAllowed,  // opcode carries no payload but bytes follow the headers
};
const char* to_string(ParseError e);

// Reads the BTH alone (no other header, no check of the opcode): false if the payload is
// shorter than a BTH. For those who carry packets and need only their QP or PSN.
bool parse_bth(std::span<const uint8_t> udp_payload, Bth& out);

// Parses the UDP payload of a RoCEv2 packet (BTH .. ICRC inclusive). Does not check the ICRC.
// Resets `out` first; never reads outside the span. Reserved bits are ignored.
ParseError parse_packet(std::span<const uint8_t> udp_payload, Packet& out);

// Length of BTH + the extended headers for this opcode (0 if the opcode is unknown).
size_t header_size(uint8_t opcode);

// Writes BTH and the extended headers the opcode requires into out (which must hold
// header_size(p.bth.opcode) bytes); returns the number of bytes written. p.payload is not
// copied: the caller places payload and pad bytes after the headers and then the ICRC.
size_t write_headers(const Packet& p, uint8_t* out);

// Pad bytes needed after a payload of n bytes to reach a multiple of 4.
constexpr uint8_t pad_for(size_t n) { return static_cast<uint8_t>((4 - (n & 3)) & 3); }

}  // namespace vrnic::wire
