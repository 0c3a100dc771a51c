// Protocol tests without faults: SEND, WRITE, WRITE_WITH_IMM, READ and atomics between two
// engines over the loop wire; every byte, every CQE field and the counters are checked.
#include <gtest/gtest.h>

#include "engine/test_fabric.h"

namespace vrnic::engine::testing {
namespace {

struct Pair : ::testing::Test {
  Fabric f;
  Node& a = f.add_node(1);
  Node& b = f.add_node(2);
  Qp* qa = nullptr;
  Qp* qb = nullptr;
  void connect(const ConnectOptions& o = {}) {
    qa = a.create_qp();
    qb = b.create_qp();
    Fabric::connect(a, qa, b, qb, o);
  }
};

SendWr make_wr(WrOpcode op, uint64_t wr_id, Sge* sg, uint32_t n, uint32_t flags = kSendSignaled) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = op;
  wr.sg_list = sg;
  wr.num_sge = n;
  wr.send_flags = flags;
  return wr;
}

class SendSizes : public Pair, public ::testing::WithParamInterface<std::tuple<size_t, uint8_t>> {};

TEST_P(SendSizes, post_send__send_delivers_exact_bytes) {
  auto [size, mtu] = GetParam();
  connect({.mtu = mtu});
  Buffer& src = a.reg(size + 16);
  Buffer& dst = b.reg(size + 16);
  fill_random(src.data(), src.bytes.size(), static_cast<uint32_t>(size));
  const size_t off = 3;  // unaligned on both sides
  ASSERT_EQ(post_recv(b, qb, 77, {{dst.addr() + 5, static_cast<uint32_t>(size + 8), dst.mr.lkey}}), 0);
  Sge sg{src.addr() + off, static_cast<uint32_t>(size), src.mr.lkey};
  ASSERT_EQ(post_send(a, qa, make_wr(WrOpcode::kSend, 11, &sg, 1)), 0);
  ASSERT_TRUE(f.run());
  ASSERT_EQ(0, std::memcmp(dst.data() + 5, src.data() + off, size));
  EXPECT_EQ(dst.bytes[4], 0);  // nothing before the buffer
  auto rc = b.poll();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(rc[0].opcode, WcOpcode::kRecv);
  EXPECT_EQ(rc[0].wr_id, 77u);
  EXPECT_EQ(rc[0].byte_len, size);
  EXPECT_EQ(rc[0].qp_num, b.dev->qp_num(qb));
  EXPECT_EQ(rc[0].src_qp, a.dev->qp_num(qa));
  EXPECT_EQ(rc[0].wc_flags, 0u);
  auto sc = a.poll();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(sc[0].opcode, WcOpcode::kSend);
  EXPECT_EQ(sc[0].wr_id, 11u);
  EXPECT_EQ(sc[0].qp_num, a.dev->qp_num(qa));
  uint32_t mtu_b = mtu_bytes(mtu);
  uint64_t pkts = size == 0 ? 1 : (size + mtu_b - 1) / mtu_b;
  EXPECT_EQ(a.ctr().tx_send, pkts);
  EXPECT_EQ(b.ctr().rx_send, pkts);
  EXPECT_EQ(a.ctr().retransmitted_packets, 0u);
  EXPECT_EQ(b.ctr().rx_duplicate, 0u);
  EXPECT_GE(b.ctr().tx_ack, 1u);
  EXPECT_EQ(a.ctr().rx_icrc_errors + b.ctr().rx_icrc_errors, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, SendSizes,
    ::testing::Values(std::make_tuple(0, 3), std::make_tuple(1, 3), std::make_tuple(3, 1),
                      std::make_tuple(255, 1), std::make_tuple(256, 1), std::make_tuple(257, 1),
                      std::make_tuple(1023, 3), std::make_tuple(1024, 3),
                      std::make_tuple(1025, 3), std::make_tuple(4096, 5),
                      std::make_tuple(65537, 2), std::make_tuple(1 << 20, 5),
                      std::make_tuple((3 << 20) + 7, 3)));

TEST_F(Pair, post_send__send_gathers_and_scatters_multiple_sges) {
  connect({.mtu = 1});
  Buffer& src = a.reg(4000);
  Buffer& dst = b.reg(4000);
  fill_random(src.data(), 4000, 9);
  Sge sg[3] = {{src.addr() + 1, 100, src.mr.lkey},
               {src.addr() + 1000, 777, src.mr.lkey},
               {src.addr() + 3000, 1, src.mr.lkey}};
  ASSERT_EQ(post_recv(b, qb, 1, {{dst.addr(), 300, dst.mr.lkey}, {dst.addr() + 2000, 1000, dst.mr.lkey}}), 0);
  ASSERT_EQ(post_send(a, qa, make_wr(WrOpcode::kSend, 2, sg, 3)), 0);
  ASSERT_TRUE(f.run());
  std::vector<uint8_t> want;
  for (auto& s : sg) want.insert(want.end(), src.data() + (s.addr - src.addr()), src.data() + (s.addr - src.addr()) + s.length);
  std::vector<uint8_t> got(dst.data(), dst.data() + 300);
  got.insert(got.end(), dst.data() + 2000, dst.data() + 2000 + (878 - 300));
  EXPECT_EQ(got, want);
  auto rc = b.poll();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].byte_len, 878u);
}

