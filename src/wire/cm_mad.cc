// Parse and build of the CM MADs and the IP CM service header; offsets are those of IBA 12.6.
#include "wire/cm_mad.h"

#include <algorithm>
#include <cstring>

#include "wire/bytes.h"
#include "wire/opcode.h"

namespace vrnic::wire::cm {
namespace {

// Offsets below are into the 232 bytes that follow the common MAD header.
template <size_t N>
void get_bytes(const uint8_t* p, std::array<uint8_t, N>& a) {
  std::memcpy(a.data(), p, N);
}
template <size_t N>
void put_bytes(uint8_t* p, const std::array<uint8_t, N>& a) {
  std::memcpy(p, a.data(), N);
}

// A path is 44 bytes (IBA 12.6.5: LIDs, GIDs, flow label | packet rate, traffic class, hop
// limit, SL | subnet local, local ACK timeout).
constexpr size_t kPathSize = 44;

void parse_path(const uint8_t* p, Path& o) {
  o.local_lid = get16(p);
  o.remote_lid = get16(p + 2);
  get_bytes(p + 4, o.local_gid);
  get_bytes(p + 20, o.remote_gid);
  const uint32_t w = get32(p + 36);
  o.flow_label = w >> 12;
  o.packet_rate = w & 0x3f;
  o.traffic_class = p[40];
  o.hop_limit = p[41];
  o.sl = p[42] >> 4;
  o.subnet_local = (p[42] & 0x08) != 0;
  o.local_ack_timeout = p[43] >> 3;
}

void write_path(const Path& o, uint8_t* p) {
  put16(p, o.local_lid);
  put16(p + 2, o.remote_lid);
  put_bytes(p + 4, o.local_gid);
  put_bytes(p + 20, o.remote_gid);
  put32(p + 36, (o.flow_label & 0xfffff) << 12 | (o.packet_rate & 0x3f));
  p[40] = o.traffic_class;
  p[41] = o.hop_limit;
  p[42] = static_cast<uint8_t>((o.sl & 0xf) << 4 | (o.subnet_local ? 0x08 : 0));
  p[43] = static_cast<uint8_t>((o.local_ack_timeout & 0x1f) << 3);
}

void parse_req(const uint8_t* p, Req& o) {
  o.local_comm_id = get32(p);
  o.service_id = get64(p + 8);
  o.local_ca_guid = get64(p + 16);
  o.local_qkey = get32(p + 28);
  o.local_qpn = get24(p + 32);
  o.responder_resources = p[35];
  o.local_eecn = get24(p + 36);
  o.initiator_depth = p[39];
  o.remote_eecn = get24(p + 40);
  o.remote_cm_response_timeout = p[43] >> 3;
  o.transport = (p[43] >> 1) & 3;
  o.end_to_end_flow_control = (p[43] & 1) != 0;
  o.starting_psn = get24(p + 44);
  o.local_cm_response_timeout = p[47] >> 3;
  o.retry_count = p[47] & 7;
  o.pkey = get16(p + 48);
  o.path_mtu = p[50] >> 4;
  o.rdc_exists = (p[50] & 0x08) != 0;
  o.rnr_retry_count = p[50] & 7;
  o.max_cm_retries = p[51] >> 4;
  o.srq = (p[51] & 0x08) != 0;
  o.extended_transport = p[51] & 7;
  parse_path(p + 52, o.primary);
  parse_path(p + 52 + kPathSize, o.alternate);
  get_bytes(p + 140, o.private_data);
}

void write_req(const Req& o, uint8_t* p) {
  put32(p, o.local_comm_id);
  put64(p + 8, o.service_id);
  put64(p + 16, o.local_ca_guid);
  put32(p + 28, o.local_qkey);
  put24(p + 32, o.local_qpn);
  p[35] = o.responder_resources;
  put24(p + 36, o.local_eecn);
  p[39] = o.initiator_depth;
  put24(p + 40, o.remote_eecn);
  p[43] = static_cast<uint8_t>((o.remote_cm_response_timeout & 0x1f) << 3 |
                               (o.transport & 3) << 1 | (o.end_to_end_flow_control ? 1 : 0));
  put24(p + 44, o.starting_psn);
  p[47] = static_cast<uint8_t>((o.local_cm_response_timeout & 0x1f) << 3 | (o.retry_count & 7));
  put16(p + 48, o.pkey);
  p[50] = static_cast<uint8_t>((o.path_mtu & 0xf) << 4 | (o.rdc_exists ? 0x08 : 0) |
                               (o.rnr_retry_count & 7));
  p[51] = static_cast<uint8_t>((o.max_cm_retries & 0xf) << 4 | (o.srq ? 0x08 : 0) |
                               (o.extended_transport & 7));
  write_path(o.primary, p + 52);
  write_path(o.alternate, p + 52 + kPathSize);
  put_bytes(p + 140, o.private_data);
}

void parse_mra(const uint8_t* p, Mra& o) {
  o.local_comm_id = get32(p);
  o.remote_comm_id = get32(p + 4);
  o.msg_mraed = static_cast<MsgRef>(p[8] >> 6);
  o.service_timeout = p[9] >> 3;
  get_bytes(p + 10, o.private_data);
}

void write_mra(const Mra& o, uint8_t* p) {
  put32(p, o.local_comm_id);
  put32(p + 4, o.remote_comm_id);
  p[8] = static_cast<uint8_t>((static_cast<uint8_t>(o.msg_mraed) & 3) << 6);
  p[9] = static_cast<uint8_t>((o.service_timeout & 0x1f) << 3);
  put_bytes(p + 10, o.private_data);
}

void parse_rej(const uint8_t* p, Rej& o) {
  o.local_comm_id = get32(p);
  o.remote_comm_id = get32(p + 4);
  o.msg_rejected = static_cast<MsgRef>(p[8] >> 6);
  o.reject_info_length = p[9] >> 1;
  o.reason = get16(p + 10);
  get_bytes(p + 12, o.ari);
  get_bytes(p + 84, o.private_data);
}

void write_rej(const Rej& o, uint8_t* p) {
  put32(p, o.local_comm_id);
  put32(p + 4, o.remote_comm_id);
  p[8] = static_cast<uint8_t>((static_cast<uint8_t>(o.msg_rejected) & 3) << 6);
  p[9] = static_cast<uint8_t>((o.reject_info_length & 0x7f) << 1);
  put16(p + 10, o.reason);
  put_bytes(p + 12, o.ari);
  put_bytes(p + 84, o.private_data);
}

void parse_rep(const uint8_t* p, Rep& o) {
  o.local_comm_id = get32(p);
  o.remote_comm_id = get32(p + 4);
  o.local_qkey = get32(p + 8);
  o.local_qpn = get24(p + 12);
  o.local_eecn = get24(p + 16);
  o.starting_psn = get24(p + 20);
  o.responder_resources = p[24];
  o.initiator_depth = p[25];
  o.target_ack_delay = p[26] >> 3;
  o.failover_accepted = (p[26] >> 1) & 3;
  o.end_to_end_flow_control = (p[26] & 1) != 0;
  o.rnr_retry_count = p[27] >> 5;
  o.srq = (p[27] & 0x10) != 0;
  o.local_ca_guid = get64(p + 28);
  get_bytes(p + 36, o.private_data);
}

void write_rep(const Rep& o, uint8_t* p) {
  put32(p, o.local_comm_id);
  put32(p + 4, o.remote_comm_id);
  put32(p + 8, o.local_qkey);
  put24(p + 12, o.local_qpn);
  put24(p + 16, o.local_eecn);
  put24(p + 20, o.starting_psn);
  p[24] = o.responder_resources;
  p[25] = o.initiator_depth;
  p[26] = static_cast<uint8_t>((o.target_ack_delay & 0x1f) << 3 | (o.failover_accepted & 3) << 1 |
                               (o.end_to_end_flow_control ? 1 : 0));
  p[27] = static_cast<uint8_t>((o.rnr_retry_count & 7) << 5 | (o.srq ? 0x10 : 0));
  put64(p + 28, o.local_ca_guid);
  put_bytes(p + 36, o.private_data);
}

// RTU, DREQ and DREP: the two comm IDs, then (DREQ) the remote QPN, then private data.
template <typename M>
void parse_ids(const uint8_t* p, M& o) {
  o.local_comm_id = get32(p);
  o.remote_comm_id = get32(p + 4);
}
template <typename M>
void write_ids(const M& o, uint8_t* p) {
  put32(p, o.local_comm_id);
  put32(p + 4, o.remote_comm_id);
}

void parse_sidr_req(const uint8_t* p, SidrReq& o) {
  o.request_id = get32(p);
  o.pkey = get16(p + 4);
  o.service_id = get64(p + 8);
  get_bytes(p + 16, o.private_data);
}

void write_sidr_req(const SidrReq& o, uint8_t* p) {
  put32(p, o.request_id);
  put16(p + 4, o.pkey);
  put64(p + 8, o.service_id);
  put_bytes(p + 16, o.private_data);
}

void parse_sidr_rep(const uint8_t* p, SidrRep& o) {
  o.request_id = get32(p);
  o.status = p[4];
  o.info_length = p[5];
  o.qpn = get24(p + 8);
  o.service_id = get64(p + 12);
  o.qkey = get32(p + 20);
  get_bytes(p + 24, o.info);
  get_bytes(p + 96, o.private_data);
}

void write_sidr_rep(const SidrRep& o, uint8_t* p) {
  put32(p, o.request_id);
  p[4] = o.status;
  p[5] = o.info_length;
  put24(p + 8, o.qpn);
  put64(p + 12, o.service_id);
  put32(p + 20, o.qkey);
  put_bytes(p + 24, o.info);
  put_bytes(p + 96, o.private_data);
}

// Parses the body of a known attribute into the matching alternative; false if unknown.
bool parse_body(uint16_t attr, const uint8_t* p, Message& msg) {
  switch (static_cast<Attr>(attr)) {
    case Attr::kReq: parse_req(p, msg.emplace<Req>()); return true;
    case Attr::kMra: parse_mra(p, msg.emplace<Mra>()); return true;
    case Attr::kRej: parse_rej(p, msg.emplace<Rej>()); return true;
    case Attr::kRep: parse_rep(p, msg.emplace<Rep>()); return true;
    case Attr::kRtu: {
      Rtu& o = msg.emplace<Rtu>();
      parse_ids(p, o);
      get_bytes(p + 8, o.private_data);
      return true;
    }
    case Attr::kDreq: {
      Dreq& o = msg.emplace<Dreq>();
      parse_ids(p, o);
      o.remote_qpn = get24(p + 8);
      get_bytes(p + 12, o.private_data);
      return true;
    }
    case Attr::kDrep: {
      Drep& o = msg.emplace<Drep>();
      parse_ids(p, o);
      get_bytes(p + 8, o.private_data);
      return true;
    }
    case Attr::kSidrReq: parse_sidr_req(p, msg.emplace<SidrReq>()); return true;
    case Attr::kSidrRep: parse_sidr_rep(p, msg.emplace<SidrRep>()); return true;
    default: return false;
  }
}

struct BodyWriter {
  uint8_t* p;
  uint16_t operator()(const Req& o) const { write_req(o, p); return uint16_t(Attr::kReq); }
  uint16_t operator()(const Mra& o) const { write_mra(o, p); return uint16_t(Attr::kMra); }
  uint16_t operator()(const Rej& o) const { write_rej(o, p); return uint16_t(Attr::kRej); }
  uint16_t operator()(const Rep& o) const { write_rep(o, p); return uint16_t(Attr::kRep); }
  uint16_t operator()(const Rtu& o) const {
    write_ids(o, p);
    put_bytes(p + 8, o.private_data);
    return uint16_t(Attr::kRtu);
  }
  uint16_t operator()(const Dreq& o) const {
    write_ids(o, p);
    put24(p + 8, o.remote_qpn);
    put_bytes(p + 12, o.private_data);
    return uint16_t(Attr::kDreq);
  }
  uint16_t operator()(const Drep& o) const {
    write_ids(o, p);
    put_bytes(p + 8, o.private_data);
    return uint16_t(Attr::kDrep);
  }
  uint16_t operator()(const SidrReq& o) const {
    write_sidr_req(o, p);
    return uint16_t(Attr::kSidrReq);
  }
  uint16_t operator()(const SidrRep& o) const {
    write_sidr_rep(o, p);
    return uint16_t(Attr::kSidrRep);
  }
};

}  // namespace

const char* to_string(Attr a) {
  switch (a) {
    case Attr::kReq: return "REQ";
    case Attr::kMra: return "MRA";
    case Attr::kRej: return "REJ";
    case Attr::kRep: return "REP";
    case Attr::kRtu: return "RTU";
    case Attr::kDreq: return "DREQ";
    case Attr::kDrep: return "DREP";
    case Attr::kSidrReq: return "SIDR_REQ";
    case Attr::kSidrRep: return "SIDR_REP";
    case Attr::kLap: return "LAP";
    case Attr::kApr: return "APR";
  }
  return "unknown";
}

const char* to_string(MadError e) {
  switch (e) {
    case MadError::kOk: return "ok";
    case MadError::kBadLength: return "bad length";
    case MadError::kBadVersion: return "bad version";
    case MadError::kNotCm: return "not a CM MAD";
    case MadError::kBadMethod: return "bad method";
    case MadError::kUnknownAttr: return "unknown attribute";
  }
  return "?";
}

MadError parse_mad(std::span<const uint8_t> mad, Mad& out) {
  out = Mad{};
  if (mad.size() != kMadSize) return MadError::kBadLength;
  const uint8_t* p = mad.data();
  MadHeader& h = out.hdr;
  h.base_version = p[0];
  h.mgmt_class = p[1];
  h.class_version = p[2];
  h.method = p[3];
  h.status = get16(p + 4);
  h.class_specific = get16(p + 6);
  h.tid = get64(p + 8);
  h.attr_id = get16(p + 16);
  h.attr_mod = get32(p + 20);
  if (h.mgmt_class != kMgmtClassCm) return MadError::kNotCm;
  if (h.base_version != kBaseVersion || h.class_version != kCmClassVersion) {
    return MadError::kBadVersion;
  }
  if (h.method != kMethodSend) return MadError::kBadMethod;
  if (!parse_body(h.attr_id, p + kMadHeaderSize, out.msg)) return MadError::kUnknownAttr;
  return MadError::kOk;
}

void build_mad(const Mad& mad, uint8_t out[kMadSize]) {
  std::memset(out, 0, kMadSize);
  const MadHeader& h = mad.hdr;
  out[0] = h.base_version;
  out[1] = h.mgmt_class;
  out[2] = h.class_version;
  out[3] = h.method;
  put16(out + 4, h.status);
  put16(out + 6, h.class_specific);
  put64(out + 8, h.tid);
  put16(out + 16, std::visit(BodyWriter{out + kMadHeaderSize}, mad.msg));
  put32(out + 20, h.attr_mod);
}

bool parse_ip_cm_header(std::span<const uint8_t> pd, IpCmHeader& out) {
  out = IpCmHeader{};
  if (pd.size() < kIpCmHeaderSize) return false;
  out.version = pd[0];
  const uint8_t ipv = pd[1] >> 4;
  if (out.version != 0 || (ipv != 4 && ipv != 6)) return false;
  out.ipv6 = ipv == 6;
  out.src_port = get16(&pd[2]);
  const size_t skip = out.ipv6 ? 0 : 12;  // IPv4: the last 4 of the 16 bytes
  const size_t n = out.ipv6 ? 16 : 4;
  std::copy_n(&pd[4 + skip], n, out.src.begin());
  std::copy_n(&pd[20 + skip], n, out.dst.begin());
  return true;
}

void write_ip_cm_header(const IpCmHeader& h, uint8_t out[kIpCmHeaderSize]) {
  std::memset(out, 0, kIpCmHeaderSize);
  out[0] = h.version;
  out[1] = static_cast<uint8_t>((h.ipv6 ? 6 : 4) << 4);
  put16(out + 2, h.src_port);
  const size_t skip = h.ipv6 ? 0 : 12;
  const size_t n = h.ipv6 ? 16 : 4;
  std::copy_n(h.src.begin(), n, out + 4 + skip);
  std::copy_n(h.dst.begin(), n, out + 20 + skip);
}

void build_gsi_packet(const IpUdpInfo& ip, uint32_t psn, const uint8_t mad[kMadSize],
                      uint8_t out[kGsiPacketSize]) {
  Packet p;
  p.bth.opcode = kUdSendOnly;
  p.bth.mig_req = false;
  p.bth.dest_qp = kGsiQpn;
  p.bth.psn = psn & 0xffffff;
  p.deth.qkey = kGsiQkey;
  p.deth.src_qp = kGsiQpn;
  const size_t h = write_headers(p, out);
  std::memcpy(out + h, mad, kMadSize);
  store_icrc(compute_icrc(ip, {out, h + kMadSize}), out + h + kMadSize);
}

std::span<const uint8_t> gsi_mad(const Packet& p) {
  if (p.bth.opcode != kUdSendOnly || p.bth.dest_qp != kGsiQpn || p.deth.qkey != kGsiQkey ||
      p.payload.size() != kMadSize) {
    return {};
  }
  return p.payload;
}

}  // namespace vrnic::wire::cm
