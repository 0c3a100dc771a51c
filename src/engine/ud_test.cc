// UD and UC over the loop wire: bytes, CQE fields, the GRH in the receive buffer, Q_Key rules,
// address handles, multicast, UC loss semantics, and the post-time and modify_qp checks.
#include <gtest/gtest.h>

#include <cerrno>

#include "engine/memory_table.h"
#include "engine/test_fabric.h"
#include "engine/ud.h"
#include "wire/opcode.h"

namespace vrnic::engine::testing {
namespace {

constexpr uint32_t kQkey = 0x11111111;

wire::Packet parse(const WirePacket& p) {
  wire::Packet h;
  EXPECT_EQ(wire::parse_packet(p.data, h), wire::ParseError::kOk);
  return h;
}

Qp* make_qp(Node& n, QpType type, uint32_t depth = 64) {
  QpInitAttr init;
  init.type = type;
  init.pd = n.pd;
  init.send_cq = init.recv_cq = n.cq;
  init.cap = {depth, depth, 4, 4, 64};
  Errno err = -1;
  Qp* qp = n.dev->create_qp(init, err);
  EXPECT_EQ(err, 0);
  EXPECT_NE(qp, nullptr);
  return qp;
}

// RESET -> INIT -> RTR -> RTS with the UD attributes (ibv_ud_pingpong's masks).
void ud_up(Node& n, Qp* qp, uint32_t qkey = kQkey) {
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.qkey = qkey;
  ASSERT_EQ(n.dev->modify_qp(qp, a, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrQkey), 0);
  a.qp_state = QpState::kRtr;
  ASSERT_EQ(n.dev->modify_qp(qp, a, kAttrState), 0);
  a.qp_state = QpState::kRts;
  a.sq_psn = 7;
  ASSERT_EQ(n.dev->modify_qp(qp, a, kAttrState | kAttrSqPsn), 0);
}

// UC: like RC without the ACK / atomic attributes.
void uc_up(Node& n, Qp* qp, const Gid& dgid, uint32_t dqpn, uint32_t sq_psn, uint32_t rq_psn,
           uint32_t access = kLocalWrite | kRemoteWrite, uint8_t mtu = 3) {
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.qp_access_flags = access;
  ASSERT_EQ(n.dev->modify_qp(qp, a, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags), 0);
  a.qp_state = QpState::kRtr;
  a.path_mtu = mtu;
  a.dest_qp_num = dqpn;
  a.rq_psn = rq_psn;
  a.ah.dgid = dgid;
  ASSERT_EQ(n.dev->modify_qp(qp, a, kAttrState | kAttrAv | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn), 0);
  a.qp_state = QpState::kRts;
  a.sq_psn = sq_psn;
  ASSERT_EQ(n.dev->modify_qp(qp, a, kAttrState | kAttrSqPsn), 0);
}

Ah* make_ah(Node& n, const Gid& dgid) {
  AddressVector av;
  av.dgid = dgid;
  Errno err = -1;
  Ah* ah = n.dev->create_ah(n.pd, av, err);
  EXPECT_EQ(err, 0);
  EXPECT_NE(ah, nullptr);
  return ah;
}

SendWr ud_wr(uint64_t id, Sge* sg, Ah* ah, uint32_t qpn, uint32_t qkey = kQkey,
             WrOpcode op = WrOpcode::kSend) {
  SendWr wr;
  wr.wr_id = id;
  wr.opcode = op;
  wr.sg_list = sg;
  wr.num_sge = sg ? 1 : 0;
  wr.send_flags = kSendSignaled;
  wr.ah = ah;
  wr.remote_qpn = qpn;
  wr.remote_qkey = qkey;
  return wr;
}

QpState state_of(Node& n, Qp* qp) {
  QpAttr a;
  QpInitAttr i;
  EXPECT_EQ(n.dev->query_qp(qp, a, i), 0);
  return a.qp_state;
}

struct Ud : ::testing::Test {
  Fabric f;
  Node& a = f.add_node(1);
  Node& b = f.add_node(2);
  Qp* qa = nullptr;
  Qp* qb = nullptr;
  Ah* to_b = nullptr;
  void SetUp() override {
    qa = make_qp(a, QpType::kUd);
    qb = make_qp(b, QpType::kUd);
    ud_up(a, qa);
    ud_up(b, qb);
    to_b = make_ah(a, b.gid);
  }
  uint32_t bqpn() { return b.dev->qp_num(qb); }
};

TEST_F(Ud, send__grh_then_payload_and_cqe_fields) {
  Buffer& src = a.reg(4096);
  Buffer& dst = b.reg(8192);
  fill_random(src.data(), src.bytes.size(), 5);
  std::memset(dst.data(), 0xee, dst.bytes.size());
  ASSERT_EQ(post_recv(b, qb, 99, {{dst.addr(), 40 + 1000, dst.mr.lkey}}), 0);
  Sge sg{src.addr(), 1000, src.mr.lkey};
  SendWr wr = ud_wr(5, &sg, to_b, bqpn(), kQkey, WrOpcode::kSendWithImm);
  wr.imm_data = 0xa1b2c3d4;
  ASSERT_EQ(post_send(a, qa, wr), 0);
  ASSERT_TRUE(f.run());

  auto rc = b.poll();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(rc[0].opcode, WcOpcode::kRecv);
  EXPECT_EQ(rc[0].wr_id, 99u);
  EXPECT_EQ(rc[0].byte_len, 40u + 1000u);  // the GRH counts
  EXPECT_EQ(rc[0].wc_flags, uint32_t{kWcGrh | kWcWithImm});
  EXPECT_EQ(rc[0].imm_data, 0xa1b2c3d4u);
  EXPECT_EQ(rc[0].src_qp, a.dev->qp_num(qa));
  EXPECT_EQ(rc[0].qp_num, bqpn());
  EXPECT_EQ(0, std::memcmp(dst.data() + 40, src.data(), 1000));
  EXPECT_EQ(dst.bytes[1040], 0xee);  // nothing past the message

  // GRH area for RoCEv2 over IPv4: 20 zero bytes, then the IPv4 header of the packet.
  const uint8_t* g = dst.data();
  for (int i = 0; i < 20; ++i) EXPECT_EQ(g[i], 0) << i;
  const uint8_t* ip = g + 20;
  EXPECT_EQ(ip[0], 0x45);
  EXPECT_EQ(ip[9], 17);  // UDP
  const uint8_t src_ip[4] = {10, 0, 0, 1}, dst_ip[4] = {10, 0, 0, 2};
  EXPECT_EQ(0, std::memcmp(ip + 12, src_ip, 4));
  EXPECT_EQ(0, std::memcmp(ip + 16, dst_ip, 4));
  // Total length = IP + UDP + BTH + DETH + ImmDt + payload + ICRC.
  EXPECT_EQ((ip[2] << 8) | ip[3], 20 + 8 + 12 + 8 + 4 + 1000 + 4);
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += (ip[i] << 8) | ip[i + 1];
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  EXPECT_EQ(sum, 0xffffu);  // a valid header checksum

  auto sc = a.poll();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(sc[0].opcode, WcOpcode::kSend);
  EXPECT_EQ(sc[0].wr_id, 5u);
  EXPECT_EQ(sc[0].byte_len, 1000u);
  EXPECT_EQ(a.ctr().tx_send, 1u);
  EXPECT_EQ(b.ctr().rx_send, 1u);
  EXPECT_EQ(a.ctr().tx_ack + b.ctr().tx_ack, 0u);  // datagrams are not acknowledged
  EXPECT_EQ(a.ctr().rx_packets, 0u);
}

TEST_F(Ud, send__wire_carries_deth_with_qkey_and_source_qpn) {
  Buffer& src = a.reg(64);
  std::vector<std::vector<uint8_t>> raw;
  f.wire().set_tap([&](const WirePacket& p) { raw.emplace_back(p.data.begin(), p.data.end()); });
  Sge sg{src.addr(), 64, src.mr.lkey};
  ASSERT_EQ(post_send(a, qa, ud_wr(1, &sg, to_b, bqpn())), 0);
  ASSERT_TRUE(f.run());
  ASSERT_EQ(raw.size(), 1u);
  wire::Packet h;
  ASSERT_EQ(wire::parse_packet(raw[0], h), wire::ParseError::kOk);
  EXPECT_EQ(h.bth.opcode, wire::kUdSendOnly);
  EXPECT_EQ(h.bth.dest_qp, bqpn());
  EXPECT_EQ(h.bth.psn, 7u);
  EXPECT_EQ(h.deth.qkey, kQkey);
  EXPECT_EQ(h.deth.src_qp, a.dev->qp_num(qa));
  EXPECT_EQ(h.payload.size(), 64u);
}

TEST_F(Ud, qkey_mismatch__dropped_and_counted_receive_kept) {
  Buffer& src = a.reg(64);
  Buffer& dst = b.reg(256);
  ASSERT_EQ(post_recv(b, qb, 1, {{dst.addr(), 256, dst.mr.lkey}}), 0);
  Sge sg{src.addr(), 64, src.mr.lkey};
  ASSERT_EQ(post_send(a, qa, ud_wr(1, &sg, to_b, bqpn(), kQkey + 1)), 0);
  ASSERT_TRUE(f.run());
  EXPECT_TRUE(b.poll().empty());
  EXPECT_EQ(b.ctr().rx_qkey_errors, 1u);
  ASSERT_EQ(a.poll().size(), 1u);  // the sender cannot know
  // The receive WQE is still there for a datagram with the right Q_Key.
  ASSERT_EQ(post_send(a, qa, ud_wr(2, &sg, to_b, bqpn())), 0);
  ASSERT_TRUE(f.run());
  auto rc = b.poll();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].wr_id, 1u);
  EXPECT_EQ(rc[0].status, WcStatus::kSuccess);
}