TEST_F(Pair, post_send__inline_data_is_copied_at_post_time) {
  connect();
  Buffer& dst = b.reg(256);
  uint8_t msg[60];
  fill_random(msg, sizeof msg, 3);
  uint8_t copy[60];
  std::memcpy(copy, msg, sizeof msg);
  ASSERT_EQ(post_recv(b, qb, 1, {{dst.addr(), 256, dst.mr.lkey}}), 0);
  Sge sg{reinterpret_cast<uint64_t>(msg), sizeof msg, 0};  // no lkey needed for inline
  ASSERT_EQ(post_send(a, qa, make_wr(WrOpcode::kSend, 2, &sg, 1, kSendSignaled | kSendInline)), 0);
  std::memset(msg, 0, sizeof msg);  // the caller may reuse the buffer at once
  ASSERT_TRUE(f.run());
  EXPECT_EQ(0, std::memcmp(dst.data(), copy, sizeof copy));
  EXPECT_EQ(a.poll().at(0).status, WcStatus::kSuccess);
}

TEST_F(Pair, post_send__inline_too_long_is_einval_with_bad_index) {
  connect();
  uint8_t msg[300] = {};
  Sge ok{reinterpret_cast<uint64_t>(msg), 10, 0};
  Sge big{reinterpret_cast<uint64_t>(msg), 300, 0};
  SendWr wrs[2] = {make_wr(WrOpcode::kSend, 1, &ok, 1, kSendInline),
                   make_wr(WrOpcode::kSend, 2, &big, 1, kSendInline)};
  size_t bad = 99;
  EXPECT_EQ(a.dev->post_send(qa, wrs, 2, &bad), EINVAL);
  EXPECT_EQ(bad, 1u);
}

TEST_F(Pair, post_send__send_with_imm_reports_imm_on_receive) {
  connect();
  Buffer& src = a.reg(64);
  Buffer& dst = b.reg(64);
  ASSERT_EQ(post_recv(b, qb, 1, {{dst.addr(), 64, dst.mr.lkey}}), 0);
  Sge sg{src.addr(), 10, src.mr.lkey};
  SendWr wr = make_wr(WrOpcode::kSendWithImm, 5, &sg, 1, kSendSignaled | kSendSolicited);
  wr.imm_data = 0x12345678;
  b.dev->req_notify_cq(b.cq, true);
  ASSERT_EQ(post_send(a, qa, wr), 0);
  ASSERT_TRUE(f.run());
  auto rc = b.poll();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].wc_flags & kWcWithImm, kWcWithImm);
  EXPECT_EQ(rc[0].imm_data, 0x12345678u);
  EXPECT_EQ(rc[0].byte_len, 10u);
  EXPECT_EQ(b.sink.cq_events.size(), 1u);  // solicited event fired the solicited-only arm
}

