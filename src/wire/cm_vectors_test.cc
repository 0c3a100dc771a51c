// Tests against shared/vectors/rocev2_cm.*: every CM frame parsed, every JSON field checked, rebuilt byte for byte.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "wire/cm_mad.h"
#include "wire/frame.h"
#include "wire/headers.h"
#include "wire/icrc.h"
#include "wire/opcode.h"
#include "wire/vectors_reader.h"

namespace vrnic::wire::cm {
namespace {

using namespace vrnic::wire::vector_files;

// A frame split into its layers.
struct Parsed {
  IpUdpInfo ip;
  std::vector<uint8_t> udp;  // the UDP payload: BTH .. ICRC
  Packet packet;
  Mad mad;
};

Parsed parse_vector(const Vector& v) {
  Parsed out;
  const auto udp = parse_frame(v.frame, out.ip);
  out.udp.assign(udp.begin(), udp.end());
  EXPECT_EQ(parse_packet(out.udp, out.packet), ParseError::kOk);
  const auto mad = gsi_mad(out.packet);
  EXPECT_EQ(mad.size(), kMadSize);
  EXPECT_EQ(parse_mad(mad, out.mad), MadError::kOk);
  return out;
}

template <size_t N>
std::string hex_prefix(const std::array<uint8_t, N>& a, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += d[a[i] >> 4];
    s += d[a[i] & 15];
  }
  return s;
}

// The user's private data: `expect` (hex) at offset `at`, zeros after it.
template <size_t N>
void expect_private(const Object& j, const std::array<uint8_t, N>& pd, size_t at = 0) {
  const std::string want = has(j, "user_private_data") ? j.at("user_private_data").str : "";
  std::array<uint8_t, N> shifted{};
  std::copy(pd.begin() + at, pd.end(), shifted.begin());
  EXPECT_EQ(hex_prefix(shifted, want.size() / 2), want);
  for (size_t i = at + want.size() / 2; i < N; ++i) ASSERT_EQ(pd[i], 0) << "byte " << i;
}

std::string ip_text(const std::array<uint8_t, 16>& a, bool v6) {
  char buf[INET6_ADDRSTRLEN];
  inet_ntop(v6 ? AF_INET6 : AF_INET, a.data(), buf, sizeof buf);
  return buf;
}

// The IP CM header of a REQ / SIDR_REQ: port space, port, addresses, source port.
template <size_t N>
void expect_ip_cm(const Object& j, uint64_t sid, const std::array<uint8_t, N>& pd) {
  EXPECT_EQ(service_port_space(sid), num(j, "ps"));
  EXPECT_EQ(service_port(sid), num(j, "port"));
  EXPECT_TRUE(is_ip_service_id(sid));
  IpCmHeader h;
  ASSERT_TRUE(parse_ip_cm_header(pd, h));
  EXPECT_EQ(h.ipv6, has(j, "ipv6") && num(j, "ipv6") != 0);
  EXPECT_EQ(h.src_port, num(j, "ip_cm_sport"));
  EXPECT_EQ(ip_text(h.src, h.ipv6), j.at("ip_cm_src").str);
  EXPECT_EQ(ip_text(h.dst, h.ipv6), j.at("ip_cm_dst").str);
  expect_private(j, pd, kIpCmHeaderSize);
}

void expect_req(const Object& j, const Req& m) {
  EXPECT_EQ(m.local_comm_id, num(j, "local_comm_id"));
  EXPECT_EQ(m.service_id, num(j, "service_id"));
  if (has(j, "local_ca_guid")) {
    EXPECT_EQ(m.local_ca_guid, num(j, "local_ca_guid"));
  }
  EXPECT_EQ(m.local_qpn, num(j, "local_qpn"));
  EXPECT_EQ(m.responder_resources, num(j, "responder_resources"));
  EXPECT_EQ(m.initiator_depth, num(j, "initiator_depth"));
  EXPECT_EQ(m.starting_psn, num(j, "starting_psn"));
  EXPECT_EQ(m.path_mtu, num(j, "path_mtu"));
  if (has(j, "retry_count")) {
    EXPECT_EQ(m.retry_count, num(j, "retry_count"));
  }
  if (has(j, "rnr_retry_count")) {
    EXPECT_EQ(m.rnr_retry_count, num(j, "rnr_retry_count"));
  }
  if (has(j, "transport")) {
    EXPECT_EQ(j.at("transport").str, "RC");
  }
  EXPECT_EQ(m.transport, 0);  // RC
  EXPECT_EQ(m.pkey, 0xffff);
  // RoCE paths: permissive LIDs, the IP addresses as GIDs (IPv4-mapped).
  EXPECT_EQ(m.primary.local_lid, 0xffff);
  EXPECT_EQ(m.primary.remote_lid, 0xffff);
  IpCmHeader h;
  ASSERT_TRUE(parse_ip_cm_header(m.private_data, h));
  EXPECT_EQ(m.primary.local_gid, gid_of_ip(h.src, h.ipv6));
  EXPECT_EQ(m.primary.remote_gid, gid_of_ip(h.dst, h.ipv6));
  expect_ip_cm(j, m.service_id, m.private_data);
}

void expect_rep(const Object& j, const Rep& m) {
  EXPECT_EQ(m.local_comm_id, num(j, "local_comm_id"));
  EXPECT_EQ(m.remote_comm_id, num(j, "remote_comm_id"));
  EXPECT_EQ(m.local_qpn, num(j, "local_qpn"));
  EXPECT_EQ(m.starting_psn, num(j, "starting_psn"));
  EXPECT_EQ(m.responder_resources, num(j, "responder_resources"));
  EXPECT_EQ(m.initiator_depth, num(j, "initiator_depth"));
  EXPECT_EQ(m.local_ca_guid, num(j, "local_ca_guid"));
  expect_private(j, m.private_data);
}

void expect_message(const Object& j, const Mad& mad) {
  const std::string attr = j.at("attr").str;
  EXPECT_EQ(to_string(static_cast<Attr>(mad.hdr.attr_id)), attr);
  if (const auto* m = std::get_if<Req>(&mad.msg)) {
    expect_req(j, *m);
  } else if (const auto* m = std::get_if<Rep>(&mad.msg)) {
    expect_rep(j, *m);
  } else if (const auto* m = std::get_if<Mra>(&mad.msg)) {
    EXPECT_EQ(m->local_comm_id, num(j, "local_comm_id"));
    EXPECT_EQ(m->remote_comm_id, num(j, "remote_comm_id"));
    EXPECT_EQ(static_cast<uint64_t>(m->msg_mraed), num(j, "msg_mraed"));
    EXPECT_EQ(m->service_timeout, num(j, "service_timeout"));
    expect_private(j, m->private_data);
  } else if (const auto* m = std::get_if<Rej>(&mad.msg)) {
    EXPECT_EQ(m->local_comm_id, num(j, "local_comm_id"));
    EXPECT_EQ(m->remote_comm_id, num(j, "remote_comm_id"));
    EXPECT_EQ(static_cast<uint64_t>(m->msg_rejected), num(j, "msg_rejected"));
    EXPECT_EQ(m->reason, num(j, "reason"));
    expect_private(j, m->private_data);
  } else if (const auto* m = std::get_if<Rtu>(&mad.msg)) {
    EXPECT_EQ(m->local_comm_id, num(j, "local_comm_id"));
    EXPECT_EQ(m->remote_comm_id, num(j, "remote_comm_id"));
    expect_private(j, m->private_data);
  } else if (const auto* m = std::get_if<Dreq>(&mad.msg)) {
    EXPECT_EQ(m->local_comm_id, num(j, "local_comm_id"));
    EXPECT_EQ(m->remote_comm_id, num(j, "remote_comm_id"));
    EXPECT_EQ(m->remote_qpn, num(j, "remote_qpn"));
    expect_private(j, m->private_data);
  } else if (const auto* m = std::get_if<Drep>(&mad.msg)) {
    EXPECT_EQ(m->local_comm_id, num(j, "local_comm_id"));
    EXPECT_EQ(m->remote_comm_id, num(j, "remote_comm_id"));
    expect_private(j, m->private_data);
  } else if (const auto* m = std::get_if<SidrReq>(&mad.msg)) {
    EXPECT_EQ(m->request_id, num(j, "request_id"));
    EXPECT_EQ(m->service_id, num(j, "service_id"));
    expect_ip_cm(j, m->service_id, m->private_data);
  } else if (const auto* m = std::get_if<SidrRep>(&mad.msg)) {
    EXPECT_EQ(m->request_id, num(j, "request_id"));
    EXPECT_EQ(m->status, num(j, "status"));
    EXPECT_EQ(m->qpn, num(j, "qpn"));
    EXPECT_EQ(m->service_id, num(j, "service_id"));
    EXPECT_EQ(m->qkey, num(j, "qkey"));
    expect_private(j, m->private_data);
  } else {
    ADD_FAILURE() << "unexpected message type";
  }
}

TEST(CmVectors, read__pcap_and_json_agree) {
  const auto& all = cm_vectors();
  ASSERT_EQ(all.size(), 11u) << "CM vectors not found or unreadable in " << VRNIC_VECTORS_DIR;
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(num(all[i].json, "index"), i);
    EXPECT_EQ(all[i].frame, from_hex(all[i].json.at("frame_hex").str)) << i;
  }
}

