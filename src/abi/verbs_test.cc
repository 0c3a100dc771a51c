// End-to-end verbs tests against vrnic's libibverbs.so.1: queries, resources, and two RC QPs
// of one context connected to each other over the device's own GID.
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "abi/verbs_test.h"

namespace vrnic::abi::test {
namespace {

using Device = VerbsTest;

TEST_F(Device, query_device__limits_and_identity) {
  ibv_device_attr a{};
  ASSERT_EQ(ibv_query_device(ctx_, &a), 0);
  EXPECT_EQ(a.phys_port_cnt, 1);
  EXPECT_GT(a.max_qp, 0);
  EXPECT_GT(a.max_qp_wr, 0);
  EXPECT_GT(a.max_sge, 0);
  EXPECT_NE(a.atomic_cap, IBV_ATOMIC_NONE);
  EXPECT_NE(a.node_guid, 0u);
  EXPECT_EQ(a.node_guid, ibv_get_device_guid(list_[0]));
  EXPECT_EQ(a.sys_image_guid, a.node_guid);  // one device, one system image
  // The node GUID is the modified EUI-64 of the device MAC 02:<GID bytes 11..15> (for an
  // IPv4 GID 02:00:a:b:c:d): U/L bit flipped, ff:fe in the middle, as RoCE NICs derive it.
  ibv_gid gid{};
  ASSERT_EQ(ibv_query_gid(ctx_, 1, 0, &gid), 0);
  uint8_t mac[6] = {0x02, gid.raw[11], gid.raw[12], gid.raw[13], gid.raw[14], gid.raw[15]};
  if (gid.raw[10] == 0xff && gid.raw[11] == 0xff) mac[1] = 0;
  const uint8_t eui[8] = {uint8_t(mac[0] ^ 2), mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]};
  EXPECT_EQ(std::memcmp(&a.node_guid, eui, 8), 0);
  // A vendor id from the local (AAI) quadrant of IEEE 802c: 02:76:72, never an assigned OUI.
  EXPECT_EQ(a.vendor_id, 0x027672u);
  EXPECT_EQ(a.vendor_part_id, 0x7672u);
  EXPECT_EQ(a.hw_ver, 1u);
  EXPECT_NE(a.fw_ver[0], '\0');
  EXPECT_EQ(a.max_qp_rd_atom, a.max_qp_init_rd_atom);
  EXPECT_GT(a.max_qp_rd_atom, 0);
  EXPECT_EQ(a.atomic_cap, IBV_ATOMIC_HCA);
  EXPECT_EQ(a.page_size_cap & 4096u, 4096u);
  ibv_device_attr_ex ex{};
  ASSERT_EQ(ibv_query_device_ex(ctx_, nullptr, &ex), 0);
  EXPECT_EQ(ex.orig_attr.max_qp, a.max_qp);
  EXPECT_EQ(std::memcmp(ex.orig_attr.fw_ver, a.fw_ver, sizeof(a.fw_ver)), 0);
}

TEST_F(Device, query_port__active_ethernet_roce) {
  ibv_port_attr p{};
  ASSERT_EQ(ibv_query_port(ctx_, 1, &p), 0);  // the inline wrapper: verbs_context op
  EXPECT_EQ(p.state, IBV_PORT_ACTIVE);
  EXPECT_EQ(p.phys_state, 5);
  EXPECT_EQ(p.link_layer, IBV_LINK_LAYER_ETHERNET);
  EXPECT_EQ(p.max_mtu, IBV_MTU_4096);
  EXPECT_GE(p.active_mtu, IBV_MTU_256);
  EXPECT_EQ(p.gid_tbl_len, 1);
  // 4X at EDR (100 Gb/s, as mlx5 on a 100GBASE link): the rate middleware computes from
  // width x speed.
  EXPECT_EQ(p.active_width, 2);
  EXPECT_EQ(p.active_speed, 32);
  ibv_port_attr compat;
  std::memset(&compat, 0xab, sizeof(compat));
  ASSERT_EQ((ibv_query_port)(ctx_, 1, reinterpret_cast<_compat_ibv_port_attr*>(&compat)), 0);
  EXPECT_EQ(compat.state, IBV_PORT_ACTIVE);
  EXPECT_EQ(compat.link_layer, IBV_LINK_LAYER_ETHERNET);
  EXPECT_EQ(compat.flags, 0);
  EXPECT_EQ(compat.port_cap_flags2, 0xabab);  // past the end of the compat struct
  EXPECT_NE(ibv_query_port(ctx_, 2, &p), 0);
}

// The interface holding `gid`'s address, found with getifaddrs (all of 127/8 is lo's).
unsigned interface_of(const ibv_gid& gid) {
  const bool v4 = gid.global.subnet_prefix == 0 && gid.raw[10] == 0xff && gid.raw[11] == 0xff;
  if (v4 && gid.raw[12] == 127) return if_nametoindex("lo");
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return 0;
  unsigned index = 0;
  for (ifaddrs* i = list; i && !index; i = i->ifa_next) {
    if (!i->ifa_addr) continue;
    if (v4 && i->ifa_addr->sa_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
      if (std::memcmp(&in->sin_addr, gid.raw + 12, 4) == 0) index = if_nametoindex(i->ifa_name);
    } else if (!v4 && i->ifa_addr->sa_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
      if (std::memcmp(&in6->sin6_addr, gid.raw, 16) == 0) index = if_nametoindex(i->ifa_name);
    }
  }
  freeifaddrs(list);
  return index;
}

// rdma-core reports the GID's netdev as ndev_ifindex (the kernel's GID attribute, or
// if_nametoindex of gid_attrs/ndevs): the interface that holds the device's address.
TEST_F(Device, query_gid_ex__ndev_ifindex_is_the_interface_of_the_address) {
  ibv_gid gid{};
  ASSERT_EQ(ibv_query_gid(ctx_, 1, 0, &gid), 0);
  const unsigned want = interface_of(gid);
  ASSERT_NE(want, 0u) << "no interface holds the device's address";
  ibv_gid_entry e{};
  ASSERT_EQ(ibv_query_gid_ex(ctx_, 1, 0, &e, 0), 0);
  EXPECT_EQ(e.ndev_ifindex, want);
  ibv_gid_entry table[2]{};
  ASSERT_EQ(ibv_query_gid_table(ctx_, table, 2, 0), 1);
  EXPECT_EQ(table[0].ndev_ifindex, want);
}

TEST_F(Device, query_gid__rocev2_gid_of_the_device) {
  ibv_gid gid{};
  ASSERT_EQ(ibv_query_gid(ctx_, 1, 0, &gid), 0);
  const bool v4_mapped = gid.global.subnet_prefix == 0 && gid.raw[10] == 0xff && gid.raw[11] == 0xff;
  const bool v6 = gid.raw[0] != 0;
  EXPECT_TRUE(v4_mapped || v6);
  EXPECT_NE(ibv_query_gid(ctx_, 1, 1, &gid), 0);
  ibv_gid_entry e{};
  ASSERT_EQ(ibv_query_gid_ex(ctx_, 1, 0, &e, 0), 0);
  EXPECT_EQ(e.gid_type, IBV_GID_TYPE_ROCE_V2);
  EXPECT_EQ(std::memcmp(e.gid.raw, gid.raw, 16), 0);
  ibv_gid_entry table[4];
  EXPECT_EQ(ibv_query_gid_table(ctx_, table, 4, 0), 1);
  __be16 pkey = 0;
  ASSERT_EQ(ibv_query_pkey(ctx_, 1, 0, &pkey), 0);
  EXPECT_EQ(pkey, 0xffff);
  EXPECT_EQ(ibv_get_pkey_index(ctx_, 1, pkey), 0);
  uint8_t mac[6];
  uint16_t vid = 0;
  ibv_ah_attr ah{};
  ah.is_global = 1;
  ah.grh.dgid = gid;
  ASSERT_EQ(ibv_resolve_eth_l2_from_gid(ctx_, &ah, mac, &vid), 0);
  EXPECT_EQ(mac[0] & 0x03, 0x02);  // locally administered unicast
}

TEST_F(Device, strings__names) {
  EXPECT_STREQ(ibv_wc_status_str(IBV_WC_SUCCESS), "success");
  EXPECT_STREQ(ibv_port_state_str(IBV_PORT_ACTIVE), "active");
  EXPECT_STREQ(ibv_node_type_str(IBV_NODE_CA), "InfiniBand channel adapter");
  EXPECT_STREQ(ibv_event_type_str(IBV_EVENT_QP_FATAL), "local work queue catastrophic error");
  EXPECT_EQ(ibv_rate_to_mult(IBV_RATE_10_GBPS), 4);
  EXPECT_EQ(mult_to_ibv_rate(4), IBV_RATE_10_GBPS);
  EXPECT_EQ(ibv_rate_to_mbps(IBV_RATE_100_GBPS), 103125);
  EXPECT_EQ(ibv_is_fork_initialized(), IBV_FORK_UNNEEDED);
  EXPECT_EQ(ibv_fork_init(), 0);
}

TEST_F(Device, mr__keys_and_bounds) {
  std::vector<char> buf(8192);
  ibv_mr* mr = ibv_reg_mr(pd_, buf.data(), buf.size(),
                          IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ASSERT_NE(mr, nullptr);
  EXPECT_EQ(mr->addr, buf.data());
  EXPECT_EQ(mr->length, buf.size());
  EXPECT_EQ(mr->pd, pd_);
  ibv_mr* mr2 = ibv_reg_mr_iova2(pd_, buf.data(), 4096, 0x10000, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr2, nullptr);
  EXPECT_NE(mr2->lkey, mr->lkey);
  EXPECT_EQ(ibv_dealloc_pd(pd_), EBUSY);  // MRs still use it
  EXPECT_EQ(ibv_dereg_mr(mr2), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
}


TEST_F(Loopback, send_recv__bytes_and_cqes) {
  for (size_t i = 0; i < 5000; ++i) a_buf_[i] = uint8_t(i * 7 + 1);
  ibv_sge rs = sge(b_buf_, b_mr_, 0, 8192);
  ibv_recv_wr rwr{};
  rwr.wr_id = 2;
  rwr.sg_list = &rs;
  rwr.num_sge = 1;
  ibv_recv_wr* bad_r = nullptr;
  ASSERT_EQ(ibv_post_recv(b_, &rwr, &bad_r), 0);
  ibv_sge ss = sge(a_buf_, a_mr_, 0, 5000);
  ibv_send_wr swr{};
  swr.wr_id = 0x31415926;
  swr.opcode = IBV_WR_SEND_WITH_IMM;
  swr.imm_data = htobe32(0x1234);
  swr.send_flags = IBV_SEND_SIGNALED;
  swr.sg_list = &ss;
  swr.num_sge = 1;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a_, &swr, &bad), 0);
  auto wcs = wait(2);
  ASSERT_EQ(wcs.size(), 2u);
  for (const ibv_wc& wc : wcs) {
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    if (wc.opcode == IBV_WC_RECV) {
      EXPECT_EQ(wc.wr_id, 2u);
      EXPECT_EQ(wc.byte_len, 5000u);
      EXPECT_EQ(wc.qp_num, b_->qp_num);
      EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
      EXPECT_EQ(be32toh(wc.imm_data), 0x1234u);
    } else {
      EXPECT_EQ(wc.opcode, IBV_WC_SEND);
      EXPECT_EQ(wc.wr_id, 0x31415926u);
      EXPECT_EQ(wc.qp_num, a_->qp_num);
    }
  }
  EXPECT_EQ(std::memcmp(a_buf_.data(), b_buf_.data(), 5000), 0);
}

TEST_F(Loopback, write_then_read__bytes_round_trip) {
  for (size_t i = 0; i < kSize; ++i) a_buf_[i] = uint8_t(i ^ (i >> 8));
  // One byte, odd sizes across packet boundaries (path MTU 1024), and many packets.
  for (size_t len : {size_t(1), size_t(1000), size_t(1025), size_t(65536 + 3), kSize / 2}) {
    SCOPED_TRACE(len);
    std::memset(b_buf_.data(), 0, kSize);
    std::memset(a_buf_.data() + kSize / 2, 0, kSize / 2);
    ibv_sge ws = sge(a_buf_, a_mr_, 0, len);
    ibv_send_wr w = rdma_to_b(IBV_WR_RDMA_WRITE, 1, &ws, b_mr_->rkey);
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_send(a_, &w, &bad), 0);
    auto wcs = wait(1);
    ASSERT_EQ(wcs.size(), 1u);
    EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(wcs[0].opcode, IBV_WC_RDMA_WRITE);
    EXPECT_EQ(std::memcmp(a_buf_.data(), b_buf_.data(), len), 0);
    EXPECT_EQ(b_buf_[len], 0);  // nothing past the message

    // Read it back into the second half of a's buffer.
    ibv_sge rs = sge(a_buf_, a_mr_, kSize / 2, len);
    ibv_send_wr r = rdma_to_b(IBV_WR_RDMA_READ, 2, &rs, b_mr_->rkey);
    ASSERT_EQ(ibv_post_send(a_, &r, &bad), 0);
    wcs = wait(1);
    ASSERT_EQ(wcs.size(), 1u);
    EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(wcs[0].opcode, IBV_WC_RDMA_READ);
    EXPECT_EQ(wcs[0].byte_len, len);
    EXPECT_EQ(std::memcmp(a_buf_.data(), a_buf_.data() + kSize / 2, len), 0);
  }
}