TEST_F(Pair, post_send__unsignaled_wrs_retire_silently) {
  connect();
  Buffer& src = a.reg(64);
  Buffer& dst = b.reg(64 * 10);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(post_recv(b, qb, i, {{dst.addr() + 64 * i, 64, dst.mr.lkey}}), 0);
  Sge sg{src.addr(), 8, src.mr.lkey};
  for (int i = 0; i < 10; ++i)
    ASSERT_EQ(post_send(a, qa, make_wr(WrOpcode::kSend, i, &sg, 1, i == 9 ? uint32_t{kSendSignaled} : 0u)), 0);
  ASSERT_TRUE(f.run());
  auto sc = a.poll();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].wr_id, 9u);
  EXPECT_EQ(b.poll().size(), 10u);
}

class RdmaSizes : public Pair, public ::testing::WithParamInterface<size_t> {};

TEST_P(RdmaSizes, post_send__write_places_exact_bytes) {
  size_t size = GetParam();
  connect();
  Buffer& src = a.reg(size + 8);
  Buffer& dst = b.reg(size + 8);
  fill_random(src.data(), size + 8, 5);
  Sge sg{src.addr() + 1, static_cast<uint32_t>(size), src.mr.lkey};
  SendWr wr = make_wr(WrOpcode::kRdmaWrite, 3, &sg, 1);
  wr.remote_addr = dst.addr() + 7;
  wr.rkey = dst.mr.rkey;
  ASSERT_EQ(post_send(a, qa, wr), 0);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(0, std::memcmp(dst.data() + 7, src.data() + 1, size));
  auto sc = a.poll();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(sc[0].opcode, WcOpcode::kRdmaWrite);
  EXPECT_TRUE(b.poll().empty());  // a WRITE without immediate consumes no receive
}

TEST_P(RdmaSizes, post_send__read_returns_exact_bytes) {
  size_t size = GetParam();
  connect();
  Buffer& local = a.reg(size + 8);
  Buffer& remote = b.reg(size + 8);
  fill_random(remote.data(), size + 8, 6);
  Sge sg{local.addr() + 2, static_cast<uint32_t>(size), local.mr.lkey};
  SendWr wr = make_wr(WrOpcode::kRdmaRead, 4, &sg, 1);
  wr.remote_addr = remote.addr() + 5;
  wr.rkey = remote.mr.rkey;
  ASSERT_EQ(post_send(a, qa, wr), 0);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(0, std::memcmp(local.data() + 2, remote.data() + 5, size));
  auto sc = a.poll();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(sc[0].opcode, WcOpcode::kRdmaRead);
  EXPECT_EQ(sc[0].byte_len, size);
  EXPECT_EQ(a.ctr().retransmitted_packets, 0u);
}

INSTANTIATE_TEST_SUITE_P(Sizes, RdmaSizes,
                         ::testing::Values(0, 1, 7, 1024, 1025, 65536 + 3, 1 << 20,
                                           (5 << 20) + 1));

TEST_F(Pair, post_send__write_with_imm_consumes_a_receive) {
  connect();
  Buffer& src = a.reg(5000);
  Buffer& dst = b.reg(5000);
  fill_random(src.data(), 5000, 8);
  ASSERT_EQ(post_recv(b, qb, 42, {}), 0);
  Sge sg{src.addr(), 5000, src.mr.lkey};
  SendWr wr = make_wr(WrOpcode::kRdmaWriteWithImm, 3, &sg, 1);
  wr.remote_addr = dst.addr();
  wr.rkey = dst.mr.rkey;
  wr.imm_data = 0xdeadbeef;
  ASSERT_EQ(post_send(a, qa, wr), 0);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(0, std::memcmp(dst.data(), src.data(), 5000));
  auto rc = b.poll();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(rc[0].wr_id, 42u);
  EXPECT_EQ(rc[0].byte_len, 5000u);
  EXPECT_EQ(rc[0].imm_data, 0xdeadbeefu);
  EXPECT_EQ(rc[0].wc_flags, uint32_t{kWcWithImm});
}