TEST_F(Ud, privileged_qkey__high_bit_sends_the_qps_own_qkey) {
  Buffer& src = a.reg(64);
  Buffer& dst = b.reg(1024);
  ASSERT_EQ(post_recv(b, qb, 1, {{dst.addr(), 512, dst.mr.lkey}}), 0);
  ASSERT_EQ(post_recv(b, qb, 2, {{dst.addr() + 512, 512, dst.mr.lkey}}), 0);
  Sge sg{src.addr(), 64, src.mr.lkey};
  // a's QP Q_Key equals b's: a WR Q_Key 0x80000000 sends it.
  ASSERT_EQ(post_send(a, qa, ud_wr(1, &sg, to_b, bqpn(), 0x80000000u)), 0);
  ASSERT_TRUE(f.run());
  auto rc = b.poll();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, WcStatus::kSuccess);
  // Change a's Q_Key: the same WR now carries the new one, which b refuses.
  QpAttr attr;
  attr.qkey = kQkey ^ 0x5a;
  ASSERT_EQ(a.dev->modify_qp(qa, attr, kAttrQkey), 0);
  ASSERT_EQ(post_send(a, qa, ud_wr(2, &sg, to_b, bqpn(), 0x80000000u)), 0);
  ASSERT_TRUE(f.run());
  EXPECT_TRUE(b.poll().empty());
  EXPECT_EQ(b.ctr().rx_qkey_errors, 1u);
  // A WR Q_Key without the high bit is sent as given.
  ASSERT_EQ(post_send(a, qa, ud_wr(3, &sg, to_b, bqpn(), kQkey)), 0);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(b.poll().size(), 1u);
}

TEST_F(Ud, message_longer_than_port_mtu__refused_at_post) {
  Buffer& src = a.reg(8192);
  Buffer& dst = b.reg(8192);
  Sge big{src.addr(), 4097, src.mr.lkey};
  size_t bad = SIZE_MAX;
  SendWr wr = ud_wr(1, &big, to_b, bqpn());
  EXPECT_EQ(a.dev->post_send(qa, &wr, 1, &bad), EINVAL);
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(a.ctr().tx_packets, 0u);
  // Exactly the port MTU (4096) is one datagram.
  ASSERT_EQ(post_recv(b, qb, 1, {{dst.addr(), 40 + 4096, dst.mr.lkey}}), 0);
  fill_random(src.data(), 4096, 3);
  Sge mtu{src.addr(), 4096, src.mr.lkey};
  ASSERT_EQ(post_send(a, qa, ud_wr(2, &mtu, to_b, bqpn())), 0);
  ASSERT_TRUE(f.run());
  auto rc = b.poll();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].byte_len, 4096u + 40u);
  EXPECT_EQ(0, std::memcmp(dst.data() + 40, src.data(), 4096));
}

