// UD over the loop wire: bytes, CQEs, GRH, Q_Keys, AHs, pacing, SRQs, post and modify checks.
#include "engine/test_ud.h"

namespace vrnic::engine::testing {
namespace {

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
  EXPECT_EQ(rc[0].sl, 0xa);  // RoCEv2 (UDP) over IPv4, as RoCE NICs report the packet type
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

// Over IPv6 the GRH area holds the packet's IPv6 header.
TEST(UdIpv6, receive__grh_area_holds_the_ipv6_header) {
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
  EXPECT_EQ(wc.sl, 0x9);  // RoCEv2 (UDP) over IPv6
  EXPECT_EQ(dst[0] >> 4, 6);  // version
  EXPECT_EQ((dst[4] << 8) | dst[5], 8 + 12 + 8 + 100 + 4);  // UDP length
  EXPECT_EQ(dst[6], 17);
  EXPECT_EQ(0, std::memcmp(dst.data() + 8, addr[0].data(), 16));
  EXPECT_EQ(0, std::memcmp(dst.data() + 24, addr[1].data(), 16));
  EXPECT_EQ(0, std::memcmp(dst.data() + 40, src.data(), 100));
  EXPECT_EQ(dst[140], 0xee);
}

TEST(UdModify, modify_qp__ud_needs_qkey_and_takes_no_path) {
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