TEST_F(Pair, post_send__fetch_add_seed_document_example) {
  connect();
  // The MR is registered at iova 0x1_0001_F000, so va 0x1_0001_F270 is offset 0x270.
  std::vector<uint8_t> mem(0x1000);
  MrInfo mr;
  ASSERT_EQ(b.dev->reg_mr(b.pd, mem.data(), mem.size(), 0x10001F000ull,
                          kLocalWrite | kRemoteAtomic, mr), 0);
  uint64_t v = 0x7776757473727170ull;
  std::memcpy(mem.data() + 0x270, &v, 8);
  Buffer& res = a.reg(8);
  Sge sg{res.addr(), 8, res.mr.lkey};
  SendWr wr = make_wr(WrOpcode::kAtomicFetchAdd, 9, &sg, 1);
  wr.remote_addr = 0x10001F270ull;
  wr.rkey = mr.rkey;
  wr.compare_add = 0x036328FE883A1230ull;
  ASSERT_EQ(post_send(a, qa, wr), 0);
  ASSERT_TRUE(f.run());
  uint64_t now, orig;
  std::memcpy(&now, mem.data() + 0x270, 8);
  std::memcpy(&orig, res.data(), 8);
  EXPECT_EQ(now, 0x7AD99E72FBAC83A0ull);
  EXPECT_EQ(orig, 0x7776757473727170ull);
  auto sc = a.poll();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].opcode, WcOpcode::kFetchAdd);
  EXPECT_EQ(sc[0].byte_len, 8u);
  EXPECT_EQ(b.ctr().rx_atomic, 1u);
  EXPECT_EQ(b.ctr().tx_atomic_ack, 1u);
}

TEST_F(Pair, post_send__compare_swap_succeeds_and_fails_by_compare_value) {
  connect();
  Buffer& target = b.reg(16);
  uint64_t v = 1000;
  std::memcpy(target.data() + 8, &v, 8);
  Buffer& res = a.reg(16);
  Sge sg{res.addr(), 8, res.mr.lkey};
  SendWr wr = make_wr(WrOpcode::kAtomicCmpSwp, 1, &sg, 1);
  wr.remote_addr = target.addr() + 8;
  wr.rkey = target.mr.rkey;
  wr.compare_add = 999;  // wrong: no swap
  wr.swap = 5;
  ASSERT_EQ(post_send(a, qa, wr), 0);
  ASSERT_TRUE(f.run());
  uint64_t mem, orig;
  std::memcpy(&mem, target.data() + 8, 8);
  std::memcpy(&orig, res.data(), 8);
  EXPECT_EQ(mem, 1000u);
  EXPECT_EQ(orig, 1000u);
  wr.compare_add = 1000;  // right: swapped
  sg.addr = res.addr() + 8;
  ASSERT_EQ(post_send(a, qa, wr), 0);
  ASSERT_TRUE(f.run());
  std::memcpy(&mem, target.data() + 8, 8);
  std::memcpy(&orig, res.data() + 8, 8);
  EXPECT_EQ(mem, 5u);
  EXPECT_EQ(orig, 1000u);
  auto sc = a.poll();
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[1].opcode, WcOpcode::kCompSwap);
}