TEST_F(Ud, receive_buffer_too_small__loc_len_err_and_qp_to_error) {
  Buffer& src = a.reg(256);
  Buffer& dst = b.reg(1024);
  // Room for the GRH and 99 bytes: a 100-byte datagram does not fit.
  ASSERT_EQ(post_recv(b, qb, 1, {{dst.addr(), 40 + 99, dst.mr.lkey}}), 0);
  ASSERT_EQ(post_recv(b, qb, 2, {{dst.addr() + 512, 512, dst.mr.lkey}}), 0);
  Sge sg{src.addr(), 100, src.mr.lkey};
  ASSERT_EQ(post_send(a, qa, ud_wr(1, &sg, to_b, bqpn())), 0);
  ASSERT_TRUE(f.run());
  auto rc = b.poll();
  ASSERT_EQ(rc.size(), 2u);
  EXPECT_EQ(rc[0].wr_id, 1u);
  EXPECT_EQ(rc[0].status, WcStatus::kLocLenErr);
  EXPECT_EQ(rc[1].wr_id, 2u);
  EXPECT_EQ(rc[1].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(state_of(b, qb), QpState::kErr);
}

TEST_F(Ud, no_posted_receive__dropped_and_counted) {
  Buffer& src = a.reg(64);
  Sge sg{src.addr(), 64, src.mr.lkey};
  ASSERT_EQ(post_send(a, qa, ud_wr(1, &sg, to_b, bqpn())), 0);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(b.ctr().rx_dropped_no_recv, 1u);
  EXPECT_TRUE(b.poll().empty());
  EXPECT_EQ(b.ctr().tx_packets, 0u);  // no RNR NAK on UD
  auto sc = a.poll();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(state_of(b, qb), QpState::kRts);
}

TEST_F(Ud, post_send__rejects_non_send_opcodes_and_bad_ah) {
  Buffer& src = a.reg(64);
  Sge sg{src.addr(), 8, src.mr.lkey};
  for (WrOpcode op : {WrOpcode::kRdmaWrite, WrOpcode::kRdmaWriteWithImm, WrOpcode::kRdmaRead,
                      WrOpcode::kAtomicCmpSwp, WrOpcode::kAtomicFetchAdd,
                      WrOpcode::kSendWithInv}) {
    EXPECT_EQ(post_send(a, qa, ud_wr(1, &sg, to_b, bqpn(), kQkey, op)), EINVAL)
        << static_cast<int>(op);
  }
  EXPECT_EQ(post_send(a, qa, ud_wr(1, &sg, nullptr, bqpn())), EINVAL);  // no AH
  // An AH of another PD.
  Pd* other = a.dev->alloc_pd();
  AddressVector av;
  av.dgid = b.gid;
  Errno err = -1;
  Ah* foreign = a.dev->create_ah(other, av, err);
  ASSERT_EQ(err, 0);
  EXPECT_EQ(post_send(a, qa, ud_wr(1, &sg, foreign, bqpn())), EINVAL);
  // A destroyed AH.
  ASSERT_EQ(a.dev->destroy_ah(foreign), 0);
  EXPECT_EQ(post_send(a, qa, ud_wr(1, &sg, foreign, bqpn())), EINVAL);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(a.ctr().tx_packets, 0u);
  EXPECT_TRUE(a.poll().empty());
}

TEST_F(Ud, local_protection_error__send_queue_error_state_receive_still_works) {
  Buffer& src = a.reg(64);
  Buffer& dst = a.reg(1024);
  Sge bad{src.addr(), 64, src.mr.lkey + 0x100};  // a key no MR has
  Sge good{src.addr(), 64, src.mr.lkey};
  ASSERT_EQ(post_send(a, qa, ud_wr(1, &bad, to_b, bqpn())), 0);
  auto sc = a.poll();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kLocProtErr);
  EXPECT_EQ(state_of(a, qa), QpState::kSqe);
  EXPECT_EQ(a.ctr().tx_packets, 0u);
  // The receive queue keeps working in SQE.
  Ah* to_a = make_ah(b, a.gid);
  Buffer& bsrc = b.reg(32);
  Sge bs{bsrc.addr(), 32, bsrc.mr.lkey};
  ASSERT_EQ(post_recv(a, qa, 5, {{dst.addr(), 1024, dst.mr.lkey}}), 0);
  ASSERT_EQ(post_send(b, qb, ud_wr(1, &bs, to_a, a.dev->qp_num(qa))), 0);
  ASSERT_TRUE(f.run());
  auto rc = a.poll();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].wr_id, 5u);
  EXPECT_EQ(rc[0].status, WcStatus::kSuccess);
  // SQE -> RTS resumes sending.
  QpAttr attr;
  attr.qp_state = QpState::kRts;
  ASSERT_EQ(a.dev->modify_qp(qa, attr, kAttrState), 0);
  ASSERT_EQ(post_send(a, qa, ud_wr(2, &good, to_b, bqpn())), 0);
  sc = a.poll();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(a.ctr().tx_packets, 1u);
}

TEST_F(Ud, pacing__bursts_up_to_the_bucket_then_the_average_rate) {
  Qp* q = make_qp(a, QpType::kUd, 1024);
  ud_up(a, q);
  Buffer& src = a.reg(4096);
  Sge sg{src.addr(), 4096, src.mr.lkey};
  std::vector<SendWr> wrs(800, ud_wr(1, &sg, to_b, bqpn()));
  for (auto& w : wrs) w.send_flags = 0;
  const uint64_t t0 = f.clock().now_ns();
  ASSERT_EQ(a.dev->post_send(q, wrs.data(), wrs.size(), nullptr), 0);
  const uint64_t per_pkt = 4096 + 64;
  const uint64_t burst = kPaceBurstBytes / per_pkt;
  EXPECT_EQ(a.ctr().tx_packets, burst);  // the bucket's worth at once
  EXPECT_NE(a.dev->next_timer_ns(), UINT64_MAX);  // and a timer for the rest
  ASSERT_TRUE(f.run());
  EXPECT_EQ(a.ctr().tx_packets, 800u);
  EXPECT_EQ(b.ctr().rx_dropped_no_recv, 800u);
  // The rest left at about kPaceBytesPerUs.
  const uint64_t min_ns = (800 - burst) * per_pkt * 1000 / kPaceBytesPerUs;
  EXPECT_GE(f.clock().now_ns() - t0, min_ns * 9 / 10);
  EXPECT_LE(f.clock().now_ns() - t0, min_ns * 2);
}

