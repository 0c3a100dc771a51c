// Connection-management MADs (IBA vol 1 ch. 12.6) and the IP CM service header (Annex A11).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <variant>

#include "wire/gid.h"
#include "wire/headers.h"
#include "wire/icrc.h"

namespace vrnic::wire::cm {

// A MAD is 256 bytes: the 24-byte common header (IBA 13.4.2) and 232 bytes of CM data.
inline constexpr size_t kMadSize = 256, kMadHeaderSize = 24;
inline constexpr uint8_t kBaseVersion = 1, kMgmtClassCm = 0x07, kCmClassVersion = 2;
inline constexpr uint8_t kMethodSend = 0x03;  // every CM message is a Send (IBA 12.6.1)
// The General Services Interface: QP1 with its well-known Q_Key (IBA 13.5).
inline constexpr uint32_t kGsiQpn = 1, kGsiQkey = 0x80010000;

// Attribute IDs of the CM class (IBA 12.6).
enum class Attr : uint16_t {
  kReq = 0x0010, kMra = 0x0011, kRej = 0x0012, kRep = 0x0013, kRtu = 0x0014,
  kDreq = 0x0015, kDrep = 0x0016, kSidrReq = 0x0017, kSidrRep = 0x0018,
  kLap = 0x0019, kApr = 0x001a,
};
const char* to_string(Attr a);

// Fixed private-data sizes of each message (IBA 12.6.5 .. 12.6.11, 12.11).
inline constexpr size_t kReqPrivate = 92, kMraPrivate = 222, kRejPrivate = 148,
                        kRepPrivate = 196, kRtuPrivate = 224, kDreqPrivate = 220,
                        kDrepPrivate = 224, kSidrReqPrivate = 216, kSidrRepPrivate = 136;
inline constexpr size_t kRejAriSize = 72, kSidrRepInfoSize = 72;

// Which message an MRA or REJ refers to (IBA 12.6.6 / 12.6.7, "Message MRAed/Rejected"): 2
// is a LAP for an MRA, and for a REJ any other (one that abandons a set-up after its REQ or
// REP was sent).
enum class MsgRef : uint8_t { kReq = 0, kRep = 1, kLap = 2, kOther = 2 };

// REJ reasons (IBA 12.6.7).
enum class RejReason : uint16_t {
  kNoQp = 1, kNoEec = 2, kNoResources = 3, kTimeout = 4, kUnsupportedReq = 5,
  kInvalidCommId = 6, kInvalidCommInstance = 7, kInvalidServiceId = 8,
  kInvalidTransportType = 9, kStaleConn = 10, kRdcNotExist = 11, kInvalidGid = 12,
  kInvalidLid = 13, kInvalidSl = 14, kInvalidTrafficClass = 15, kInvalidHopLimit = 16,
  kInvalidPacketRate = 17, kInvalidAltGid = 18, kInvalidAltLid = 19, kInvalidAltSl = 20,
  kInvalidAltTrafficClass = 21, kInvalidAltHopLimit = 22, kInvalidAltPacketRate = 23,
  kPortCmRedirect = 24, kPortRedirect = 25, kInvalidMtu = 26,
  kInsufficientRespResources = 27, kConsumerReject = 28, kInvalidRnrRetry = 29,
  kDuplicateLocalCommId = 30, kUnsupportedClassVersion = 31, kInvalidFlowLabel = 32,
  kInvalidAltFlowLabel = 33,
};

struct MadHeader {  // IBA 13.4.2, the common MAD header
  uint8_t base_version = kBaseVersion;
  uint8_t mgmt_class = kMgmtClassCm;
  uint8_t class_version = kCmClassVersion;
  uint8_t method = kMethodSend;
  uint16_t status = 0;
  uint16_t class_specific = 0;
  uint64_t tid = 0;
  uint16_t attr_id = 0;
  uint32_t attr_mod = 0;
};

// One path of a REQ (IBA 12.6.5). On RoCE the LIDs are the permissive LID 0xFFFF and the
// GIDs are the IP addresses (IPv4 as ::ffff:a.b.c.d).
struct Path {
  uint16_t local_lid = 0, remote_lid = 0;
  std::array<uint8_t, 16> local_gid{}, remote_gid{};
  uint32_t flow_label = 0;   // 20 bits
  uint8_t packet_rate = 0;   // 6 bits
  uint8_t traffic_class = 0;
  uint8_t hop_limit = 0;
  uint8_t sl = 0;            // 4 bits
  bool subnet_local = false;
  uint8_t local_ack_timeout = 0;  // 5 bits, 4.096 us * 2^n
};

struct Req {  // ConnectRequest, IBA 12.6.5
  uint32_t local_comm_id = 0;
  uint64_t service_id = 0;
  uint64_t local_ca_guid = 0;
  uint32_t local_qkey = 0;
  uint32_t local_qpn = 0;  // 24 bits
  uint8_t responder_resources = 0;
  uint32_t local_eecn = 0;  // 24 bits
  uint8_t initiator_depth = 0;
  uint32_t remote_eecn = 0;  // 24 bits
  uint8_t remote_cm_response_timeout = 0;  // 5 bits
  uint8_t transport = 0;  // 2 bits: 0 RC, 1 UC, 2 RD
  bool end_to_end_flow_control = false;
  uint32_t starting_psn = 0;  // 24 bits
  uint8_t local_cm_response_timeout = 0;  // 5 bits
  uint8_t retry_count = 0;  // 3 bits
  uint16_t pkey = 0xffff;
  uint8_t path_mtu = 0;  // 4 bits, as enum ibv_mtu (1 = 256 .. 5 = 4096)
  bool rdc_exists = false;
  uint8_t rnr_retry_count = 0;  // 3 bits
  uint8_t max_cm_retries = 0;   // 4 bits
  bool srq = false;
  uint8_t extended_transport = 0;  // 3 bits (XRC = 1)
  Path primary, alternate;
  std::array<uint8_t, kReqPrivate> private_data{};
};

struct Mra {  // MessageReceiptAcknowledgement, IBA 12.6.6
  uint32_t local_comm_id = 0, remote_comm_id = 0;
  MsgRef msg_mraed = MsgRef::kReq;
  uint8_t service_timeout = 0;  // 5 bits, 4.096 us * 2^n
  std::array<uint8_t, kMraPrivate> private_data{};
};

struct Rej {  // ConnectReject, IBA 12.6.7
  uint32_t local_comm_id = 0, remote_comm_id = 0;
  MsgRef msg_rejected = MsgRef::kReq;
  uint8_t reject_info_length = 0;  // 7 bits
  uint16_t reason = 0;
  std::array<uint8_t, kRejAriSize> ari{};
  std::array<uint8_t, kRejPrivate> private_data{};
};

struct Rep {  // ConnectReply, IBA 12.6.8
  uint32_t local_comm_id = 0, remote_comm_id = 0;
  uint32_t local_qkey = 0;
  uint32_t local_qpn = 0;     // 24 bits
  uint32_t local_eecn = 0;    // 24 bits
  uint32_t starting_psn = 0;  // 24 bits
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
  uint8_t target_ack_delay = 0;   // 5 bits
  uint8_t failover_accepted = 0;  // 2 bits
  bool end_to_end_flow_control = false;
  uint8_t rnr_retry_count = 0;    // 3 bits
  bool srq = false;
  uint64_t local_ca_guid = 0;
  std::array<uint8_t, kRepPrivate> private_data{};
};

struct Rtu {  // ReadyToUse, IBA 12.6.9
  uint32_t local_comm_id = 0, remote_comm_id = 0;
  std::array<uint8_t, kRtuPrivate> private_data{};
};

struct Dreq {  // DisconnectRequest, IBA 12.6.10
  uint32_t local_comm_id = 0, remote_comm_id = 0;
  uint32_t remote_qpn = 0;  // 24 bits
  std::array<uint8_t, kDreqPrivate> private_data{};
};

struct Drep {  // DisconnectReply, IBA 12.6.11
  uint32_t local_comm_id = 0, remote_comm_id = 0;
  std::array<uint8_t, kDrepPrivate> private_data{};
};

struct SidrReq {  // ServiceIDResolutionRequest, IBA 12.11.1
  uint32_t request_id = 0;
  uint16_t pkey = 0xffff;
  uint64_t service_id = 0;
  std::array<uint8_t, kSidrReqPrivate> private_data{};
};

// SIDR_REP status (IBA 12.11.2).
enum class SidrStatus : uint8_t {
  kValid = 0, kServiceIdNotSupported = 1, kRejected = 2, kNoQp = 3, kRedirect = 4,
  kUnsupportedVersion = 5,
};

struct SidrRep {  // ServiceIDResolutionResponse, IBA 12.11.2
  uint32_t request_id = 0;
  uint8_t status = 0;
  uint8_t info_length = 0;
  uint32_t qpn = 0;  // 24 bits
  uint64_t service_id = 0;
  uint32_t qkey = 0;
  std::array<uint8_t, kSidrRepInfoSize> info{};
  std::array<uint8_t, kSidrRepPrivate> private_data{};
};

using Message = std::variant<Req, Mra, Rej, Rep, Rtu, Dreq, Drep, SidrReq, SidrRep>;

struct Mad {
  MadHeader hdr;
  Message msg;
};

enum class MadError : uint8_t {
  kOk = 0,
  kBadLength,        // not exactly one 256-byte MAD
  kBadVersion,       // base version != 1 or class version != 2
  kNotCm,            // management class other than CM
  kBadMethod,        // CM messages are Sends
  kUnknownAttr,      // an attribute this CM does not handle (LAP/APR, ClassPortInfo, ...)
};
const char* to_string(MadError e);

// Parses one MAD (the payload of a UD SEND to QP1). Never reads outside the span.
MadError parse_mad(std::span<const uint8_t> mad, Mad& out);

// Writes the 256 bytes of a MAD; hdr.attr_id is set from the message's type.
void build_mad(const Mad& mad, uint8_t out[kMadSize]);

// Port spaces of the RDMA CM and their IB service IDs: 0x0000000001PPpppp for port space PP
// and port pppp (the RDMA IP CM service ID, Annex A11).
enum class PortSpace : uint16_t { kIpoib = 0x0002, kTcp = 0x0106, kUdp = 0x0111, kIb = 0x013f };
inline constexpr uint64_t service_id(uint16_t port_space, uint16_t port) {
  return static_cast<uint64_t>(port_space) << 16 | port;
}
inline constexpr uint16_t service_port_space(uint64_t sid) {
  return static_cast<uint16_t>(sid >> 16);
}
inline constexpr uint16_t service_port(uint64_t sid) { return static_cast<uint16_t>(sid); }
// True if the service ID is an IP CM one (high 40 bits 0x0000000001, Annex A11).
inline constexpr bool is_ip_service_id(uint64_t sid) { return (sid >> 24) == 1; }

// The IP CM service header carried first in a REQ's or SIDR_REQ's private data (Annex A11):
// version, IP version, the source port and both addresses. Addresses here follow vrnic's
// convention (IPv4 in the first four bytes); on the wire an IPv4 address takes the last four
// of its sixteen bytes.
inline constexpr size_t kIpCmHeaderSize = 36;
struct IpCmHeader {
  uint8_t version = 0;  // MajV.MinV, 0.0
  bool ipv6 = false;
  uint16_t src_port = 0;
  std::array<uint8_t, 16> src{}, dst{};
};
// False if the header's version is not 0.0 or its IP version is neither 4 nor 6.
bool parse_ip_cm_header(std::span<const uint8_t> private_data, IpCmHeader& out);
void write_ip_cm_header(const IpCmHeader& h, uint8_t out[kIpCmHeaderSize]);

// A CM MAD on RoCEv2: BTH (UD SEND_ONLY to QP1, P_Key 0xFFFF) + DETH (GSI Q_Key, source QP 1)
// + the MAD + ICRC, as the UDP payload.
inline constexpr size_t kGsiPacketSize = kBthSize + kDethSize + kMadSize + kIcrcSize;
void build_gsi_packet(const IpUdpInfo& ip, uint32_t psn, const uint8_t mad[kMadSize],
                      uint8_t out[kGsiPacketSize]);
// The MAD a parsed packet carries if it is a GSI datagram (UD SEND_ONLY to QP1 with the GSI
// Q_Key and a 256-byte payload); an empty span otherwise.
std::span<const uint8_t> gsi_mad(const Packet& p);

// The GIDs in CM messages are the RoCEv2 GIDs of the endpoints' addresses (wire/gid.h).
using wire::gid_of_ip;

}  // namespace vrnic::wire::cm