TEST_F(Pair, post_send__mixed_operations_complete_in_order) {
  connect({.max_rd_atomic = 2});
  Buffer& la = a.reg(1 << 16);
  Buffer& rb = b.reg(1 << 16);
  fill_random(la.data(), 1 << 16, 1);
  fill_random(rb.data(), 1 << 16, 2);
  std::vector<uint8_t> rb0(rb.bytes);
  for (int i = 0; i < 8; ++i) ASSERT_EQ(post_recv(b, qb, 100 + i, {{rb.addr() + 60000, 100, rb.mr.lkey}}), 0);
  uint64_t id = 0;
  for (int round = 0; round < 8; ++round) {
    Sge w{la.addr() + 4096 * round, 3000, la.mr.lkey};
    SendWr wr = make_wr(WrOpcode::kRdmaWrite, id++, &w, 1);
    wr.remote_addr = rb.addr() + 4096 * round;
    wr.rkey = rb.mr.rkey;
    ASSERT_EQ(post_send(a, qa, wr), 0);
    Sge r{la.addr() + 40000 + 512 * round, 500, la.mr.lkey};
    SendWr rd = make_wr(WrOpcode::kRdmaRead, id++, &r, 1);
    rd.remote_addr = rb.addr() + 50000 + 512 * round;
    rd.rkey = rb.mr.rkey;
    ASSERT_EQ(post_send(a, qa, rd), 0);
    Sge s{la.addr() + 30000, 50, la.mr.lkey};
    ASSERT_EQ(post_send(a, qa, make_wr(WrOpcode::kSend, id++, &s, 1)), 0);
  }
  ASSERT_TRUE(f.run());
  auto sc = a.poll();
  ASSERT_EQ(sc.size(), 24u);
  for (size_t i = 0; i < sc.size(); ++i) {
    EXPECT_EQ(sc[i].wr_id, i);
    EXPECT_EQ(sc[i].status, WcStatus::kSuccess);
  }
  for (int round = 0; round < 8; ++round) {
    EXPECT_EQ(0, std::memcmp(rb.data() + 4096 * round, la.data() + 4096 * round, 3000));
    EXPECT_EQ(0, std::memcmp(la.data() + 40000 + 512 * round, rb0.data() + 50000 + 512 * round, 500));
  }
  EXPECT_EQ(b.poll().size(), 8u);
}

TEST_F(Pair, post_send__psn_wraps_at_2_pow_24) {
  connect({.mtu = 1, .a_psn = 0xFFFFF0, .b_psn = 0xFFFFFF});
  Buffer& src = a.reg(65536);
  Buffer& dst = b.reg(65536);
  fill_random(src.data(), 65536, 4);
  ASSERT_EQ(post_recv(b, qb, 1, {{dst.addr(), 65536, dst.mr.lkey}}), 0);
  Sge sg{src.addr(), 65536, src.mr.lkey};
  ASSERT_EQ(post_send(a, qa, make_wr(WrOpcode::kSend, 1, &sg, 1)), 0);  // 256 packets
  ASSERT_TRUE(f.run());
  Buffer& back = a.reg(65536);
  Sge bsg{dst.addr(), 65536, dst.mr.lkey};
  ASSERT_EQ(post_send(b, qb, make_wr(WrOpcode::kSend, 3, &bsg, 1)), 0);  // from 0xFFFFFF
  ASSERT_EQ(post_recv(a, qa, 4, {{back.addr(), 65536, back.mr.lkey}}), 0);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(0, std::memcmp(back.data(), src.data(), 65536));
  EXPECT_EQ(0, std::memcmp(dst.data(), src.data(), 65536));
  EXPECT_EQ(a.poll().size(), 2u);
  EXPECT_EQ(b.poll().size(), 2u);
  QpAttr attr;
  QpInitAttr init;
  ASSERT_EQ(a.dev->query_qp(qa, attr, init), 0);
  EXPECT_EQ(attr.sq_psn, (0xFFFFF0u + 256) & 0xffffff);
  EXPECT_EQ(a.ctr().retransmitted_packets + b.ctr().retransmitted_packets, 0u);
}