TEST_F(Ud, any_source__datagrams_from_two_nodes_land_on_one_qp) {
  Node& c = f.add_node(3);
  Qp* qc = make_qp(c, QpType::kUd);
  ud_up(c, qc);
  Ah* c_to_b = make_ah(c, b.gid);
  Buffer& sa = a.reg(16);
  Buffer& sc = c.reg(16);
  Buffer& dst = b.reg(1024);
  ASSERT_EQ(post_recv(b, qb, 1, {{dst.addr(), 512, dst.mr.lkey}}), 0);
  ASSERT_EQ(post_recv(b, qb, 2, {{dst.addr() + 512, 512, dst.mr.lkey}}), 0);
  Sge ga{sa.addr(), 16, sa.mr.lkey}, gc{sc.addr(), 16, sc.mr.lkey};
  ASSERT_EQ(post_send(a, qa, ud_wr(1, &ga, to_b, bqpn())), 0);
  ASSERT_TRUE(f.run());
  ASSERT_EQ(post_send(c, qc, ud_wr(1, &gc, c_to_b, bqpn())), 0);
  ASSERT_TRUE(f.run());
  auto rc = b.poll();
  ASSERT_EQ(rc.size(), 2u);
  EXPECT_EQ(rc[0].src_qp, a.dev->qp_num(qa));
  EXPECT_EQ(rc[1].src_qp, c.dev->qp_num(qc));
  EXPECT_EQ(dst.bytes[20 + 15], 1);   // source 10.0.0.1 in the first GRH
  EXPECT_EQ(dst.bytes[512 + 20 + 15], 3);  // 10.0.0.3 in the second
  EXPECT_EQ(b.ctr().rx_wrong_source, 0u);
}

TEST_F(Ud, address_handles__family_pd_and_lifetime_checks) {
  AddressVector av;
  av.dgid.raw = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};  // IPv6 on an IPv4 device
  Errno err = 0;
  EXPECT_EQ(a.dev->create_ah(a.pd, av, err), nullptr);
  EXPECT_EQ(err, EINVAL);
  av.dgid = b.gid;
  Pd bogus;
  err = 0;
  EXPECT_EQ(a.dev->create_ah(&bogus, av, err), nullptr);
  EXPECT_EQ(err, EINVAL);
  av.port_num = 2;
  err = 0;
  EXPECT_EQ(a.dev->create_ah(a.pd, av, err), nullptr);
  EXPECT_EQ(err, EINVAL);
  // An AH holds its PD.
  Pd* pd = a.dev->alloc_pd();
  av.port_num = 1;
  Ah* ah = a.dev->create_ah(pd, av, err);
  ASSERT_NE(ah, nullptr);
  EXPECT_EQ(a.dev->dealloc_pd(pd), EBUSY);
  EXPECT_EQ(a.dev->destroy_ah(ah), 0);
  EXPECT_EQ(a.dev->destroy_ah(ah), EINVAL);
  EXPECT_EQ(a.dev->dealloc_pd(pd), 0);
}

TEST_F(Ud, multicast__attached_qps_of_the_device_receive_a_group_send) {
  Gid group;
  group.raw = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 1, 2, 3};
  Qp* m1 = make_qp(a, QpType::kUd);
  Qp* m2 = make_qp(a, QpType::kUd);
  Qp* outsider = make_qp(a, QpType::kUd);
  for (Qp* q : {m1, m2, outsider}) ud_up(a, q);
  ASSERT_EQ(a.dev->attach_mcast(m1, group, 0), 0);
  ASSERT_EQ(a.dev->attach_mcast(m2, group, 0), 0);
  Buffer& buf = a.reg(4096);
  Buffer& src = a.reg(64);
  fill_random(src.data(), 64, 9);
  ASSERT_EQ(post_recv(a, m1, 1, {{buf.addr(), 1024, buf.mr.lkey}}), 0);
  ASSERT_EQ(post_recv(a, m2, 2, {{buf.addr() + 1024, 1024, buf.mr.lkey}}), 0);
  ASSERT_EQ(post_recv(a, outsider, 3, {{buf.addr() + 2048, 1024, buf.mr.lkey}}), 0);
  Ah* to_group = make_ah(a, group);
  Sge sg{src.addr(), 64, src.mr.lkey};
  ASSERT_EQ(post_send(a, qa, ud_wr(7, &sg, to_group, kMulticastQpn)), 0);
  ASSERT_TRUE(f.run());
  auto wc = a.poll();
  int recvs = 0;
  for (auto& w : wc) {
    EXPECT_EQ(w.status, WcStatus::kSuccess);
    if (w.opcode != WcOpcode::kRecv) continue;
    ++recvs;
    EXPECT_TRUE(w.wr_id == 1 || w.wr_id == 2) << w.wr_id;
    EXPECT_EQ(w.src_qp, a.dev->qp_num(qa));
    EXPECT_EQ(w.byte_len, 40u + 64u);
  }
  EXPECT_EQ(recvs, 2);
  EXPECT_EQ(0, std::memcmp(buf.data() + 40, src.data(), 64));
  EXPECT_EQ(0, std::memcmp(buf.data() + 1024 + 40, src.data(), 64));
  EXPECT_EQ(a.ctr().rx_mcast_packets, 1u);
  // Detached: m1 gets nothing more, m2 still does.
  ASSERT_EQ(a.dev->detach_mcast(m1, group, 0), 0);
  ASSERT_EQ(post_recv(a, m1, 4, {{buf.addr(), 1024, buf.mr.lkey}}), 0);
  ASSERT_EQ(post_recv(a, m2, 5, {{buf.addr() + 1024, 1024, buf.mr.lkey}}), 0);
  ASSERT_EQ(post_send(a, qa, ud_wr(8, &sg, to_group, kMulticastQpn)), 0);
  ASSERT_TRUE(f.run());
  std::vector<uint64_t> got;
  for (auto& w : a.poll())
    if (w.opcode == WcOpcode::kRecv) got.push_back(w.wr_id);
  EXPECT_EQ(got, std::vector<uint64_t>{5});
}

// The sender is a member of the group it sends to and its receive is too short: the
// receive error moves it to ERR in the middle of its own send, which must stay consistent.
TEST_F(Ud, multicast__sender_in_its_own_group_with_a_short_receive) {
  Gid group;
  group.raw = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 9, 9, 9};
  ASSERT_EQ(a.dev->attach_mcast(qa, group, 0), 0);
  Buffer& buf = a.reg(256);
  ASSERT_EQ(post_recv(a, qa, 1, {{buf.addr(), 40 + 10, buf.mr.lkey}}), 0);
  Ah* to_group = make_ah(a, group);
  Sge sg{buf.addr() + 128, 64, buf.mr.lkey};
  ASSERT_EQ(post_send(a, qa, ud_wr(2, &sg, to_group, kMulticastQpn)), 0);
  ASSERT_EQ(post_send(a, qa, ud_wr(3, &sg, to_group, kMulticastQpn)), 0);
  ASSERT_TRUE(f.run());
  auto wc = a.poll();
  ASSERT_EQ(wc.size(), 3u);
  EXPECT_EQ(wc[0].wr_id, 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kLocLenErr);
  for (int i = 1; i < 3; ++i) EXPECT_EQ(wc[i].status, WcStatus::kWrFlushErr) << i;
  EXPECT_EQ(state_of(a, qa), QpState::kErr);
}