TEST_F(Loopback, atomics__fetch_add_and_compare_swap) {
  uint64_t* target = reinterpret_cast<uint64_t*>(b_buf_.data() + 64);
  *target = 0x7776757473727170;
  ibv_sge s = sge(a_buf_, a_mr_, 0, 8);
  ibv_send_wr w{};
  w.wr_id = 1;
  w.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
  w.send_flags = IBV_SEND_SIGNALED;
  w.sg_list = &s;
  w.num_sge = 1;
  w.wr.atomic.remote_addr = reinterpret_cast<uint64_t>(target);
  w.wr.atomic.rkey = b_mr_->rkey;
  w.wr.atomic.compare_add = 0x036328FE883A1230;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a_, &w, &bad), 0);
  auto wcs = wait(1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wcs[0].opcode, IBV_WC_FETCH_ADD);
  uint64_t original;
  std::memcpy(&original, a_buf_.data(), 8);
  EXPECT_EQ(original, 0x7776757473727170u);
  EXPECT_EQ(*target, 0x7AD99E72FBAC83A0u);  // the DPU atomics paper's worked example (docs/sim.md, atomic-replay)

  w.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
  w.wr.atomic.compare_add = 1;  // does not match: no swap
  w.wr.atomic.swap = 5;
  ASSERT_EQ(ibv_post_send(a_, &w, &bad), 0);
  wcs = wait(1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].opcode, IBV_WC_COMP_SWAP);
  EXPECT_EQ(*target, 0x7AD99E72FBAC83A0u);
  w.wr.atomic.compare_add = 0x7AD99E72FBAC83A0;  // matches: swapped
  ASSERT_EQ(ibv_post_send(a_, &w, &bad), 0);
  wcs = wait(1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(*target, 5u);
}

