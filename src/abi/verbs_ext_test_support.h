// Shared by the extended-verbs tests: op and flag sets, the CQE record and the Ext fixture.
#pragma once
#include <fcntl.h>
#include <poll.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "abi/verbs_test.h"

namespace vrnic::abi::test {

inline constexpr uint64_t kAllRcOps =
    IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
    IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
    IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
inline constexpr uint64_t kAllWcFlags =
    IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
    IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |
    IBV_WC_EX_WITH_DLID_PATH_BITS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;

inline uint64_t now_ns(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// Every field of a CQE, as either polling API reports it.
struct Cqe {
  uint64_t wr_id = 0;
  int status = 0, opcode = 0;
  uint32_t vendor_err = 0, byte_len = 0, imm_data = 0, qp_num = 0, src_qp = 0, wc_flags = 0;
  uint32_t slid = 0;
  uint8_t sl = 0, dlid_path_bits = 0;
  uint64_t ts = 0, wallclock = 0;  // extended polling only
  bool operator==(const Cqe& o) const {
    return wr_id == o.wr_id && status == o.status && opcode == o.opcode &&
           vendor_err == o.vendor_err && byte_len == o.byte_len && imm_data == o.imm_data &&
           qp_num == o.qp_num && src_qp == o.src_qp && wc_flags == o.wc_flags &&
           slid == o.slid && sl == o.sl && dlid_path_bits == o.dlid_path_bits;
  }
};

inline std::ostream& operator<<(std::ostream& os, const Cqe& c) {
  return os << "{wr_id " << c.wr_id << " status " << c.status << " opcode " << c.opcode
            << " byte_len " << c.byte_len << " imm " << c.imm_data << " qp " << c.qp_num
            << " src_qp " << c.src_qp << " flags " << c.wc_flags << "}";
}

class Ext : public VerbsTest {
 protected:
  // A CQ of either kind; returns its ibv_cq view (ibv_cq_ex_to_cq for the extended one).
  ibv_cq* make_cq(bool ex, int cqe = 64, uint64_t wc_flags = kAllWcFlags) {
    if (!ex) return ibv_create_cq(ctx_, cqe, nullptr, nullptr, 0);
    ibv_cq_init_attr_ex a{};
    a.cqe = uint32_t(cqe);
    a.wc_flags = wc_flags;
    ibv_cq_ex* cq = ibv_create_cq_ex(ctx_, &a);
    return cq ? ibv_cq_ex_to_cq(cq) : nullptr;
  }

  ibv_qp* make_qp(ibv_cq* cq, bool ex, uint64_t ops = kAllRcOps) {
    ibv_qp_init_attr_ex init{};
    init.send_cq = init.recv_cq = cq;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = init.cap.max_recv_wr = 32;
    init.cap.max_send_sge = init.cap.max_recv_sge = 4;
    init.cap.max_inline_data = 128;
    if (!ex) return ibv_create_qp(pd_, reinterpret_cast<ibv_qp_init_attr*>(&init));
    init.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    init.pd = pd_;
    init.send_ops_flags = ops;
    return ibv_create_qp_ex(ctx_, &init);
  }

  void connect(ibv_qp* qp, uint32_t remote_qpn) { connect_rc(qp, remote_qpn); }

  // Polls n CQEs (or until 5 s passed) with ibv_poll_cq or the extended API.
  std::vector<Cqe> poll(ibv_cq* cq, size_t n, bool ex) {
    std::vector<Cqe> out;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (out.size() < n && std::chrono::steady_clock::now() < deadline) {
      if (!ex) {
        ibv_wc wc[4];
        const int got = ibv_poll_cq(cq, 4, wc);
        EXPECT_GE(got, 0);
        for (int i = 0; i < got; ++i) {
          Cqe c;
          c.wr_id = wc[i].wr_id;
          c.status = wc[i].status;
          c.opcode = wc[i].opcode;
          c.vendor_err = wc[i].vendor_err;
          c.byte_len = wc[i].byte_len;
          c.imm_data = wc[i].imm_data;
          c.qp_num = wc[i].qp_num;
          c.src_qp = wc[i].src_qp;
          c.wc_flags = wc[i].wc_flags;
          c.slid = wc[i].slid;
          c.sl = wc[i].sl;
          c.dlid_path_bits = wc[i].dlid_path_bits;
          out.push_back(c);
        }
        continue;
      }
      ibv_cq_ex* cx = ibv_cq_to_cq_ex(cq);
      ibv_poll_cq_attr attr{};
      int ret = ibv_start_poll(cx, &attr);
      if (ret == ENOENT) continue;
      EXPECT_EQ(ret, 0);
      if (ret) break;
      do {
        Cqe c;
        c.wr_id = cx->wr_id;
        c.status = cx->status;
        c.opcode = ibv_wc_read_opcode(cx);
        c.vendor_err = ibv_wc_read_vendor_err(cx);
        c.byte_len = ibv_wc_read_byte_len(cx);
        c.imm_data = ibv_wc_read_imm_data(cx);
        c.qp_num = ibv_wc_read_qp_num(cx);
        c.src_qp = ibv_wc_read_src_qp(cx);
        c.wc_flags = ibv_wc_read_wc_flags(cx);
        c.slid = ibv_wc_read_slid(cx);
        c.sl = ibv_wc_read_sl(cx);
        c.dlid_path_bits = ibv_wc_read_dlid_path_bits(cx);
        c.ts = ibv_wc_read_completion_ts(cx);
        c.wallclock = ibv_wc_read_completion_wallclock_ns(cx);
        out.push_back(c);
      } while ((ret = ibv_next_poll(cx)) == 0);
      EXPECT_EQ(ret, ENOENT);
      ibv_end_poll(cx);
    }
    return out;
  }

  static ibv_cq_ex* ibv_cq_to_cq_ex(ibv_cq* cq) { return reinterpret_cast<ibv_cq_ex*>(cq); }
};

}  // namespace vrnic::abi::test
