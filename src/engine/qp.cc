// QP state diagram: the allowed transitions with their required / optional attributes
// (IBA 10.3.1, 11.2.4.2 / table 91 for RC), attribute value checks, and the timer encodings.
#include "engine/qp.h"

#include <cerrno>

namespace vrnic::engine {

uint32_t Qp::mtu() const { return mtu_bytes(attr.path_mtu); }

namespace {

constexpr int kStates = 7;  // RESET .. ERR

struct Rule {
  bool valid = false;
  uint32_t required = 0;
  uint32_t optional = 0;
};

// The RC column of the transition table. `kAttrState` is implied for a real transition.
struct RcTable {
  Rule r[kStates][kStates];
  constexpr RcTable() {
    auto at = [this](QpState a, QpState b) -> Rule& {
      return r[static_cast<int>(a)][static_cast<int>(b)];
    };
    using S = QpState;
    for (int s = 0; s < kStates; ++s) {
      r[s][static_cast<int>(S::kReset)] = {true, 0, 0};  // any -> RESET
      r[s][static_cast<int>(S::kErr)] = {true, 0, 0};    // any -> ERR
    }
    at(S::kReset, S::kInit) = {true, kAttrPkeyIndex | kAttrPort | kAttrAccessFlags, 0};
    at(S::kInit, S::kInit) = {true, 0, kAttrPkeyIndex | kAttrPort | kAttrAccessFlags};
    at(S::kInit, S::kRtr) = {true,
                             kAttrAv | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn |
                                 kAttrMaxDestRdAtomic | kAttrMinRnrTimer,
                             kAttrAltPath | kAttrAccessFlags | kAttrPkeyIndex};
    at(S::kRtr, S::kRts) = {true,
                            kAttrSqPsn | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry |
                                kAttrMaxQpRdAtomic,
                            kAttrCurState | kAttrAltPath | kAttrAccessFlags |
                                kAttrMinRnrTimer | kAttrPathMigState};
    at(S::kRts, S::kRts) = {true, 0,
                            kAttrCurState | kAttrAccessFlags | kAttrAltPath |
                                kAttrPathMigState | kAttrMinRnrTimer};
    at(S::kRts, S::kSqd) = {true, 0, kAttrEnSqdAsyncNotify};
    at(S::kSqd, S::kRts) = {true, 0,
                            kAttrCurState | kAttrAccessFlags | kAttrAltPath |
                                kAttrPathMigState | kAttrMinRnrTimer};
    at(S::kSqd, S::kSqd) = {true, 0,
                            kAttrAv | kAttrAltPath | kAttrAccessFlags | kAttrPkeyIndex |
                                kAttrMinRnrTimer | kAttrPathMigState | kAttrTimeout |
                                kAttrRetryCnt | kAttrRnrRetry | kAttrMaxQpRdAtomic |
                                kAttrMaxDestRdAtomic};
    at(S::kSqe, S::kRts) = {true, 0, kAttrCurState | kAttrAccessFlags};
    // RESET -> RESET and ERR -> ERR carry no attributes; already covered above.
  }
};

constexpr RcTable kRc;

// The UC and UD columns of the same table (IBA 11.2.4.2; Linux ib_modify_qp_is_ok agrees).
// UC: no ACK timers, no RDMA READ / atomic resources; UD: no path at all, a Q_Key instead.
struct UnreliableTable {
  Rule r[kStates][kStates];
  constexpr explicit UnreliableTable(bool ud) {
    auto at = [this](QpState a, QpState b) -> Rule& {
      return r[static_cast<int>(a)][static_cast<int>(b)];
    };
    using S = QpState;
    for (int s = 0; s < kStates; ++s) {
      r[s][static_cast<int>(S::kReset)] = {true, 0, 0};
      r[s][static_cast<int>(S::kErr)] = {true, 0, 0};
    }
    if (ud) {
      at(S::kReset, S::kInit) = {true, kAttrPkeyIndex | kAttrPort | kAttrQkey, 0};
      at(S::kInit, S::kInit) = {true, 0, kAttrPkeyIndex | kAttrPort | kAttrQkey};
      at(S::kInit, S::kRtr) = {true, 0, kAttrPkeyIndex | kAttrQkey};
      at(S::kRtr, S::kRts) = {true, kAttrSqPsn, kAttrCurState | kAttrQkey};
      at(S::kRts, S::kRts) = {true, 0, kAttrCurState | kAttrQkey};
      at(S::kRts, S::kSqd) = {true, 0, kAttrEnSqdAsyncNotify};
      at(S::kSqd, S::kRts) = {true, 0, kAttrCurState | kAttrQkey};
      at(S::kSqd, S::kSqd) = {true, 0, kAttrPkeyIndex | kAttrQkey};
      at(S::kSqe, S::kRts) = {true, 0, kAttrCurState | kAttrQkey};
    } else {
      at(S::kReset, S::kInit) = {true, kAttrPkeyIndex | kAttrPort | kAttrAccessFlags, 0};
      at(S::kInit, S::kInit) = {true, 0, kAttrPkeyIndex | kAttrPort | kAttrAccessFlags};
      at(S::kInit, S::kRtr) = {true, kAttrAv | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn,
                               kAttrAltPath | kAttrAccessFlags | kAttrPkeyIndex};
      at(S::kRtr, S::kRts) = {true, kAttrSqPsn,
                              kAttrCurState | kAttrAltPath | kAttrAccessFlags |
                                  kAttrPathMigState};
      at(S::kRts, S::kRts) = {true, 0,
                              kAttrCurState | kAttrAccessFlags | kAttrAltPath |
                                  kAttrPathMigState};
      at(S::kRts, S::kSqd) = {true, 0, kAttrEnSqdAsyncNotify};
      at(S::kSqd, S::kRts) = {true, 0,
                              kAttrCurState | kAttrAccessFlags | kAttrAltPath |
                                  kAttrPathMigState};
      at(S::kSqd, S::kSqd) = {true, 0,
                              kAttrAv | kAttrAltPath | kAttrAccessFlags | kAttrPkeyIndex |
                                  kAttrPathMigState};
      at(S::kSqe, S::kRts) = {true, 0, kAttrCurState | kAttrAccessFlags};
    }
  }
};

constexpr UnreliableTable kUc(false);
constexpr UnreliableTable kUd(true);

// The XRC columns (IBA 11.2.4.2 with XRC; Linux ib_modify_qp_is_ok agrees): RC's, less what
// the half that does not exist needs. The initiator has no responder (no access flags, no
// responder resources or RNR timer required); the target has no requester (no retries and
// no initiator depth required at RTS). What is not required stays allowed, as librdmacm
// passes the same attributes to both.
struct XrcTable {
  Rule r[kStates][kStates];
  constexpr explicit XrcTable(bool target) {
    for (int a = 0; a < kStates; ++a)
      for (int b = 0; b < kStates; ++b) r[a][b] = kRc.r[a][b];
    auto at = [this](QpState a, QpState b) -> Rule& {
      return r[static_cast<int>(a)][static_cast<int>(b)];
    };
    using S = QpState;
    auto relax = [](Rule& rule, uint32_t bits) {
      rule.required &= ~bits;
      rule.optional |= bits;
    };
    if (target) {
      relax(at(S::kRtr, S::kRts), kAttrRetryCnt | kAttrRnrRetry | kAttrMaxQpRdAtomic);
    } else {
      relax(at(S::kReset, S::kInit), kAttrAccessFlags);
      relax(at(S::kInit, S::kRtr), kAttrMaxDestRdAtomic | kAttrMinRnrTimer);
    }
  }
};

constexpr XrcTable kXrcIni(false);
constexpr XrcTable kXrcTgt(true);

constexpr Rule kNoRule{};

// The Modify QP edge from -> to of the QP type's table (invalid when there is none).
const Rule& modify_rule(QpType type, QpState from, QpState to) {
  if (static_cast<int>(from) >= kStates || static_cast<int>(to) >= kStates) return kNoRule;
  const int f = static_cast<int>(from), t = static_cast<int>(to);
  switch (type) {
    case QpType::kUd: return kUd.r[f][t];
    case QpType::kUc: return kUc.r[f][t];
    case QpType::kXrcIni: return kXrcIni.r[f][t];
    case QpType::kXrcTgt: return kXrcTgt.r[f][t];
    default: return kRc.r[f][t];
  }
}

}  // namespace

bool transition_allowed(QpType type, QpState from, QpState to, QpCause cause) {
  if (static_cast<int>(from) >= kStates || static_cast<int>(to) >= kStates) return false;
  switch (cause) {
    case QpCause::kModify:
      return modify_rule(type, from, to).valid;
    case QpCause::kError:
      // 10.3.1: an error the QP cannot continue from takes it to ERR from any state but
      // RESET (in ERR again: its queues flush again).
      return to == QpState::kErr && from != QpState::kReset;
    case QpCause::kSendQueueError:
      // 10.3.1: only UC and UD have SQE; a send WQE completed in error while the send
      // queue works (RTS, or SQD finishing what it started) stops it there.
      return !is_reliable(type) && to == QpState::kSqe &&
             (from == QpState::kRts || from == QpState::kSqd);
  }
  return false;
}

Errno validate_modify(QpType type, QpState cur, const QpAttr& attr, uint32_t mask,
                      uint8_t max_mtu, uint8_t max_rd_atom) {
  if (mask & kAttrCurState) {
    // The caller's idea of the current state must be the real one (11.2.4.2).
    if (attr.cur_qp_state != cur) return EINVAL;
  }
  QpState next = (mask & kAttrState) ? attr.qp_state : cur;
  const Rule& rule = modify_rule(type, cur, next);
  if (!rule.valid) return EINVAL;
  uint32_t given = mask & ~static_cast<uint32_t>(kAttrState);
  if ((given & rule.required) != rule.required) return EINVAL;
  if (given & ~(rule.required | rule.optional)) return EINVAL;

  if ((mask & kAttrPathMtu) && (attr.path_mtu < 1 || attr.path_mtu > max_mtu)) return EINVAL;
  if ((mask & kAttrPort) && attr.port_num != 1) return EINVAL;
  if ((mask & kAttrPkeyIndex) && attr.pkey_index != 0) return EINVAL;  // one P_Key
  if ((mask & kAttrTimeout) && attr.timeout > 31) return EINVAL;
  if ((mask & kAttrRetryCnt) && attr.retry_cnt > 7) return EINVAL;
  if ((mask & kAttrRnrRetry) && attr.rnr_retry > 7) return EINVAL;
  if ((mask & kAttrMinRnrTimer) && attr.min_rnr_timer > 31) return EINVAL;
  if ((mask & kAttrMaxQpRdAtomic) && attr.max_rd_atomic > max_rd_atom) return EINVAL;
  if ((mask & kAttrMaxDestRdAtomic) && attr.max_dest_rd_atomic > max_rd_atom) return EINVAL;
  if ((mask & kAttrDestQpn) && attr.dest_qp_num > 0xffffff) return EINVAL;
  if ((mask & kAttrRqPsn) && attr.rq_psn > 0xffffff) return EINVAL;
  if ((mask & kAttrSqPsn) && attr.sq_psn > 0xffffff) return EINVAL;
  // ON_DEMAND is taken as mlx5 takes it: every vrnic QP reaches on-demand regions anyway (an
  // ODP region is a property of the MR, checked page by page where it is accessed).
  constexpr uint32_t kQpAccess = kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic |
                                 kOnDemand;
  if ((mask & kAttrAccessFlags) && (attr.qp_access_flags & ~kQpAccess)) return EINVAL;
  if ((mask & kAttrAv) && attr.ah.port_num > 1) return EINVAL;
  return 0;
}

uint64_t ack_timeout_ns(uint8_t timeout) {
  if (timeout == 0) return 0;  // infinite: no local ACK timeout (IBA 9.7.6.1.3)
  // 4.096 us * 2^t = 4096 ns << t
  return uint64_t{4096} << (timeout > 31 ? 31 : timeout);
}

uint64_t rnr_timer_ns(uint8_t code) {
  // IBA table 45, in units of 10 us (code 0 is the longest: 655.36 ms).
  static const uint32_t kTenUs[32] = {65536, 1,    2,    3,    4,    6,    8,     12,
                                      16,    24,   32,   48,   64,   96,   128,   192,
                                      256,   384,  512,  768,  1024, 1536, 2048,  3072,
                                      4096,  6144, 8192, 12288, 16384, 24576, 32768, 49152};
  return uint64_t{kTenUs[code & 31]} * 10000;
}

}  // namespace vrnic::engine
