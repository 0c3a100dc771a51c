// UD multicast over the loop wire: group delivery to attached QPs, attach / detach checks, limits.
#include "engine/test_ud.h"

namespace vrnic::engine::testing {
namespace {

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

TEST(UdLimits, attach_mcast__group_and_attach_limits) {
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

}  // namespace
}  // namespace vrnic::engine::testing