TEST_F(Loopback, bad_rkey__remote_access_error_memory_unchanged) {
  ibv_sge s = sge(a_buf_, a_mr_, 0, 64);
  std::memset(a_buf_.data(), 0x5a, 64);
  ibv_send_wr w = rdma_to_b(IBV_WR_RDMA_WRITE, 9, &s, b_mr_->rkey ^ 0x80);
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a_, &w, &bad), 0);
  auto wcs = wait(1);
  ASSERT_GE(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wcs[0].status);
  EXPECT_EQ(b_buf_[0], 0);
  // The responder QP reports the violation as an affiliated asynchronous event.
  pollfd p{ctx_->async_fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 5000), 1);
  ibv_async_event ev{};
  ASSERT_EQ(ibv_get_async_event(ctx_, &ev), 0);
  EXPECT_EQ(ev.event_type, IBV_EVENT_QP_ACCESS_ERR) << ibv_event_type_str(ev.event_type);
  EXPECT_EQ(ev.element.qp, b_);
  ibv_ack_async_event(&ev);  // else ibv_destroy_qp would wait for it
}

TEST_F(Loopback, completion_channel__event_names_cq_and_context) {
  ASSERT_EQ(ibv_req_notify_cq(cq_, 0), 0);
  ibv_sge s = sge(a_buf_, a_mr_, 0, 16);
  ibv_send_wr w = rdma_to_b(IBV_WR_RDMA_WRITE, 3, &s, b_mr_->rkey);
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a_, &w, &bad), 0);
  pollfd p{channel_->fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 5000), 1);
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  ASSERT_EQ(ibv_get_cq_event(channel_, &ev_cq, &ev_ctx), 0);
  EXPECT_EQ(ev_cq, cq_);
  EXPECT_EQ(ev_ctx, this);
  ibv_ack_cq_events(cq_, 1);
  EXPECT_EQ(wait(1).size(), 1u);
  // Not re-armed: no second event.
  const int flags = fcntl(channel_->fd, F_GETFL);
  ASSERT_EQ(fcntl(channel_->fd, F_SETFL, flags | O_NONBLOCK), 0);
  EXPECT_EQ(ibv_get_cq_event(channel_, &ev_cq, &ev_ctx), -1);
  EXPECT_EQ(errno, EAGAIN);
}