TEST_F(Ud, multicast__attach_and_detach_validation) {
  Gid group;
  group.raw = {0xff, 0x0e, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};  // an IPv6 multicast GID
  Gid v4group;
  v4group.raw = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 224, 0, 0, 5};
  EXPECT_TRUE(is_multicast(group));
  EXPECT_TRUE(is_multicast(v4group));
  EXPECT_FALSE(is_multicast(b.gid));
  EXPECT_EQ(a.dev->attach_mcast(qa, b.gid, 0), EINVAL);  // unicast GID
  Qp* rc = a.create_qp();
  Qp* uc = make_qp(a, QpType::kUc);
  EXPECT_EQ(a.dev->attach_mcast(rc, v4group, 0), EINVAL);  // UD QPs only
  EXPECT_EQ(a.dev->attach_mcast(uc, v4group, 0), EINVAL);
  EXPECT_EQ(a.dev->detach_mcast(qa, v4group, 0), EINVAL);  // not attached
  EXPECT_EQ(a.dev->attach_mcast(qa, v4group, 0), 0);
  EXPECT_EQ(a.dev->attach_mcast(qa, group, 0), 0);
  EXPECT_EQ(a.dev->detach_mcast(qa, v4group, 0), 0);
  EXPECT_EQ(a.dev->detach_mcast(qa, v4group, 0), EINVAL);
  // Destroying the QP leaves its groups: a later send to the group finds no member.
  ASSERT_EQ(a.dev->destroy_qp(qa), 0);
  qa = nullptr;
  Qp* sender = make_qp(a, QpType::kUd);
  ud_up(a, sender);
  Buffer& src = a.reg(8);
  Sge sg{src.addr(), 8, src.mr.lkey};
  Gid v4same;
  v4same.raw = v4group.raw;
  Ah* to_group = make_ah(a, v4same);
  ASSERT_EQ(post_send(a, sender, ud_wr(1, &sg, to_group, kMulticastQpn)), 0);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(a.ctr().rx_mcast_packets, 0u);
}

// Over IPv6 the GRH area holds the packet's IPv6 header.
TEST(UdIpv6, grh_is_the_ipv6_header) {
  transport::LoopWire wire(1);
  std::array<uint8_t, 16> addr[2] = {{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
                                     {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}};
  RecordingSink sink[2];
  FakeHostMemory memory[2];
  std::unique_ptr<Device> dev[2];
  Pd* pd[2];
  Cq* cq[2];
  Qp* qp[2];
  for (int i = 0; i < 2; ++i) {
    transport::LoopPort& port = wire.add_port(addr[i], true);
    DeviceConfig cfg;
    cfg.gid.raw = addr[i];
    dev[i] = std::make_unique<Device>(cfg, port, wire.clock(), memory[i], sink[i]);
    Device* d = dev[i].get();
    port.set_receiver([d](std::span<const WirePacket> b) { d->receive(b); });
    pd[i] = d->alloc_pd();
    uint32_t depth = 16;
    cq[i] = d->create_cq(depth, nullptr);
    QpInitAttr init;
    init.type = QpType::kUd;
    init.pd = pd[i];
    init.send_cq = init.recv_cq = cq[i];
    init.cap = {8, 8, 1, 1, 0};
    Errno err = 0;
    qp[i] = d->create_qp(init, err);
    ASSERT_EQ(err, 0);
    QpAttr a;
    a.qp_state = QpState::kInit;
    a.qkey = kQkey;
    ASSERT_EQ(d->modify_qp(qp[i], a, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrQkey), 0);
    a.qp_state = QpState::kRtr;
    ASSERT_EQ(d->modify_qp(qp[i], a, kAttrState), 0);
    a.qp_state = QpState::kRts;
    ASSERT_EQ(d->modify_qp(qp[i], a, kAttrState | kAttrSqPsn), 0);
  }
  std::vector<uint8_t> src(100, 0x5c), dst(256, 0xee);
  MrInfo ms, md;
  ASSERT_EQ(dev[0]->reg_mr(pd[0], src.data(), src.size(), (uint64_t)src.data(), 0, ms), 0);
  ASSERT_EQ(dev[1]->reg_mr(pd[1], dst.data(), dst.size(), (uint64_t)dst.data(), kLocalWrite, md), 0);
  Sge rs{(uint64_t)dst.data(), 256, md.lkey};
  RecvWr rwr;
  rwr.wr_id = 1;
  rwr.sg_list = &rs;
  rwr.num_sge = 1;
  ASSERT_EQ(dev[1]->post_recv(qp[1], &rwr, 1, nullptr), 0);
  AddressVector av;
  av.dgid.raw = addr[1];
  Errno err = 0;
  Ah* ah = dev[0]->create_ah(pd[0], av, err);
  ASSERT_NE(ah, nullptr);
  // An IPv4-mapped GID on an IPv6 device is refused.
  av.dgid.raw = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1};
  EXPECT_EQ(dev[0]->create_ah(pd[0], av, err), nullptr);
  EXPECT_EQ(err, EINVAL);
  Sge ss{(uint64_t)src.data(), 100, ms.lkey};
  SendWr wr = ud_wr(1, &ss, ah, dev[1]->qp_num(qp[1]));
  ASSERT_EQ(dev[0]->post_send(qp[0], &wr, 1, nullptr), 0);
  wire.deliver_all();
  WorkCompletion wc;
  ASSERT_EQ(dev[1]->poll_cq(cq[1], &wc, 1), 1);
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(wc.byte_len, 140u);
  EXPECT_EQ(wc.wc_flags, uint32_t{kWcGrh});
  EXPECT_EQ(dst[0] >> 4, 6);  // version
  EXPECT_EQ((dst[4] << 8) | dst[5], 8 + 12 + 8 + 100 + 4);  // UDP length
  EXPECT_EQ(dst[6], 17);
  EXPECT_EQ(0, std::memcmp(dst.data() + 8, addr[0].data(), 16));
  EXPECT_EQ(0, std::memcmp(dst.data() + 24, addr[1].data(), 16));
  EXPECT_EQ(0, std::memcmp(dst.data() + 40, src.data(), 100));
  EXPECT_EQ(dst[140], 0xee);
}

