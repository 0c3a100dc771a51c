// Unit tests of the CM MAD formats: bit packing of every field, refusals, the IP CM header, GSI framing.
#include "wire/cm_mad.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "wire/opcode.h"

namespace vrnic::wire::cm {
namespace {

template <typename M>
M roundtrip(const M& m) {
  Mad in{.hdr = {}, .msg = m};
  in.hdr.tid = 0x0123456789abcdefull;
  uint8_t bytes[kMadSize];
  build_mad(in, bytes);
  Mad out;
  EXPECT_EQ(parse_mad({bytes, kMadSize}, out), MadError::kOk);
  EXPECT_EQ(out.hdr.tid, in.hdr.tid);
  const M* got = std::get_if<M>(&out.msg);
  EXPECT_NE(got, nullptr);
  return got ? *got : M{};
}

Path full_path() {
  Path p;
  p.local_lid = 0xfffe;
  p.remote_lid = 0x1234;
  p.local_gid.fill(0xa5);
  p.remote_gid.fill(0x5a);
  p.flow_label = 0xfffff;
  p.packet_rate = 0x3f;
  p.traffic_class = 0xb8;
  p.hop_limit = 255;
  p.sl = 15;
  p.subnet_local = true;
  p.local_ack_timeout = 31;
  return p;
}

void expect_path_eq(const Path& a, const Path& b) {
  EXPECT_EQ(a.local_lid, b.local_lid);
  EXPECT_EQ(a.remote_lid, b.remote_lid);
  EXPECT_EQ(a.local_gid, b.local_gid);
  EXPECT_EQ(a.remote_gid, b.remote_gid);
  EXPECT_EQ(a.flow_label, b.flow_label);
  EXPECT_EQ(a.packet_rate, b.packet_rate);
  EXPECT_EQ(a.traffic_class, b.traffic_class);
  EXPECT_EQ(a.hop_limit, b.hop_limit);
  EXPECT_EQ(a.sl, b.sl);
  EXPECT_EQ(a.subnet_local, b.subnet_local);
  EXPECT_EQ(a.local_ack_timeout, b.local_ack_timeout);
}

TEST(CmMad, build_mad__req_every_field_at_its_maximum_survives) {
  Req r;
  r.local_comm_id = 0xffffffff;
  r.service_id = 0x0000000001061c06;
  r.local_ca_guid = 0x0123456789abcdef;
  r.local_qkey = 0x11111111;
  r.local_qpn = 0xffffff;
  r.responder_resources = 255;
  r.local_eecn = 0xabcdef;
  r.initiator_depth = 254;
  r.remote_eecn = 0x123456;
  r.remote_cm_response_timeout = 31;
  r.transport = 3;
  r.end_to_end_flow_control = true;
  r.starting_psn = 0xfffffe;
  r.local_cm_response_timeout = 30;
  r.retry_count = 7;
  r.pkey = 0x7fff;
  r.path_mtu = 15;
  r.rdc_exists = true;
  r.rnr_retry_count = 6;
  r.max_cm_retries = 15;
  r.srq = true;
  r.extended_transport = 7;
  r.primary = full_path();
  r.alternate = full_path();
  r.alternate.sl = 3;
  r.private_data.fill(0xee);
  const Req o = roundtrip(r);
  EXPECT_EQ(o.local_comm_id, r.local_comm_id);
  EXPECT_EQ(o.service_id, r.service_id);
  EXPECT_EQ(o.local_ca_guid, r.local_ca_guid);
  EXPECT_EQ(o.local_qkey, r.local_qkey);
  EXPECT_EQ(o.local_qpn, r.local_qpn);
  EXPECT_EQ(o.responder_resources, r.responder_resources);
  EXPECT_EQ(o.local_eecn, r.local_eecn);
  EXPECT_EQ(o.initiator_depth, r.initiator_depth);
  EXPECT_EQ(o.remote_eecn, r.remote_eecn);
  EXPECT_EQ(o.remote_cm_response_timeout, r.remote_cm_response_timeout);
  EXPECT_EQ(o.transport, r.transport);
  EXPECT_EQ(o.end_to_end_flow_control, r.end_to_end_flow_control);
  EXPECT_EQ(o.starting_psn, r.starting_psn);
  EXPECT_EQ(o.local_cm_response_timeout, r.local_cm_response_timeout);
  EXPECT_EQ(o.retry_count, r.retry_count);
  EXPECT_EQ(o.pkey, r.pkey);
  EXPECT_EQ(o.path_mtu, r.path_mtu);
  EXPECT_EQ(o.rdc_exists, r.rdc_exists);
  EXPECT_EQ(o.rnr_retry_count, r.rnr_retry_count);
  EXPECT_EQ(o.max_cm_retries, r.max_cm_retries);
  EXPECT_EQ(o.srq, r.srq);
  EXPECT_EQ(o.extended_transport, r.extended_transport);
  expect_path_eq(o.primary, r.primary);
  expect_path_eq(o.alternate, r.alternate);
  EXPECT_EQ(o.private_data, r.private_data);
}

TEST(CmMad, build_mad__rep_every_field_survives) {
  Rep r;
  r.local_comm_id = 1;
  r.remote_comm_id = 0xfffffffe;
  r.local_qkey = 0x80010000;
  r.local_qpn = 0xfffffe;
  r.local_eecn = 0x000001;
  r.starting_psn = 0xffffff;
  r.responder_resources = 16;
  r.initiator_depth = 255;
  r.target_ack_delay = 31;
  r.failover_accepted = 3;
  r.end_to_end_flow_control = true;
  r.rnr_retry_count = 7;
  r.srq = true;
  r.local_ca_guid = ~0ull;
  r.private_data.fill(0x42);
  const Rep o = roundtrip(r);
  EXPECT_EQ(o.local_comm_id, r.local_comm_id);
  EXPECT_EQ(o.remote_comm_id, r.remote_comm_id);
  EXPECT_EQ(o.local_qkey, r.local_qkey);
  EXPECT_EQ(o.local_qpn, r.local_qpn);
  EXPECT_EQ(o.local_eecn, r.local_eecn);
  EXPECT_EQ(o.starting_psn, r.starting_psn);
  EXPECT_EQ(o.responder_resources, r.responder_resources);
  EXPECT_EQ(o.initiator_depth, r.initiator_depth);
  EXPECT_EQ(o.target_ack_delay, r.target_ack_delay);
  EXPECT_EQ(o.failover_accepted, r.failover_accepted);
  EXPECT_EQ(o.end_to_end_flow_control, r.end_to_end_flow_control);
  EXPECT_EQ(o.rnr_retry_count, r.rnr_retry_count);
  EXPECT_EQ(o.srq, r.srq);
  EXPECT_EQ(o.local_ca_guid, r.local_ca_guid);
  EXPECT_EQ(o.private_data, r.private_data);
}

TEST(CmMad, build_mad__short_messages_survive) {
  Mra mra{.local_comm_id = 7, .remote_comm_id = 8, .msg_mraed = MsgRef::kLap,
          .service_timeout = 31, .private_data = {}};
  mra.private_data.back() = 1;
  const Mra m = roundtrip(mra);
  EXPECT_EQ(m.msg_mraed, MsgRef::kLap);
  EXPECT_EQ(m.service_timeout, 31);
  EXPECT_EQ(m.private_data, mra.private_data);

  Rej rej{.local_comm_id = 1, .remote_comm_id = 2, .msg_rejected = MsgRef::kRep,
          .reject_info_length = 127, .reason = 28, .ari = {}, .private_data = {}};
  rej.ari.fill(3);
  rej.private_data.fill(4);
  const Rej j = roundtrip(rej);
  EXPECT_EQ(j.msg_rejected, MsgRef::kRep);
  EXPECT_EQ(j.reject_info_length, 127);
  EXPECT_EQ(j.reason, 28);
  EXPECT_EQ(j.ari, rej.ari);
  EXPECT_EQ(j.private_data, rej.private_data);

  Dreq dreq{.local_comm_id = 5, .remote_comm_id = 6, .remote_qpn = 0xabcdef, .private_data = {}};
  dreq.private_data.back() = 9;
  const Dreq d = roundtrip(dreq);
  EXPECT_EQ(d.remote_qpn, 0xabcdefu);
  EXPECT_EQ(d.private_data, dreq.private_data);

  SidrRep sr{.request_id = 3, .status = 2, .info_length = 72, .qpn = 0x123456,
             .service_id = 0x1111c06, .qkey = 0xdeadbeef, .info = {}, .private_data = {}};
  sr.info.fill(1);
  sr.private_data.fill(2);
  const SidrRep s = roundtrip(sr);
  EXPECT_EQ(s.status, 2);
  EXPECT_EQ(s.info_length, 72);
  EXPECT_EQ(s.qpn, 0x123456u);
  EXPECT_EQ(s.qkey, 0xdeadbeefu);
  EXPECT_EQ(s.info, sr.info);
  EXPECT_EQ(s.private_data, sr.private_data);
}

std::vector<uint8_t> valid_rtu() {
  std::vector<uint8_t> b(kMadSize);
  build_mad(Mad{.hdr = {}, .msg = Rtu{}}, b.data());
  return b;
}

TEST(CmMad, parse_mad__refuses_what_is_not_a_cm_send) {
  Mad m;
  auto b = valid_rtu();
  EXPECT_EQ(parse_mad(b, m), MadError::kOk);
  EXPECT_EQ(parse_mad({b.data(), kMadSize - 1}, m), MadError::kBadLength);
  b.push_back(0);
  EXPECT_EQ(parse_mad(b, m), MadError::kBadLength);
  EXPECT_EQ(parse_mad({}, m), MadError::kBadLength);

  b = valid_rtu();
  b[1] = 0x04;  // the performance-management class
  EXPECT_EQ(parse_mad(b, m), MadError::kNotCm);
  b = valid_rtu();
  b[0] = 2;
  EXPECT_EQ(parse_mad(b, m), MadError::kBadVersion);
  b = valid_rtu();
  b[2] = 1;
  EXPECT_EQ(parse_mad(b, m), MadError::kBadVersion);
  b = valid_rtu();
  b[3] = 0x01;  // Get
  EXPECT_EQ(parse_mad(b, m), MadError::kBadMethod);
  for (uint16_t attr : {0x0001, 0x0019, 0x001a, 0x000f, 0x001b, 0xffff}) {
    b = valid_rtu();
    b[16] = static_cast<uint8_t>(attr >> 8);
    b[17] = static_cast<uint8_t>(attr);
    EXPECT_EQ(parse_mad(b, m), MadError::kUnknownAttr) << attr;
  }
}

TEST(CmMad, ip_cm_header__ipv4_and_ipv6_roundtrip_and_bad_versions_refused) {
  IpCmHeader h4{.version = 0, .ipv6 = false, .src_port = 41000, .src = {192, 0, 2, 1},
                .dst = {192, 0, 2, 2}};
  uint8_t b[kIpCmHeaderSize];
  write_ip_cm_header(h4, b);
  EXPECT_EQ(b[1], 0x40);
  EXPECT_EQ(b[4 + 12], 192);  // IPv4 in the last four of sixteen bytes
  EXPECT_EQ(b[4], 0);
  IpCmHeader o;
  ASSERT_TRUE(parse_ip_cm_header({b, sizeof b}, o));
  EXPECT_FALSE(o.ipv6);
  EXPECT_EQ(o.src_port, 41000);
  EXPECT_EQ(o.src, h4.src);
  EXPECT_EQ(o.dst, h4.dst);

  IpCmHeader h6{.version = 0, .ipv6 = true, .src_port = 1, .src = {0xfd, 0, 0, 0, 0, 0, 0, 0,
                0, 0, 0, 0, 0, 0, 0, 1}, .dst = {0xfd}};
  write_ip_cm_header(h6, b);
  ASSERT_TRUE(parse_ip_cm_header({b, sizeof b}, o));
  EXPECT_TRUE(o.ipv6);
  EXPECT_EQ(o.src, h6.src);
  EXPECT_EQ(o.dst, h6.dst);

  EXPECT_FALSE(parse_ip_cm_header({b, kIpCmHeaderSize - 1}, o));
  b[0] = 0x10;  // MajV 1
  EXPECT_FALSE(parse_ip_cm_header({b, sizeof b}, o));
  b[0] = 0;
  b[1] = 0x50;  // IP version 5
  EXPECT_FALSE(parse_ip_cm_header({b, sizeof b}, o));
}

TEST(CmMad, service_id__port_space_and_port) {
  EXPECT_EQ(service_id(uint16_t(PortSpace::kTcp), 7174), 0x0000000001061c06ull);
  EXPECT_EQ(service_port_space(0x0000000001111c06ull), uint16_t(PortSpace::kUdp));
  EXPECT_EQ(service_port(0x0000000001111c06ull), 7174);
  EXPECT_TRUE(is_ip_service_id(service_id(uint16_t(PortSpace::kIb), 1)));
  EXPECT_FALSE(is_ip_service_id(0x1000000000000001ull));
}

TEST(CmMad, gid_of_ip__ipv4_mapped) {
  const auto g = gid_of_ip({10, 1, 2, 3}, false);
  const std::array<uint8_t, 16> want{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 1, 2, 3};
  EXPECT_EQ(g, want);
  std::array<uint8_t, 16> v6{0xfe, 0x80};
  EXPECT_EQ(gid_of_ip(v6, true), v6);
}

TEST(CmMad, gsi_mad__only_ud_sends_to_qp1_with_the_gsi_qkey) {
  IpUdpInfo ip;
  ip.src = {127, 0, 0, 1};
  ip.dst = {127, 0, 0, 2};
  const auto rtu = valid_rtu();
  uint8_t pkt[kGsiPacketSize];
  build_gsi_packet(ip, 5, rtu.data(), pkt);
  EXPECT_EQ(verify_icrc(ip, {pkt, sizeof pkt}), IcrcVerdict::kOk);
  Packet p;
  ASSERT_EQ(parse_packet({pkt, sizeof pkt}, p), ParseError::kOk);
  EXPECT_EQ(p.bth.psn, 5u);
  EXPECT_FALSE(p.bth.mig_req);
  ASSERT_EQ(gsi_mad(p).size(), kMadSize);
  EXPECT_EQ(std::memcmp(gsi_mad(p).data(), rtu.data(), kMadSize), 0);

  Packet q = p;
  q.deth.qkey = 0x80010001;
  EXPECT_TRUE(gsi_mad(q).empty());
  q = p;
  q.bth.dest_qp = 2;
  EXPECT_TRUE(gsi_mad(q).empty());
  q = p;
  q.payload = q.payload.first(kMadSize - 4);
  EXPECT_TRUE(gsi_mad(q).empty());
  q = p;
  q.bth.opcode = kUdSendOnlyImm;
  EXPECT_TRUE(gsi_mad(q).empty());
}

}  // namespace
}  // namespace vrnic::wire::cm
