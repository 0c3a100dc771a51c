// The QP state diagram (IBA 10.3.1, 11.2.4.2): every edge, its attributes, and qp_transition.
#include <gtest/gtest.h>

#include <cerrno>
#include <set>
#include <string>
#include <vector>

#include "engine/test_host_memory.h"
#include "engine/core.h"
#include "engine/qp_transition.h"

namespace vrnic::engine {
namespace {

constexpr QpState kAll[] = {QpState::kReset, QpState::kInit, QpState::kRtr, QpState::kRts,
                            QpState::kSqd,   QpState::kSqe,  QpState::kErr};
constexpr QpType kTypes[] = {QpType::kRc, QpType::kUc, QpType::kUd};

std::string edge(QpState from, QpState to) {
  return std::string(to_string(from)) + ">" + to_string(to);
}

// The Modify QP edges of IBA 10.3.1 (the same for RC, UC and UD): to RESET and to ERR from
// every state, and the path up to RTS with its side loops.
std::set<std::string> modify_edges() {
  std::set<std::string> e = {"RESET>INIT", "INIT>INIT", "INIT>RTR", "RTR>RTS", "RTS>RTS",
                             "RTS>SQD",    "SQD>RTS",   "SQD>SQD",  "SQE>RTS"};
  for (QpState s : kAll) {
    e.insert(edge(s, QpState::kReset));
    e.insert(edge(s, QpState::kErr));
  }
  return e;
}

TEST(QpDiagram, transition_allowed__modify_edges_of_every_type) {
  const std::set<std::string> allowed = modify_edges();
  for (QpType type : kTypes)
    for (QpState from : kAll)
      for (QpState to : kAll)
        EXPECT_EQ(transition_allowed(type, from, to, QpCause::kModify),
                  allowed.count(edge(from, to)) == 1)
            << edge(from, to) << " type " << int(type);
}

TEST(QpDiagram, transition_allowed__error_takes_every_state_but_reset_to_err) {
  for (QpType type : kTypes)
    for (QpState from : kAll)
      for (QpState to : kAll)
        EXPECT_EQ(transition_allowed(type, from, to, QpCause::kError),
                  to == QpState::kErr && from != QpState::kReset)
            << edge(from, to) << " type " << int(type);
}

TEST(QpDiagram, transition_allowed__send_queue_error_only_uc_ud_from_rts_or_sqd) {
  for (QpType type : kTypes)
    for (QpState from : kAll)
      for (QpState to : kAll) {
        const bool want = type != QpType::kRc && to == QpState::kSqe &&
                          (from == QpState::kRts || from == QpState::kSqd);
        EXPECT_EQ(transition_allowed(type, from, to, QpCause::kSendQueueError), want)
            << edge(from, to) << " type " << int(type);
      }
}

TEST(QpDiagram, transition_allowed__unknown_state_refused) {
  for (QpCause cause : {QpCause::kModify, QpCause::kError, QpCause::kSendQueueError}) {
    EXPECT_FALSE(transition_allowed(QpType::kUd, QpState::kUnknown, QpState::kErr, cause));
    EXPECT_FALSE(transition_allowed(QpType::kUd, QpState::kRts, QpState::kUnknown, cause));
  }
}

// One row of the attribute table of 11.2.4.2: what a Modify QP edge requires and allows
// besides the state itself.
struct Row {
  QpState from, to;
  uint32_t required, optional;
};

constexpr uint32_t kEveryAttr = (1u << 21) - 1;  // kAttrState .. kAttrDestQpn
constexpr uint32_t kRtsOptRc = kAttrCurState | kAttrAccessFlags | kAttrAltPath |
                               kAttrPathMigState | kAttrMinRnrTimer;

std::vector<Row> rows(QpType type) {
  using S = QpState;
  if (type == QpType::kUd)
    return {{S::kReset, S::kInit, kAttrPkeyIndex | kAttrPort | kAttrQkey, 0},
            {S::kInit, S::kInit, 0, kAttrPkeyIndex | kAttrPort | kAttrQkey},
            {S::kInit, S::kRtr, 0, kAttrPkeyIndex | kAttrQkey},
            {S::kRtr, S::kRts, kAttrSqPsn, kAttrCurState | kAttrQkey},
            {S::kRts, S::kRts, 0, kAttrCurState | kAttrQkey},
            {S::kRts, S::kSqd, 0, kAttrEnSqdAsyncNotify},
            {S::kSqd, S::kRts, 0, kAttrCurState | kAttrQkey},
            {S::kSqd, S::kSqd, 0, kAttrPkeyIndex | kAttrQkey},
            {S::kSqe, S::kRts, 0, kAttrCurState | kAttrQkey},
            {S::kRts, S::kErr, 0, 0},
            {S::kSqe, S::kReset, 0, 0}};
  const bool rc = type == QpType::kRc;
  const uint32_t rts_opt = rc ? kRtsOptRc : kRtsOptRc & ~kAttrMinRnrTimer;
  return {{S::kReset, S::kInit, kAttrPkeyIndex | kAttrPort | kAttrAccessFlags, 0},
          {S::kInit, S::kInit, 0, kAttrPkeyIndex | kAttrPort | kAttrAccessFlags},
          {S::kInit, S::kRtr,
           kAttrAv | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn |
               (rc ? kAttrMaxDestRdAtomic | kAttrMinRnrTimer : 0u),
           kAttrAltPath | kAttrAccessFlags | kAttrPkeyIndex},
          {S::kRtr, S::kRts,
           kAttrSqPsn |
               (rc ? kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry | kAttrMaxQpRdAtomic : 0u),
           rts_opt},
          {S::kRts, S::kRts, 0, rts_opt},
          {S::kRts, S::kSqd, 0, kAttrEnSqdAsyncNotify},
          {S::kSqd, S::kRts, 0, rts_opt},
          {S::kSqd, S::kSqd, 0,
           kAttrAv | kAttrAltPath | kAttrAccessFlags | kAttrPkeyIndex | kAttrPathMigState |
               (rc ? kAttrMinRnrTimer | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry |
                         kAttrMaxQpRdAtomic | kAttrMaxDestRdAtomic
                   : 0u)},
          {S::kSqe, S::kRts, 0, kAttrCurState | kAttrAccessFlags},
          {S::kInit, S::kErr, 0, 0},
          {S::kErr, S::kReset, 0, 0}};
}

Errno modify(QpType type, const Row& row, uint32_t mask) {
  QpAttr a;  // values every check accepts
  a.qp_state = row.to;
  a.cur_qp_state = row.from;
  return validate_modify(type, row.from, a, mask | kAttrState, 5, 16);
}

TEST(QpDiagram, validate_modify__required_attributes_of_every_edge) {
  for (QpType type : kTypes)
    for (const Row& row : rows(type)) {
      EXPECT_EQ(modify(type, row, row.required), 0) << edge(row.from, row.to);
      for (uint32_t bit = 1; bit <= kAttrDestQpn; bit <<= 1) {
        if (!(row.required & bit)) continue;
        EXPECT_EQ(modify(type, row, row.required & ~bit), EINVAL)
            << edge(row.from, row.to) << " without attribute " << bit;
      }
    }
}

TEST(QpDiagram, validate_modify__optional_allowed_others_refused) {
  for (QpType type : kTypes)
    for (const Row& row : rows(type))
      for (uint32_t bit = kAttrCurState; bit & kEveryAttr; bit <<= 1) {
        const bool allowed = (row.required | row.optional) & bit;
        EXPECT_EQ(modify(type, row, row.required | bit), allowed ? 0 : EINVAL)
            << edge(row.from, row.to) << " type " << int(type) << " attribute " << bit;
      }
}

// QP access flags: the three remote rights, local write, and ON_DEMAND (mlx5 takes it: the
// QP may reach on-demand regions, which every vrnic QP can); an unknown bit is refused.
TEST(QpDiagram, validate_modify__access_flags_take_on_demand) {
  QpAttr a;
  a.qp_state = QpState::kInit;
  const uint32_t mask = kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags;
  a.qp_access_flags = kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic | kOnDemand;
  EXPECT_EQ(validate_modify(QpType::kRc, QpState::kReset, a, mask, 5, 16), 0);
  a.qp_access_flags = kRemoteWrite | kOnDemand;
  EXPECT_EQ(validate_modify(QpType::kUc, QpState::kReset, a, mask, 5, 16), 0);
  a.qp_access_flags = kRemoteWrite | kOnDemand | (uint32_t(1) << 15);
  EXPECT_EQ(validate_modify(QpType::kRc, QpState::kReset, a, mask, 5, 16), EINVAL);
}

// --- qp_transition on a QP of a bare Core -----------------------------------------------------

struct NullPort : PacketPort {
  void send(std::span<const WirePacket>) override {}
  uint16_t source_port_for(uint32_t) override { return 0xc000; }
};
struct FixedClock : Clock {
  uint64_t now_ns() const override { return 1000; }
};
struct Events : EventSink {
  std::vector<AsyncEventType> async;
  void on_cq_event(Cq*, void*) override {}
  void on_async_event(const AsyncEvent& e) override { async.push_back(e.type); }
};

struct Transition : ::testing::Test {
  NullPort port;
  FixedClock clock;
  testing::FakeHostMemory host;
  Events events;
  Core core{DeviceConfig{}, port, clock, host, events};
  Cq cq{64, nullptr};
  Qp qp;
  void SetUp() override { qp.send_cq = qp.recv_cq = &cq; }
  void walk(std::initializer_list<QpState> states) {
    for (QpState s : states) ASSERT_EQ(qp_transition(core, qp, s, QpCause::kModify), 0);
  }
};

TEST_F(Transition, qp_transition__refused_edge_leaves_the_qp_as_it_was) {
  walk({QpState::kInit});
  EXPECT_EQ(qp_transition(core, qp, QpState::kRts, QpCause::kModify), EINVAL);
  EXPECT_EQ(qp_transition(core, qp, QpState::kSqe, QpCause::kSendQueueError), EINVAL);  // RC
  EXPECT_EQ(qp.state(), QpState::kInit);
  Qp fresh;
  EXPECT_EQ(qp_transition(core, fresh, QpState::kErr, QpCause::kError), EINVAL);  // RESET
  EXPECT_EQ(fresh.state(), QpState::kReset);
}

TEST_F(Transition, qp_transition__rtr_and_rts_load_the_psns) {
  qp.attr.rq_psn = 0x123;
  qp.attr.sq_psn = 0x456;
  qp.attr.retry_cnt = 5;
  walk({QpState::kInit, QpState::kRtr});
  EXPECT_EQ(qp.resp.epsn, 0x123u);
  walk({QpState::kRts});
  EXPECT_EQ(qp.req.next_psn, 0x456u);
  EXPECT_EQ(qp.req.una, 0x456u);
  EXPECT_EQ(qp.req.retry_left, 5);
  // SQD -> RTS goes on where the requester stopped.
  qp.req.next_psn = qp.req.next_new_psn = 0x500;
  walk({QpState::kSqd, QpState::kRts});
  EXPECT_EQ(qp.req.next_psn, 0x500u);
}

TEST_F(Transition, qp_transition__sqd_asks_for_the_drained_event_with_the_mask) {
  walk({QpState::kInit, QpState::kRtr, QpState::kRts});
  ASSERT_EQ(qp_transition(core, qp, QpState::kSqd, QpCause::kModify, kAttrEnSqdAsyncNotify), 0);
  EXPECT_TRUE(qp.sq_drain_notify);
}

TEST_F(Transition, qp_transition__err_flushes_receives_and_reset_empties_the_queues) {
  walk({QpState::kInit});
  RecvWqe r;
  r.wr_id = 77;
  qp.rq.push_back(r);
  ASSERT_EQ(qp_transition(core, qp, QpState::kErr, QpCause::kError), 0);
  WorkCompletion wc;
  ASSERT_EQ(cq.poll(&wc, 1), 1);
  EXPECT_EQ(wc.wr_id, 77u);
  EXPECT_EQ(wc.status, WcStatus::kWrFlushErr);
  EXPECT_TRUE(qp.rq.empty());
  qp.rq.push_back(r);
  walk({QpState::kReset});
  EXPECT_TRUE(qp.rq.empty());
  EXPECT_EQ(cq.poll(&wc, 1), 0);  // RESET drops, it does not complete
}

TEST_F(Transition, qp_transition__send_queue_error_stops_the_uc_send_queue) {
  qp.type = QpType::kUc;
  walk({QpState::kInit, QpState::kRtr, QpState::kRts});
  qp.req.rnr_deadline = 99;
  ASSERT_EQ(qp_transition(core, qp, QpState::kSqe, QpCause::kSendQueueError), 0);
  EXPECT_EQ(qp.state(), QpState::kSqe);
  EXPECT_EQ(qp.req.rnr_deadline, 0u);
  EXPECT_FALSE(qp.sending());
  walk({QpState::kRts});  // SQE -> RTS by the consumer
}

}  // namespace
}  // namespace vrnic::engine