TEST(UdLimits, multicast_group_and_attach_limits) {
  Fabric f;
  Node& n = f.add_node(1);
  const DeviceLimits& l = n.dev->config().limits;
  Qp* q = make_qp(n, QpType::kUd);
  Gid g;
  g.raw = {0xff, 0x0e, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  for (uint32_t i = 0; i < l.max_mcast_grp; ++i) {
    g.raw[14] = uint8_t(i >> 8);
    g.raw[15] = uint8_t(i);
    ASSERT_EQ(n.dev->attach_mcast(q, g, 0), 0) << i;
  }
  g.raw[13] = 1;  // one group more
  EXPECT_EQ(n.dev->attach_mcast(q, g, 0), ENOMEM);
  g.raw[13] = 0;
  g.raw[14] = g.raw[15] = 0;
  EXPECT_EQ(n.dev->attach_mcast(q, g, 0), 0);  // an existing group, QP already in it
  std::vector<Qp*> qps;
  for (uint32_t i = 1; i < l.max_mcast_qp_attach; ++i) {
    qps.push_back(make_qp(n, QpType::kUd, 1));
    ASSERT_EQ(n.dev->attach_mcast(qps.back(), g, 0), 0) << i;
  }
  Qp* extra = make_qp(n, QpType::kUd, 1);
  EXPECT_EQ(n.dev->attach_mcast(extra, g, 0), ENOMEM);
}

TEST(UdModify, transition_rules_for_ud) {
  Fabric f;
  Node& n = f.add_node(1);
  Qp* qp = make_qp(n, QpType::kUd);
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.qkey = 1;
  // RESET -> INIT needs the Q_Key (not access flags).
  EXPECT_EQ(n.dev->modify_qp(qp, a, kAttrState | kAttrPkeyIndex | kAttrPort), EINVAL);
  EXPECT_EQ(n.dev->modify_qp(qp, a, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags),
            EINVAL);
  ASSERT_EQ(n.dev->modify_qp(qp, a, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrQkey), 0);
  // INIT -> RTR takes no path: an AV or path MTU is refused.
  a.qp_state = QpState::kRtr;
  a.ah.dgid = n.gid;
  EXPECT_EQ(n.dev->modify_qp(qp, a, kAttrState | kAttrAv), EINVAL);
  EXPECT_EQ(n.dev->modify_qp(qp, a, kAttrState | kAttrPathMtu), EINVAL);
  EXPECT_EQ(n.dev->modify_qp(qp, a, kAttrState | kAttrDestQpn), EINVAL);
  ASSERT_EQ(n.dev->modify_qp(qp, a, kAttrState), 0);
  // RTR -> RTS needs the SQ PSN and takes no ACK timers.
  a.qp_state = QpState::kRts;
  EXPECT_EQ(n.dev->modify_qp(qp, a, kAttrState), EINVAL);
  EXPECT_EQ(n.dev->modify_qp(qp, a, kAttrState | kAttrSqPsn | kAttrTimeout), EINVAL);
  ASSERT_EQ(n.dev->modify_qp(qp, a, kAttrState | kAttrSqPsn), 0);
  a.qkey = 0x4242;
  ASSERT_EQ(n.dev->modify_qp(qp, a, kAttrQkey), 0);  // RTS -> RTS may change the Q_Key
  QpAttr q;
  QpInitAttr init;
  ASSERT_EQ(n.dev->query_qp(qp, q, init), 0);
  EXPECT_EQ(q.qkey, 0x4242u);
  EXPECT_EQ(q.path_mtu, 5);  // UD reports the port MTU (4096)
  EXPECT_EQ(init.type, QpType::kUd);
}

TEST(UcModify, transition_rules_for_uc) {
  Fabric f;
  Node& n = f.add_node(1);
  Qp* qp = make_qp(n, QpType::kUc);
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.qp_access_flags = kRemoteWrite | kLocalWrite;
  EXPECT_EQ(n.dev->modify_qp(qp, a, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrQkey), EINVAL);
  ASSERT_EQ(n.dev->modify_qp(qp, a, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags), 0);
  a.qp_state = QpState::kRtr;
  a.ah.dgid = n.gid;
  a.dest_qp_num = 5;
  const uint32_t need = kAttrState | kAttrAv | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn;
  EXPECT_EQ(n.dev->modify_qp(qp, a, need & ~kAttrDestQpn), EINVAL);
  EXPECT_EQ(n.dev->modify_qp(qp, a, need | kAttrMaxDestRdAtomic), EINVAL);  // no READ on UC
  EXPECT_EQ(n.dev->modify_qp(qp, a, need | kAttrMinRnrTimer), EINVAL);      // no RNR on UC
  ASSERT_EQ(n.dev->modify_qp(qp, a, need), 0);
  a.qp_state = QpState::kRts;
  EXPECT_EQ(n.dev->modify_qp(qp, a, kAttrState | kAttrSqPsn | kAttrRetryCnt), EINVAL);
  EXPECT_EQ(n.dev->modify_qp(qp, a, kAttrState | kAttrSqPsn | kAttrMaxQpRdAtomic), EINVAL);
  ASSERT_EQ(n.dev->modify_qp(qp, a, kAttrState | kAttrSqPsn), 0);
}

// --- UC -------------------------------------------------------------------------------------

struct Uc : ::testing::Test {
  Fabric f;
  Node& a = f.add_node(1);
  Node& b = f.add_node(2);
  Qp* qa = nullptr;
  Qp* qb = nullptr;
  void connect(uint32_t b_access = kLocalWrite | kRemoteWrite) {
    qa = make_qp(a, QpType::kUc);
    qb = make_qp(b, QpType::kUc);
    uc_up(a, qa, b.gid, b.dev->qp_num(qb), 100, 900);
    uc_up(b, qb, a.gid, a.dev->qp_num(qa), 900, 100, b_access);
  }
  SendWr wr(WrOpcode op, uint64_t id, Sge* sg, uint64_t raddr = 0, uint32_t rkey = 0) {
    SendWr w;
    w.wr_id = id;
    w.opcode = op;
    w.sg_list = sg;
    w.num_sge = 1;
    w.send_flags = kSendSignaled;
    w.remote_addr = raddr;
    w.rkey = rkey;
    return w;
  }
};

TEST_F(Uc, send_write_and_write_imm__land_without_any_ack) {
  connect();
  Buffer& src = a.reg(16384);
  Buffer& rbuf = b.reg(16384);
  Buffer& wbuf = b.reg(16384);
  fill_random(src.data(), src.bytes.size(), 11);
  ASSERT_EQ(post_recv(b, qb, 1, {{rbuf.addr(), 8192, rbuf.mr.lkey}}), 0);
  ASSERT_EQ(post_recv(b, qb, 2, {{rbuf.addr() + 8192, 16, rbuf.mr.lkey}}), 0);
  Sge s1{src.addr(), 3000, src.mr.lkey};  // 3 packets at MTU 1024
  ASSERT_EQ(post_send(a, qa, wr(WrOpcode::kSend, 10, &s1)), 0);
  Sge s2{src.addr() + 3000, 5000, src.mr.lkey};
  ASSERT_EQ(post_send(a, qa, wr(WrOpcode::kRdmaWrite, 11, &s2, wbuf.addr(), wbuf.mr.rkey)), 0);
  Sge s3{src.addr() + 8000, 2048, src.mr.lkey};
  SendWr w3 = wr(WrOpcode::kRdmaWriteWithImm, 12, &s3, wbuf.addr() + 5000, wbuf.mr.rkey);
  w3.imm_data = 0x01020304;
  ASSERT_EQ(post_send(a, qa, w3), 0);
  // The sender completes each WQE when its last packet is sent, before any reply could come.
  auto sc = a.poll();
  ASSERT_EQ(sc.size(), 3u);
  EXPECT_EQ(sc[0].wr_id, 10u);
  EXPECT_EQ(sc[0].opcode, WcOpcode::kSend);
  EXPECT_EQ(sc[1].opcode, WcOpcode::kRdmaWrite);
  EXPECT_EQ(sc[2].opcode, WcOpcode::kRdmaWrite);
  for (auto& w : sc) EXPECT_EQ(w.status, WcStatus::kSuccess);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(0, std::memcmp(rbuf.data(), src.data(), 3000));
  EXPECT_EQ(0, std::memcmp(wbuf.data(), src.data() + 3000, 5000 + 2048));
  auto rc = b.poll();
  ASSERT_EQ(rc.size(), 2u);
  EXPECT_EQ(rc[0].wr_id, 1u);
  EXPECT_EQ(rc[0].opcode, WcOpcode::kRecv);
  EXPECT_EQ(rc[0].byte_len, 3000u);
  EXPECT_EQ(rc[0].src_qp, a.dev->qp_num(qa));
  EXPECT_EQ(rc[0].wc_flags, 0u);
  EXPECT_EQ(rc[1].wr_id, 2u);
  EXPECT_EQ(rc[1].opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(rc[1].byte_len, 2048u);
  EXPECT_EQ(rc[1].wc_flags, uint32_t{kWcWithImm});
  EXPECT_EQ(rc[1].imm_data, 0x01020304u);
  EXPECT_EQ(a.ctr().tx_send, 3u);
  EXPECT_EQ(a.ctr().tx_write, 5u + 2u);
  EXPECT_EQ(b.ctr().tx_packets, 0u);  // no ACK, no NAK: UC is unacknowledged
  EXPECT_EQ(b.ctr().tx_ack, 0u);
  EXPECT_EQ(a.ctr().rx_packets, 0u);
  EXPECT_EQ(a.dev->next_timer_ns(), UINT64_MAX);  // no ACK timer either
}

TEST_F(Uc, lost_packet__drops_that_message_only_and_reuses_the_receive) {
  connect();
  Buffer& src = a.reg(8192);
  Buffer& dst = b.reg(8192);
  fill_random(src.data(), src.bytes.size(), 4);
  // Message 1: PSNs 100..102 (its middle packet lost); message 2: PSNs 103..104.
  f.wire().set_drop_filter([&](const WirePacket& p) { return parse(p).bth.psn == 101; });
  ASSERT_EQ(post_recv(b, qb, 1, {{dst.addr(), 4096, dst.mr.lkey}}), 0);
  ASSERT_EQ(post_recv(b, qb, 2, {{dst.addr() + 4096, 4096, dst.mr.lkey}}), 0);
  Sge m1{src.addr(), 3000, src.mr.lkey};
  Sge m2{src.addr() + 4096, 2000, src.mr.lkey};
  ASSERT_EQ(post_send(a, qa, wr(WrOpcode::kSend, 1, &m1)), 0);
  ASSERT_EQ(post_send(a, qa, wr(WrOpcode::kSend, 2, &m2)), 0);
  ASSERT_TRUE(f.run());
  auto rc = b.poll();
  ASSERT_EQ(rc.size(), 1u);
  // The receive WQE message 1 had started is used by message 2.
  EXPECT_EQ(rc[0].wr_id, 1u);
  EXPECT_EQ(rc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(rc[0].byte_len, 2000u);
  EXPECT_EQ(0, std::memcmp(dst.data(), src.data() + 4096, 2000));
  EXPECT_EQ(b.ctr().rx_out_of_sequence, 1u);
  EXPECT_EQ(b.ctr().rx_uc_dropped, 1u);  // message 1's LAST (its FIRST was placed, then dropped)
  EXPECT_EQ(b.ctr().tx_packets, 0u);
  EXPECT_EQ(a.ctr().retransmitted_packets, 0u);
  // Both sends completed at the sender: UC cannot know about the loss.
  auto sc = a.poll();
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(sc[1].status, WcStatus::kSuccess);
  EXPECT_EQ(state_of(b, qb), QpState::kRts);
}

TEST_F(Uc, lost_last_packet_of_a_write__next_write_still_lands) {
  connect();
  Buffer& src = a.reg(8192);
  Buffer& dst = b.reg(8192);
  fill_random(src.data(), src.bytes.size(), 8);
  f.wire().set_drop_filter([&](const WirePacket& p) { return parse(p).bth.psn == 101; });
  Sge w1{src.addr(), 2048, src.mr.lkey};  // PSNs 100, 101 (LAST lost)
  Sge w2{src.addr() + 4096, 1024, src.mr.lkey};  // PSN 102, an ONLY
  ASSERT_EQ(post_send(a, qa, wr(WrOpcode::kRdmaWrite, 1, &w1, dst.addr(), dst.mr.rkey)), 0);
  ASSERT_EQ(post_send(a, qa, wr(WrOpcode::kRdmaWrite, 2, &w2, dst.addr() + 4096, dst.mr.rkey)), 0);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(0, std::memcmp(dst.data() + 4096, src.data() + 4096, 1024));
  EXPECT_EQ(0, std::memcmp(dst.data(), src.data(), 1024));  // the first packet was placed
  EXPECT_EQ(b.ctr().rx_out_of_sequence, 1u);
}

TEST_F(Uc, post_send__read_atomics_and_send_with_inv_refused) {
  connect();
  Buffer& src = a.reg(64);
  Sge sg{src.addr(), 8, src.mr.lkey};
  for (WrOpcode op : {WrOpcode::kRdmaRead, WrOpcode::kAtomicCmpSwp, WrOpcode::kAtomicFetchAdd,
                      WrOpcode::kSendWithInv}) {
    EXPECT_EQ(post_send(a, qa, wr(op, 1, &sg, src.addr(), src.mr.rkey)), EINVAL)
        << static_cast<int>(op);
  }
  ASSERT_TRUE(f.run());
  EXPECT_EQ(a.ctr().tx_packets, 0u);
}

TEST_F(Uc, no_receive_posted__message_dropped_and_counted) {
  connect();
  Buffer& src = a.reg(4096);
  Sge sg{src.addr(), 2500, src.mr.lkey};
  ASSERT_EQ(post_send(a, qa, wr(WrOpcode::kSend, 1, &sg)), 0);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(b.ctr().rx_dropped_no_recv, 1u);
  EXPECT_EQ(b.ctr().rx_uc_dropped, 2u);  // the MIDDLE and LAST of the dropped message
  EXPECT_EQ(b.ctr().tx_packets, 0u);     // no RNR NAK
  EXPECT_TRUE(b.poll().empty());
  EXPECT_EQ(state_of(b, qb), QpState::kRts);
}

TEST_F(Uc, write_without_remote_write_access__dropped_and_counted) {
  connect(kLocalWrite);
  Buffer& src = a.reg(64);
  Buffer& dst = b.reg(64);
  std::memset(src.data(), 0x33, 64);
  Sge sg{src.addr(), 64, src.mr.lkey};
  ASSERT_EQ(post_send(a, qa, wr(WrOpcode::kRdmaWrite, 1, &sg, dst.addr(), dst.mr.rkey)), 0);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(dst.bytes[0], 0);
  EXPECT_EQ(b.ctr().rx_access_errors, 1u);
  EXPECT_EQ(b.ctr().tx_packets, 0u);
  EXPECT_EQ(state_of(b, qb), QpState::kRts);
}

TEST_F(Uc, send_longer_than_receive__loc_len_err) {
  connect();
  Buffer& src = a.reg(4096);
  Buffer& dst = b.reg(4096);
  ASSERT_EQ(post_recv(b, qb, 1, {{dst.addr(), 1500, dst.mr.lkey}}), 0);
  Sge sg{src.addr(), 2000, src.mr.lkey};
  ASSERT_EQ(post_send(a, qa, wr(WrOpcode::kSend, 1, &sg)), 0);
  ASSERT_TRUE(f.run());
  auto rc = b.poll();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, WcStatus::kLocLenErr);
  EXPECT_EQ(state_of(b, qb), QpState::kErr);
}

TEST_F(Uc, packets_from_another_address__not_placed) {
  connect();
  // A third node sends UC packets to b's QP: b's QP is connected to a and ignores them.
  Node& c = f.add_node(3);
  Qp* qc = make_qp(c, QpType::kUc);
  uc_up(c, qc, b.gid, b.dev->qp_num(qb), 900, 100);
  Buffer& src = c.reg(64);
  Buffer& dst = b.reg(64);
  ASSERT_EQ(post_recv(b, qb, 1, {{dst.addr(), 64, dst.mr.lkey}}), 0);
  Sge sg{src.addr(), 64, src.mr.lkey};
  ASSERT_EQ(post_send(c, qc, wr(WrOpcode::kSend, 1, &sg)), 0);
  ASSERT_TRUE(f.run());
  EXPECT_TRUE(b.poll().empty());
  EXPECT_EQ(b.ctr().rx_wrong_source, 1u);
}

}  // namespace
}  // namespace vrnic::engine::testing

