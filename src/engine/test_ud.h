// Shared by the UD, UC and multicast tests: QP and AH helpers over the loop wire, the Ud fixture.
#pragma once
#include <gtest/gtest.h>

#include <cerrno>

#include "engine/memory_table.h"
#include "engine/test_fabric.h"
#include "engine/ud.h"
#include "wire/opcode.h"

namespace vrnic::engine::testing {

inline constexpr uint32_t kQkey = 0x11111111;

inline wire::Packet parse(const WirePacket& p) {
  wire::Packet h;
  EXPECT_EQ(wire::parse_packet(p.data, h), wire::ParseError::kOk);
  return h;
}

inline Qp* make_qp(Node& n, QpType type, uint32_t depth = 64) {
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
inline void ud_up(Node& n, Qp* qp, uint32_t qkey = kQkey) {
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
inline void uc_up(Node& n, Qp* qp, const Gid& dgid, uint32_t dqpn, uint32_t sq_psn, uint32_t rq_psn,
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

inline Ah* make_ah(Node& n, const Gid& dgid) {
  AddressVector av;
  av.dgid = dgid;
  Errno err = -1;
  Ah* ah = n.dev->create_ah(n.pd, av, err);
  EXPECT_EQ(err, 0);
  EXPECT_NE(ah, nullptr);
  return ah;
}

inline SendWr ud_wr(uint64_t id, Sge* sg, Ah* ah, uint32_t qpn, uint32_t qkey = kQkey,
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

inline QpState state_of(Node& n, Qp* qp) {
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

}  // namespace vrnic::engine::testing