TEST(CmVectors, parse__gsi_datagram_and_every_field) {
  ASSERT_EQ(cm_vectors().size(), 11u);
  for (const Vector& v : cm_vectors()) {
    SCOPED_TRACE(v.json.at("name").str);
    const Parsed p = parse_vector(v);
    EXPECT_EQ(p.ip.ipv6, has(v.json, "ipv6") && num(v.json, "ipv6") != 0);
    EXPECT_EQ(p.packet.bth.opcode, kUdSendOnly);
    EXPECT_EQ(p.packet.bth.dest_qp, kGsiQpn);
    EXPECT_EQ(p.packet.deth.qkey, kGsiQkey);
    EXPECT_EQ(p.packet.deth.src_qp, kGsiQpn);
    EXPECT_EQ(p.mad.hdr.base_version, kBaseVersion);
    EXPECT_EQ(p.mad.hdr.mgmt_class, kMgmtClassCm);
    EXPECT_EQ(p.mad.hdr.class_version, kCmClassVersion);
    EXPECT_EQ(p.mad.hdr.method, kMethodSend);
    EXPECT_EQ(p.mad.hdr.attr_id, num(v.json, "attr_id"));
    expect_message(v.json, p.mad);
  }
}

TEST(CmVectors, build__identical_mad_packet_and_frame) {
  ASSERT_EQ(cm_vectors().size(), 11u);
  for (const Vector& v : cm_vectors()) {
    SCOPED_TRACE(v.json.at("name").str);
    const Parsed p = parse_vector(v);
    uint8_t mad[kMadSize];
    build_mad(p.mad, mad);
    uint8_t pkt[kGsiPacketSize];
    build_gsi_packet(p.ip, p.packet.bth.psn, mad, pkt);
    EXPECT_EQ(std::vector<uint8_t>(pkt, pkt + kGsiPacketSize), p.udp);
    const auto frame = build_frame(p.ip, pkt);
    ASSERT_EQ(frame.size(), v.frame.size());
    // From the EtherType on: the vectors give every frame the same two MACs whichever way
    // it goes, where build_frame derives them from the IP addresses.
    EXPECT_TRUE(std::equal(frame.begin() + 12, frame.end(), v.frame.begin() + 12));
    EXPECT_EQ(verify_icrc(p.ip, pkt), IcrcVerdict::kOk);
  }
}

}  // namespace
}  // namespace vrnic::wire::cm