namespace vrnic::engine::testing {
namespace {

// Two UD QPs on b share one SRQ: datagrams to either consume the SRQ's WQEs in order, the
// payload lands after the GRH, and each CQE names the QP that received it.
TEST_F(Ud, srq__two_ud_qps_share_one_srq) {
  Device::SrqAttr sa;
  sa.max_wr = 8;
  sa.max_sge = 1;
  Errno err = -1;
  Srq* srq = b.dev->create_srq(b.pd, sa, nullptr, err);
  ASSERT_EQ(err, 0);
  Qp* q[2];
  for (auto& x : q) {
    QpInitAttr init;
    init.type = QpType::kUd;
    init.pd = b.pd;
    init.send_cq = init.recv_cq = b.cq;
    init.srq = srq;
    init.cap = {8, 0, 1, 0, 0};
    x = b.dev->create_qp(init, err);
    ASSERT_EQ(err, 0);
    ud_up(b, x);
  }
  Buffer& src = a.reg(256);
  Buffer& dst = b.reg(4 * 256);
  fill_random(src.data(), 256, 9);
  for (uint64_t i = 0; i < 4; ++i) {
    Sge s{dst.addr() + i * 256, 256, dst.mr.lkey};
    RecvWr r{100 + i, &s, 1};
    size_t bad = 0;
    ASSERT_EQ(b.dev->post_srq_recv(srq, &r, 1, &bad), 0);
  }
  Sge sg{src.addr(), 200, src.mr.lkey};
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(post_send(a, qa, ud_wr(uint64_t(i), &sg, to_b, b.dev->qp_num(q[i % 2]))), 0);
    ASSERT_TRUE(f.run());
  }
  auto wcs = b.poll();
  ASSERT_EQ(wcs.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(wcs[i].status, WcStatus::kSuccess);
    EXPECT_EQ(wcs[i].wr_id, 100u + uint64_t(i));  // the SRQ's WQEs, in posting order
    EXPECT_EQ(wcs[i].qp_num, b.dev->qp_num(q[i % 2]));
    EXPECT_EQ(wcs[i].byte_len, 40u + 200u);
    EXPECT_EQ(0, std::memcmp(dst.data() + i * 256 + 40, src.data(), 200)) << i;
  }
  for (auto& x : q) ASSERT_EQ(b.dev->destroy_qp(x), 0);
  EXPECT_EQ(b.dev->destroy_srq(srq), 0);
}

}  // namespace
}  // namespace vrnic::engine::testing