TEST_F(Pair, post_send__loopback_to_own_gid) {
  Qp* q1 = a.create_qp();
  Qp* q2 = a.create_qp();
  Fabric::connect(a, q1, a, q2);
  Qp* self = a.create_qp();
  Fabric::bring_up(a, self, a.gid, a.dev->qp_num(self), 7, 7, {});
  Buffer& src = a.reg(3000);
  Buffer& dst = a.reg(6000);
  fill_random(src.data(), 3000, 11);
  ASSERT_EQ(post_recv(a, q2, 1, {{dst.addr(), 3000, dst.mr.lkey}}), 0);
  ASSERT_EQ(post_recv(a, self, 2, {{dst.addr() + 3000, 3000, dst.mr.lkey}}), 0);
  Sge sg{src.addr(), 3000, src.mr.lkey};
  ASSERT_EQ(post_send(a, q1, make_wr(WrOpcode::kSend, 3, &sg, 1)), 0);
  ASSERT_EQ(post_send(a, self, make_wr(WrOpcode::kSend, 4, &sg, 1)), 0);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(0, std::memcmp(dst.data(), src.data(), 3000));
  EXPECT_EQ(0, std::memcmp(dst.data() + 3000, src.data(), 3000));
  auto wcs = a.poll();
  EXPECT_EQ(wcs.size(), 4u);
  for (auto& wc : wcs) EXPECT_EQ(wc.status, WcStatus::kSuccess);
}

TEST_F(Pair, post_send__window_bounds_packets_in_flight) {
  connect();
  Buffer& src = a.reg(1 << 20);
  Sge sg{src.addr(), 1 << 20, src.mr.lkey};
  Buffer& dst = b.reg(1 << 20);
  SendWr wr = make_wr(WrOpcode::kRdmaWrite, 1, &sg, 1);
  wr.remote_addr = dst.addr();
  wr.rkey = dst.mr.rkey;
  ASSERT_EQ(post_send(a, qa, wr), 0);
  EXPECT_EQ(f.wire().in_flight(), kWindow1k);  // 1024 packets to send, a window before an ACK
  EXPECT_TRUE(a.dev->has_pending_tx());
  ASSERT_TRUE(f.run());
  EXPECT_FALSE(a.dev->has_pending_tx());
  EXPECT_EQ(a.ctr().tx_write, 1024u);
}

TEST_F(Pair, modify_qp__sqd_finishes_started_messages_and_starts_no_new_one) {
  connect();
  Buffer& src = a.reg(1 << 20);
  Buffer& dst = b.reg(1 << 20);
  fill_random(src.data(), 1 << 20, 12);
  Sge sg{src.addr(), 1 << 20, src.mr.lkey};
  SendWr wr = make_wr(WrOpcode::kRdmaWrite, 1, &sg, 1);
  wr.remote_addr = dst.addr();
  wr.rkey = dst.mr.rkey;
  ASSERT_EQ(post_send(a, qa, wr), 0);  // started: 64 of its 1024 packets are out
  Sge small{src.addr(), 16, src.mr.lkey};
  ASSERT_EQ(post_send(a, qa, make_wr(WrOpcode::kSend, 2, &small, 1)), 0);  // waits behind it
  ASSERT_EQ(post_recv(b, qb, 9, {{dst.addr(), 16, dst.mr.lkey}}), 0);
  QpAttr attr;
  attr.qp_state = QpState::kSqd;
  ASSERT_EQ(a.dev->modify_qp(qa, attr, kAttrState | kAttrEnSqdAsyncNotify), 0);
  EXPECT_TRUE(a.sink.async_events.empty());  // not drained yet
  ASSERT_TRUE(f.run());
  EXPECT_EQ(0, std::memcmp(dst.data() + 16, src.data() + 16, (1 << 20) - 16));
  auto wcs = a.poll();
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_TRUE(b.poll().empty());  // the SEND was not started
  ASSERT_EQ(a.sink.async_events.size(), 1u);
  EXPECT_EQ(a.sink.async_events[0].type, AsyncEventType::kSqDrained);
  attr.qp_state = QpState::kRts;
  ASSERT_EQ(a.dev->modify_qp(qa, attr, kAttrState), 0);
  ASSERT_TRUE(f.run());
  EXPECT_EQ(a.poll().at(0).wr_id, 2u);
  EXPECT_EQ(b.poll().at(0).wr_id, 9u);
}

}  // namespace
}  // namespace vrnic::engine::testing