TEST_F(Loopback, post_send_not_rts__error_and_bad_wr) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(a_, &a, IBV_QP_STATE), 0);
  ibv_qp_attr q{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(ibv_query_qp(a_, &q, IBV_QP_STATE, &init), 0);
  EXPECT_EQ(q.qp_state, IBV_QPS_ERR);
  ibv_qp* fresh = make_qp();
  ASSERT_NE(fresh, nullptr);
  ibv_sge s = sge(a_buf_, a_mr_, 0, 16);
  ibv_send_wr w{};
  w.opcode = IBV_WR_SEND;
  w.sg_list = &s;
  w.num_sge = 1;
  ibv_send_wr* bad = nullptr;
  EXPECT_NE(ibv_post_send(fresh, &w, &bad), 0);  // a RESET QP accepts no send WR
  EXPECT_EQ(bad, &w);
  EXPECT_EQ(ibv_destroy_qp(fresh), 0);
}

TEST_F(Loopback, query_qp__reports_connection) {
  ibv_qp_attr q{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(ibv_query_qp(b_, &q, IBV_QP_STATE | IBV_QP_DEST_QPN | IBV_QP_SQ_PSN, &init), 0);
  EXPECT_EQ(q.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(q.dest_qp_num, a_->qp_num);
  EXPECT_EQ(q.sq_psn, 200u);
  EXPECT_EQ(q.timeout, 14);
  EXPECT_EQ(init.qp_type, IBV_QPT_RC);
  EXPECT_EQ(init.send_cq, cq_);
}

TEST_F(Device, async_fd__is_a_pollable_fd) {
  EXPECT_GE(ctx_->async_fd, 0);
  EXPECT_NE(fcntl(ctx_->async_fd, F_GETFD), -1);
  pollfd p{ctx_->async_fd, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 0), 0);  // nothing happened
}

}  // namespace
}  // namespace vrnic::abi::test

