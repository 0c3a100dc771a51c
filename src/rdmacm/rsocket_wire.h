// rdma-core v44's rsocket protocol as bytes: the connection data of the CM's REQ / REP, the
// immediate data of every stream message, the SGL and I/O-map entries written into the peer's
// target buffer, and the two headers of datagram rsockets (in each UD datagram, and in the
// address-resolution datagrams over kernel UDP). Pure encoders and decoders, no verbs.
#pragma once
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace vrnic::rdmacm::rs {

// --- Stream rsockets -------------------------------------------------------------------------

// The immediate data of an RDMA WRITE WITH IMMEDIATE: the operation in bits 31..29, its
// argument in bits 28..0 (a data message's length, the new credit limit of an SGL update, an
// I/O map's index, a control code).
enum class Op : uint8_t {
  kData = 0,
  kWrite = 2,     // riowrite: a plain RDMA WRITE, never carried in an immediate
  kSgl = 4,       // credit update (with or without a new target SGE)
  kIomapSgl = 6,  // an I/O map entry was written into the peer's table
  kCtrl = 7,
};
enum class Ctrl : uint32_t { kDisconnect = 0, kKeepalive = 1, kShutdown = 2 };

inline constexpr uint32_t kImmDataMask = 0x1fffffff;
constexpr uint32_t imm_of(Op op, uint32_t data) {
  return uint32_t(op) << 29 | (data & kImmDataMask);
}
constexpr Op imm_op(uint32_t imm) { return static_cast<Op>(imm >> 29); }
constexpr uint32_t imm_data(uint32_t imm) { return imm & kImmDataMask; }

// An address, key and length: in the connection data (big-endian), and as the entries of a
// target SGL or I/O map, written in the byte order of the side that owns the table.
struct Sge {
  uint64_t addr = 0;
  uint32_t key = 0;
  uint32_t length = 0;
  bool operator==(const Sge&) const = default;
};
inline constexpr size_t kSgeSize = 16;
inline constexpr size_t kIomapEntrySize = 24;  // offset (8) then an Sge
inline constexpr uint32_t kTargetSgeCount = 2;  // the target SGL's entries (RS_SGL_SIZE)

void put_sge(uint8_t* p, const Sge& s, bool big_endian);
Sge get_sge(const uint8_t* p, bool big_endian);

struct IomapEntry {
  uint64_t offset = 0;
  Sge sge;
  bool operator==(const IomapEntry&) const = default;
};
void put_iomap_entry(uint8_t* p, const IomapEntry& e, bool big_endian);
IomapEntry get_iomap_entry(const uint8_t* p, bool big_endian);

// The private data of the REQ and of the REP (struct rs_conn_data), 40 bytes.
inline constexpr uint8_t kConnVersion = 1;
inline constexpr uint8_t kConnFlagNet = 1 << 0;    // the sender's host is big-endian
inline constexpr uint8_t kConnFlagIomap = 1 << 1;  // iomap_scale is meaningful
inline constexpr size_t kConnDataSize = 40;

struct ConnData {
  uint8_t version = kConnVersion;
  uint8_t flags = 0;
  uint16_t credits = 0;     // data messages the peer may send before a credit update
  uint8_t iomap_scale = 0;  // the I/O map table's entries, scaled (iomap_size_of)
  Sge target_sgl;           // the SGL table; length = its entries
  Sge data_buf;             // the first window of the receive buffer
};
void encode_conn_data(const ConnData& c, uint8_t out[kConnDataSize]);
// nullopt when shorter than 40 bytes or of another version (rdma-core then rejects).
std::optional<ConnData> decode_conn_data(std::span<const uint8_t> bytes);

// The 8-bit scale that carries an I/O map size: values up to 128 as they are, larger ones
// as 128 | value / 256 (rounded down to a multiple of 256 on the way back).
uint8_t iomap_scale_of(uint32_t entries);
uint32_t iomap_size_of(uint8_t scale);

inline constexpr bool host_big_endian() { return __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__; }

// --- Datagram rsockets -----------------------------------------------------------------------

// The header in front of every UD datagram: the sender's address (struct ds_header), 8 bytes
// for IPv4, 24 for IPv6 (with the flow label).
inline constexpr size_t kDsHeaderV4 = 8;
inline constexpr size_t kDsHeaderV6 = 24;
inline constexpr size_t kDsMaxMessage = 2048;  // header and payload in one receive (RS_SNDLOWAT)

// Writes the header for `self` (AF_INET or AF_INET6); returns its length, 0 for another family.
size_t put_ds_header(uint8_t* out, const sockaddr* self);
// Reads a header: its length (the payload follows), or 0 if it is not a valid one; `from`
// gets the address it holds.
size_t get_ds_header(std::span<const uint8_t> bytes, sockaddr_storage& from);

// The header of an address-resolution datagram sent over kernel UDP (struct ds_udp_header):
// tag, the sender's family, op (kData: the payload of a datagram follows; kCtrl: the reply),
// its length, the sending QP's number and the sender's address; 16 bytes, 28 for IPv6.
inline constexpr uint32_t kDsUdpTag = 0x55555555;
inline constexpr size_t kDsUdpHeaderV4 = 16;
inline constexpr size_t kDsUdpHeaderV6 = 28;

struct DsUdpHeader {
  Op op = Op::kData;
  uint32_t qpn = 0;   // 24 bits
  size_t length = 0;  // where the payload starts
};
size_t put_ds_udp_header(uint8_t* out, Op op, uint32_t qpn, const sockaddr* self);
// nullopt unless the tag, the version (matching `family`, the UDP source's) and the length
// are right and the bytes hold the whole header.
std::optional<DsUdpHeader> get_ds_udp_header(std::span<const uint8_t> bytes, int family);

}  // namespace vrnic::rdmacm::rs
