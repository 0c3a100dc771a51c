// The device-wide window: with many RC QPs sending at once, the packets in flight stay within
// kDeviceWindow (plus one per QP), every QP still makes progress, and everything lands.
#include <gtest/gtest.h>

#include <map>

#include "engine/requester.h"
#include "engine/test_fabric.h"

namespace vrnic::engine::testing {
namespace {

TEST(DeviceWindow, requester_progress__many_qps_share_the_budget_and_all_data_lands) {
  Fabric f;
  Node& a = f.add_node(1);
  Node& b = f.add_node(2);
  // 100 QPs: a share of the budget (about 10 packets) that is no multiple of the AckReq
  // interval, so a QP held by the budget must ask for its ACK itself.
  constexpr int kQps = 100;
  constexpr uint32_t kLen = 64 * 1024;  // 64 packets at MTU 1024: a full per-QP window each
  Buffer& src = a.reg(kLen);
  Buffer& dst = b.reg(size_t(kLen) * kQps);
  fill_random(src.data(), kLen, 7);
  std::vector<Qp*> qa, qb;
  for (int i = 0; i < kQps; ++i) {
    qa.push_back(a.create_qp());
    qb.push_back(b.create_qp());
    Fabric::connect(a, qa.back(), b, qb.back());
  }
  // The last packet each QP sends before the window holds it must ask for an ACK (BTH
  // byte 8, bit 7), or that QP waits for its ACK timer while the others keep the budget.
  std::map<uint32_t, bool> last_ack_req;
  f.wire().set_drop_filter([&](const WirePacket& p) {
    const uint32_t dqpn = uint32_t(p.data[5]) << 16 | uint32_t(p.data[6]) << 8 | p.data[7];
    last_ack_req[dqpn] = (p.data[8] & 0x80) != 0;
    return false;
  });
  Sge sge{src.addr(), kLen, src.mr.lkey};
  for (int round = 0; round < 2; ++round) {
    last_ack_req.clear();
    for (int i = 0; i < kQps; ++i) {
      ASSERT_EQ(post_send(a, qa[i], wr_of(WrOpcode::kRdmaWrite, uint64_t(i), &sge, dst.addr() + uint64_t(i) * kLen,
                                             dst.mr.rkey)),
                0);
    }
    // Without the device window this would be 100 x 64 = 6400 packets on the wire.
    EXPECT_LE(f.wire().in_flight(), size_t(kDeviceWindow) + kQps);
    EXPECT_GE(f.wire().in_flight(), size_t(kDeviceWindow) - 64);
    ASSERT_EQ(last_ack_req.size(), size_t(kQps));
    for (auto& [qpn, ack_req] : last_ack_req) EXPECT_TRUE(ack_req) << "qp " << qpn;
    size_t peak = 0;
    while (f.wire().step()) peak = std::max(peak, f.wire().in_flight());
    ASSERT_TRUE(f.run());
    EXPECT_LE(peak, size_t(kDeviceWindow) + kQps);
    auto wcs = a.poll();
    ASSERT_EQ(wcs.size(), size_t(kQps));
    for (auto& wc : wcs) EXPECT_EQ(wc.status, WcStatus::kSuccess);
  }
  for (int i = 0; i < kQps; ++i)
    ASSERT_EQ(std::memcmp(dst.data() + size_t(i) * kLen, src.data(), kLen), 0) << "qp " << i;
  EXPECT_EQ(a.ctr().retransmitted_packets, 0u);
  EXPECT_EQ(a.ctr().ack_timeouts, 0u);  // every held QP got its ACK without the timer
}

TEST(DeviceWindow, modify_qp__a_qp_moved_to_err_gives_back_its_share) {
  Fabric f;
  Node& a = f.add_node(1);
  Node& b = f.add_node(2);
  constexpr int kQps = 20;
  constexpr uint32_t kLen = 64 * 1024;
  Buffer& src = a.reg(kLen);
  Buffer& dst = b.reg(size_t(kLen) * kQps);
  std::vector<Qp*> qa, qb;
  for (int i = 0; i < kQps; ++i) {
    qa.push_back(a.create_qp());
    qb.push_back(b.create_qp());
    Fabric::connect(a, qa.back(), b, qb.back());
  }
  Sge sge{src.addr(), kLen, src.mr.lkey};
  auto post_all = [&] {
    for (int i = 0; i < kQps; ++i) {
      ASSERT_EQ(post_send(a, qa[i], wr_of(WrOpcode::kRdmaWrite, 0, &sge, dst.addr() + uint64_t(i) * kLen, dst.mr.rkey)),
                0);
    }
  };
  post_all();
  // Half of the QPs fail with packets in flight: their share must come back, or the others
  // would be held to one packet each from now on.
  QpAttr err;
  err.qp_state = QpState::kErr;
  for (int i = 0; i < kQps / 2; ++i) ASSERT_EQ(a.dev->modify_qp(qa[i], err, kAttrState), 0);
  ASSERT_TRUE(f.run());
  a.poll();
  const size_t before = f.wire().stats().sent;
  for (int i = kQps / 2; i < kQps; ++i) {
    ASSERT_EQ(post_send(a, qa[i], wr_of(WrOpcode::kRdmaWrite, 0, &sge, dst.addr() + uint64_t(i) * kLen, dst.mr.rkey)),
              0);
  }
  // 10 QPs x 64 packets fit the budget at once.
  EXPECT_EQ(f.wire().stats().sent - before, size_t(kQps / 2) * 64);
  ASSERT_TRUE(f.run());
  auto wcs = a.poll();
  ASSERT_EQ(wcs.size(), size_t(kQps / 2));
  for (auto& wc : wcs) EXPECT_EQ(wc.status, WcStatus::kSuccess);
}

}  // namespace
}  // namespace vrnic::engine::testing