namespace vrnic::abi::test {
namespace {

// A program may open the device twice and connect a QP of one context to a QP of the other.
TEST(TwoContexts, send_between_contexts__same_device) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ASSERT_EQ(n, 1);
  ibv_context* ctx[2] = {ibv_open_device(list[0]), ibv_open_device(list[0])};
  ASSERT_NE(ctx[0], nullptr);
  ASSERT_NE(ctx[1], nullptr);
  ASSERT_NE(ctx[0], ctx[1]);
  ibv_pd* pd[2];
  ibv_cq* cq[2];
  ibv_qp* qp[2];
  std::vector<uint8_t> buf[2] = {std::vector<uint8_t>(4096, 0x11), std::vector<uint8_t>(4096, 0)};
  ibv_mr* mr[2];
  for (int i = 0; i < 2; ++i) {
    pd[i] = ibv_alloc_pd(ctx[i]);
    cq[i] = ibv_create_cq(ctx[i], 16, nullptr, nullptr, 0);
    mr[i] = ibv_reg_mr(pd[i], buf[i].data(), buf[i].size(), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_TRUE(pd[i] && cq[i] && mr[i]);
    ibv_qp_init_attr init{};
    init.send_cq = init.recv_cq = cq[i];
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = init.cap.max_recv_wr = 4;
    init.cap.max_send_sge = init.cap.max_recv_sge = 1;
    qp[i] = ibv_create_qp(pd[i], &init);
    ASSERT_NE(qp[i], nullptr);
  }
  EXPECT_NE(qp[0]->qp_num, qp[1]->qp_num);  // one device: one QP number space
  for (int i = 0; i < 2; ++i) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    ASSERT_EQ(ibv_modify_qp(qp[i], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                           IBV_QP_ACCESS_FLAGS), 0);
    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_4096;
    a.dest_qp_num = qp[1 - i]->qp_num;
    a.min_rnr_timer = 1;
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh.hop_limit = 1;
    ASSERT_EQ(ibv_query_gid(ctx[1 - i], 1, 0, &a.ah_attr.grh.dgid), 0);
    ASSERT_EQ(ibv_modify_qp(qp[i], &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                                           IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                           IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER), 0);
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    ASSERT_EQ(ibv_modify_qp(qp[i], &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                           IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                           IBV_QP_MAX_QP_RD_ATOMIC), 0);
  }
  ibv_sge rs{reinterpret_cast<uint64_t>(buf[1].data()), 4096, mr[1]->lkey};
  ibv_recv_wr rwr{};
  rwr.sg_list = &rs;
  rwr.num_sge = 1;
  ibv_recv_wr* bad_r = nullptr;
  ASSERT_EQ(ibv_post_recv(qp[1], &rwr, &bad_r), 0);
  ibv_sge ss{reinterpret_cast<uint64_t>(buf[0].data()), 3000, mr[0]->lkey};
  ibv_send_wr swr{};
  swr.opcode = IBV_WR_SEND;
  swr.send_flags = IBV_SEND_SIGNALED;
  swr.sg_list = &ss;
  swr.num_sge = 1;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(qp[0], &swr, &bad), 0);
  int got[2] = {0, 0};
  ibv_wc wc[2];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while ((got[0] < 1 || got[1] < 1) && std::chrono::steady_clock::now() < deadline) {
    for (int i = 0; i < 2; ++i) {
      if (got[i] < 1) got[i] += ibv_poll_cq(cq[i], 1, &wc[i]);
    }
  }
  ASSERT_EQ(got[0], 1);
  ASSERT_EQ(got[1], 1);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].opcode, IBV_WC_SEND);
  EXPECT_EQ(wc[1].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[1].opcode, IBV_WC_RECV);
  EXPECT_EQ(wc[1].byte_len, 3000u);
  EXPECT_EQ(buf[1][2999], 0x11);
  EXPECT_EQ(buf[1][3000], 0);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(ibv_destroy_qp(qp[i]), 0);
    EXPECT_EQ(ibv_dereg_mr(mr[i]), 0);
    EXPECT_EQ(ibv_destroy_cq(cq[i]), 0);
    EXPECT_EQ(ibv_dealloc_pd(pd[i]), 0);
  }
  EXPECT_EQ(ibv_close_device(ctx[0]), 0);
  EXPECT_EQ(ibv_close_device(ctx[1]), 0);
  ibv_free_device_list(list);
}

}  // namespace
}  // namespace vrnic::abi::test
