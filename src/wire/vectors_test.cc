// Tests against shared/vectors (independently built RoCEv2 frames): fields, exact rebuild, ICRC, corruption.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "wire/frame.h"
#include "wire/headers.h"
#include "wire/icrc.h"
#include "wire/opcode.h"
#include "wire/vectors_reader.h"

namespace vrnic::wire {
namespace {

using namespace vrnic::wire::vector_files;

TEST(Vectors, read__pcap_and_json_agree) {
  const auto& all = vectors();
  ASSERT_EQ(all.size(), 31u) << "vectors not found or unreadable in " << VRNIC_VECTORS_DIR;
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(num(all[i].json, "index"), i);
    EXPECT_EQ(all[i].frame, from_hex(all[i].json.at("frame_hex").str)) << i;
  }
}

TEST(Vectors, parse__every_field) {
  for (const Vector& v : vectors()) {
    const Object& j = v.json;
    SCOPED_TRACE(j.at("name").str);
    IpUdpInfo ip;
    const auto udp = parse_frame(v.frame, ip);
    ASSERT_FALSE(udp.empty());
    EXPECT_EQ(ip.ipv6, num(j, "ipv6") != 0);
    EXPECT_EQ(ip.ip_id, num(j, "ip_id"));
    EXPECT_EQ(ip.dst_port, kRoceV2Port);
    if (has(j, "udp_sport")) {
      EXPECT_EQ(ip.src_port, num(j, "udp_sport"));
    }

    Packet p;
    ASSERT_EQ(parse_packet(udp, p), ParseError::kOk);
    const OpcodeInfo& info = opcode_info(p.bth.opcode);
    EXPECT_EQ(p.bth.opcode, num(j, "opcode"));
    EXPECT_EQ(p.bth.dest_qp, num(j, "dqpn"));
    EXPECT_EQ(p.bth.psn, num(j, "psn"));
    EXPECT_EQ(p.bth.ack_req, num(j, "ackreq") != 0);
    if (has(j, "se")) {
      EXPECT_EQ(p.bth.solicited, num(j, "se") != 0);
    }
    if (has(j, "padcnt")) {
      EXPECT_EQ(p.bth.pad_count, num(j, "padcnt"));
    }
    if (has(j, "payload_len")) {
      EXPECT_EQ(p.payload.size(), num(j, "payload_len"));
    }
    EXPECT_EQ(p.bth.tver, 0);
    EXPECT_EQ(p.bth.pkey, 0xffff);

    // The JSON lists exactly the extended-header fields the opcode carries.
    EXPECT_EQ(has(j, "reth_va"), info.has(kHasReth));
    EXPECT_EQ(has(j, "aeth_syndrome"), info.has(kHasAeth));
    EXPECT_EQ(has(j, "atomic_va"), info.has(kHasAtomicEth));
    EXPECT_EQ(has(j, "atomic_orig"), info.has(kHasAtomicAckEth));
    EXPECT_EQ(has(j, "immdt"), info.has(kHasImm));
    EXPECT_EQ(has(j, "ieth_rkey"), info.has(kHasIeth));
    EXPECT_EQ(has(j, "deth_qkey"), info.has(kHasDeth));
    if (info.has(kHasReth)) {
      EXPECT_EQ(p.reth.va, num(j, "reth_va"));
      EXPECT_EQ(p.reth.rkey, num(j, "reth_rkey"));
      EXPECT_EQ(p.reth.dma_len, num(j, "reth_dmalen"));
    }
    if (info.has(kHasAeth)) {
      EXPECT_EQ(p.aeth.syndrome, num(j, "aeth_syndrome"));
      EXPECT_EQ(p.aeth.msn, num(j, "aeth_msn"));
    }
    if (info.has(kHasAtomicEth)) {
      EXPECT_EQ(p.atomic.va, num(j, "atomic_va"));
      EXPECT_EQ(p.atomic.rkey, num(j, "atomic_rkey"));
      EXPECT_EQ(p.atomic.swap_add, num(j, "atomic_swap_add"));
      EXPECT_EQ(p.atomic.compare, num(j, "atomic_compare"));
    }
    if (info.has(kHasAtomicAckEth)) {
      EXPECT_EQ(p.atomic_ack.orig, num(j, "atomic_orig"));
    }
    if (info.has(kHasImm)) {
      EXPECT_EQ(ntohl(p.imm), num(j, "immdt"));
    }
    if (info.has(kHasIeth)) {
      EXPECT_EQ(p.ieth_rkey, num(j, "ieth_rkey"));
    }
    if (info.has(kHasDeth)) {
      EXPECT_EQ(p.deth.qkey, num(j, "deth_qkey"));
      EXPECT_EQ(p.deth.src_qp, num(j, "deth_srcqp"));
    }
    EXPECT_EQ(stored_icrc(udp), ntohl(static_cast<uint32_t>(
                                    std::stoul(j.at("icrc_le").str, nullptr, 16))));
  }
}

TEST(Vectors, rebuild__identical_bytes) {
  for (const Vector& v : vectors()) {
    SCOPED_TRACE(v.json.at("name").str);
    IpUdpInfo ip;
    const auto udp = parse_frame(v.frame, ip);
    Packet p;
    ASSERT_EQ(parse_packet(udp, p), ParseError::kOk);
    // Headers, payload, zero pad bytes, then the ICRC computed from scratch.
    const size_t hdr = header_size(p.bth.opcode);
    Bytes t(hdr + p.payload.size() + p.bth.pad_count + kIcrcSize, 0);
    ASSERT_EQ(write_headers(p, t.data()), hdr);
    std::memcpy(t.data() + hdr, p.payload.data(), p.payload.size());
    const size_t transport = t.size() - kIcrcSize;
    store_icrc(compute_icrc(ip, std::span(t).first(transport)), t.data() + transport);
    EXPECT_TRUE(std::equal(t.begin(), t.end(), udp.begin(), udp.end()));

    if (is_hardware_capture(v)) {
      const Bytes f = build_frame(ip, t, 0xc2);
      ASSERT_EQ(f.size(), v.frame.size());
      EXPECT_TRUE(std::equal(f.begin() + kEth, f.end(), v.frame.begin() + kEth));
    } else {
      // The vectors mark every packet ECN-capable (ECT(0)), as RoCEv2 senders do.
      EXPECT_EQ(build_frame(ip, t, 0x02), v.frame);
    }
  }
}

TEST(Vectors, icrc__every_frame_verifies) {
  int recovered = 0;
  for (const Vector& v : vectors()) {
    SCOPED_TRACE(v.json.at("name").str);
    IpUdpInfo ip;
    const auto udp = parse_frame(v.frame, ip);
    EXPECT_EQ(verify_icrc(ip, udp), IcrcVerdict::kOk);
    uint32_t whole = 0;
    ASSERT_TRUE(compute_icrc_ip_packet(std::span(v.frame).subspan(kEth), whole));
    EXPECT_EQ(whole, stored_icrc(udp));

    // As a UDP socket sees it: the ID is unknown and taken as 0.
    const uint16_t true_id = ip.ip_id;
    ip.ip_id = 0;
    ip.ip_id_known = false;
    uint16_t id = 0;
    const IcrcVerdict hidden = verify_icrc(ip, udp, &id);
    if (true_id == 0) {
      EXPECT_EQ(hidden, IcrcVerdict::kOk);
    } else {
      EXPECT_EQ(hidden, IcrcVerdict::kOkRecoveredIpId);
      EXPECT_EQ(id, true_id);
      EXPECT_EQ(id, 0x718c);
      ++recovered;
      // Told the ID was seen, the same check rejects.
      ip.ip_id_known = true;
      EXPECT_EQ(verify_icrc(ip, udp), IcrcVerdict::kBad);
    }
  }
  EXPECT_EQ(recovered, 2);  // the non-zero-ID SEND and the captured CNP
}

}  // namespace
}  // namespace vrnic::wire
