// Verbs-level value types of the engine: work requests, completions, QP attributes, enums.
// Numeric values of every enum and flag equal the rdma-core ones (IBV_*), so the ABI shim
// converts by value; no rdma-core type is visible below src/abi.
#pragma once
#include <array>
#include <cstdint>

namespace vrnic::engine {

// 0 on success, else a positive errno value: the error the verbs call reports.
using Errno = int;

struct Gid {
  std::array<uint8_t, 16> raw{};
  bool operator==(const Gid&) const = default;
  bool is_ipv4_mapped() const;  // ::ffff:a.b.c.d
};

// kXrcIni / kXrcTgt: IBV_QPT_XRC_SEND / IBV_QPT_XRC_RECV, the two halves of an XRC connection.
enum class QpType : uint8_t { kRc = 2, kUc = 3, kUd = 4, kXrcIni = 9, kXrcTgt = 10 };
// XRC is RC with the receive queue named per request (IBA 9.2, XRCETH): both halves run the
// reliable-connected protocol, the initiator as requester only, the target as responder only.
constexpr bool is_reliable(QpType t) {
  return t == QpType::kRc || t == QpType::kXrcIni || t == QpType::kXrcTgt;
}
constexpr bool is_xrc(QpType t) { return t == QpType::kXrcIni || t == QpType::kXrcTgt; }
enum class QpState : uint8_t { kReset = 0, kInit, kRtr, kRts, kSqd, kSqe, kErr, kUnknown };
const char* to_string(QpState s);

enum Access : uint32_t {
  kLocalWrite = 1 << 0, kRemoteWrite = 1 << 1, kRemoteRead = 1 << 2, kRemoteAtomic = 1 << 3,
  kMwBind = 1 << 4, kZeroBased = 1 << 5, kOnDemand = 1 << 6, kHugetlb = 1 << 7,
  kRelaxedOrdering = 1 << 20,
};

// Path MTU enum as in IBV_MTU_*: 1=256 .. 5=4096.
inline constexpr uint32_t mtu_bytes(uint8_t mtu_enum) {
  return mtu_enum >= 1 && mtu_enum <= 5 ? 128u << mtu_enum : 0;
}

enum QpAttrMask : uint32_t {
  kAttrState = 1 << 0, kAttrCurState = 1 << 1, kAttrEnSqdAsyncNotify = 1 << 2,
  kAttrAccessFlags = 1 << 3, kAttrPkeyIndex = 1 << 4, kAttrPort = 1 << 5, kAttrQkey = 1 << 6,
  kAttrAv = 1 << 7, kAttrPathMtu = 1 << 8, kAttrTimeout = 1 << 9, kAttrRetryCnt = 1 << 10,
  kAttrRnrRetry = 1 << 11, kAttrRqPsn = 1 << 12, kAttrMaxQpRdAtomic = 1 << 13,
  kAttrAltPath = 1 << 14, kAttrMinRnrTimer = 1 << 15, kAttrSqPsn = 1 << 16,
  kAttrMaxDestRdAtomic = 1 << 17, kAttrPathMigState = 1 << 18, kAttrCap = 1 << 19,
  kAttrDestQpn = 1 << 20,
};

struct AddressVector {
  Gid dgid;
  uint8_t sgid_index = 0;
  uint8_t hop_limit = 64;
  uint8_t traffic_class = 0;
  uint32_t flow_label = 0;
  uint8_t sl = 0;
  uint8_t port_num = 1;
};

struct QpCap {
  uint32_t max_send_wr = 0, max_recv_wr = 0, max_send_sge = 0, max_recv_sge = 0,
           max_inline_data = 0;
};

struct QpAttr {
  QpState qp_state = QpState::kReset;
  QpState cur_qp_state = QpState::kReset;
  uint8_t path_mtu = 3;  // IBV_MTU_1024
  uint32_t qkey = 0, rq_psn = 0, sq_psn = 0, dest_qp_num = 0;
  uint32_t qp_access_flags = 0;
  QpCap cap;
  AddressVector ah;
  uint16_t pkey_index = 0;
  uint8_t port_num = 1;
  uint8_t max_rd_atomic = 0, max_dest_rd_atomic = 0;
  uint8_t min_rnr_timer = 0, timeout = 0, retry_cnt = 0, rnr_retry = 0;
  bool sq_draining = false;
};

class Cq;
class Pd;
class Srq;
class Ah;
class Mr;
class Mw;
class Xrcd;

struct QpInitAttr {
  QpType type = QpType::kRc;
  Pd* pd = nullptr;
  Cq* send_cq = nullptr;
  Cq* recv_cq = nullptr;
  Srq* srq = nullptr;
  Xrcd* xrcd = nullptr;  // kXrcTgt: the XRC domain (pd, CQs and srq are not used)
  QpCap cap;  // in: requested; the engine writes back what it granted
  bool sq_sig_all = false;
  void* user_context = nullptr;  // returned in async events
};

struct Sge {
  uint64_t addr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
};

enum class WrOpcode : uint8_t {
  kRdmaWrite = 0, kRdmaWriteWithImm = 1, kSend = 2, kSendWithImm = 3, kRdmaRead = 4,
  kAtomicCmpSwp = 5, kAtomicFetchAdd = 6, kLocalInv = 7, kBindMw = 8, kSendWithInv = 9,
  kAtomicWrite = 15,  // IBA 1.5 Annex A19: 8 bytes written atomically at the responder (RC)
};

enum SendFlags : uint32_t {
  kSendFence = 1 << 0, kSendSignaled = 1 << 1, kSendSolicited = 1 << 2, kSendInline = 1 << 3,
};

// IBV_WR_BIND_MW (type 2 windows, through post_send) and Device::bind_mw (type 1): binds
// [addr, addr+length) of mr to the window with the given access; new_rkey is the key the
// window answers to afterwards (its low 8 bits come from the caller, IBA 10.6.7.3).
struct MwBindInfo {
  Mw* mw = nullptr;
  uint32_t new_rkey = 0;
  Mr* mr = nullptr;
  uint64_t addr = 0;
  uint64_t length = 0;
  uint32_t access = 0;  // Access bits: remote read / write / atomic, kZeroBased
};

// A send work request. sg_list is read during post_send only (inline data is copied then;
// other SGEs are recorded and their memory is read when the packets are built).
struct SendWr {
  uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::kSend;
  uint32_t send_flags = 0;
  const Sge* sg_list = nullptr;
  uint32_t num_sge = 0;
  uint32_t imm_data = 0;         // network byte order, carried as is
  uint32_t invalidate_rkey = 0;  // kSendWithInv
  uint64_t remote_addr = 0;      // RDMA and atomics
  uint32_t rkey = 0;
  uint64_t compare_add = 0;      // atomics; kAtomicWrite: the 8 bytes to write, as in memory
  uint64_t swap = 0;
  Ah* ah = nullptr;              // UD
  uint32_t remote_qpn = 0;
  uint32_t remote_qkey = 0;
  uint32_t xrc_remote_srqn = 0;  // kXrcIni: the XRC SRQ at the target (XRCETH)
  MwBindInfo bind;               // kBindMw
};

struct RecvWr {
  uint64_t wr_id = 0;
  const Sge* sg_list = nullptr;
  uint32_t num_sge = 0;
};

enum class WcStatus : uint8_t {
  kSuccess = 0, kLocLenErr, kLocQpOpErr, kLocEecOpErr, kLocProtErr, kWrFlushErr, kMwBindErr,
  kBadRespErr, kLocAccessErr, kRemInvReqErr, kRemAccessErr, kRemOpErr, kRetryExcErr,
  kRnrRetryExcErr, kLocRddViolErr, kRemInvRdReqErr, kRemAbortErr, kInvEecnErr,
  kInvEecStateErr, kFatalErr, kRespTimeoutErr, kGeneralErr,
};
const char* to_string(WcStatus s);

enum class WcOpcode : uint8_t {
  kSend = 0, kRdmaWrite = 1, kRdmaRead = 2, kCompSwap = 3, kFetchAdd = 4, kBindMw = 5,
  kLocalInv = 6, kAtomicWrite = 9, kRecv = 128, kRecvRdmaWithImm = 129,
};

enum WcFlags : uint32_t { kWcGrh = 1 << 0, kWcWithImm = 1 << 1, kWcWithInv = 1 << 3 };

struct WorkCompletion {
  uint64_t wr_id = 0;
  WcStatus status = WcStatus::kSuccess;
  WcOpcode opcode = WcOpcode::kSend;
  uint32_t vendor_err = 0;
  uint32_t byte_len = 0;
  uint32_t imm_data = 0;  // network order, or the invalidated rkey with kWcWithInv
  uint32_t qp_num = 0;
  uint32_t src_qp = 0;
  uint32_t wc_flags = 0;
  uint16_t pkey_index = 0;
  uint16_t slid = 0;
  uint8_t sl = 0;
  uint8_t dlid_path_bits = 0;
  uint64_t completion_ts_ns = 0;  // Clock::now_ns() when the CQE was written
};

// Async events; values as enum ibv_event_type.
enum class AsyncEventType : uint8_t {
  kCqErr = 0, kQpFatal, kQpReqErr, kQpAccessErr, kCommEst, kSqDrained, kPathMig, kPathMigErr,
  kDeviceFatal, kPortActive, kPortErr, kLidChange, kPkeyChange, kSmChange, kSrqErr,
  kSrqLimitReached, kQpLastWqeReached, kClientReregister, kGidChange, kWqFatal,
};

struct AsyncEvent {
  AsyncEventType type;
  void* user_context = nullptr;  // the QP / CQ / SRQ user_context given at creation
  uint32_t port_num = 0;
};

}  // namespace vrnic::engine
