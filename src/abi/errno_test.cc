// The errno audit: each create / modify / query mistake and the errno vrnic returns for it,
// which is the one rdma-core's providers (rxe, mlx5, through the kernel's uverbs checks)
// return for the same mistake. docs/abi.md has the same table.
#include <sys/mman.h>
#include <unistd.h>

#include <functional>
#include <vector>

#include "abi/verbs_test.h"

namespace vrnic::abi::test {
namespace {

class Errno : public VerbsTest {
 public:  // the table's functions take the fixture
  using VerbsTest::ctx_;
  using VerbsTest::pd_;

  void SetUp() override {
    VerbsTest::SetUp();
    if (HasFatalFailure()) return;
    cq_ = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
    ASSERT_NE(cq_, nullptr);
    ASSERT_EQ(ibv_query_device(ctx_, &dev_), 0);
  }
  void TearDown() override {
    if (cq_) {
      EXPECT_EQ(ibv_destroy_cq(cq_), 0);
    }
    VerbsTest::TearDown();
  }

  ibv_qp_init_attr qp_init() {
    ibv_qp_init_attr init{};
    init.send_cq = init.recv_cq = cq_;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = init.cap.max_recv_wr = 4;
    init.cap.max_send_sge = init.cap.max_recv_sge = 1;
    return init;
  }
  // errno of a create that must fail (and destroys what wrongly succeeded).
  int create_qp_errno(ibv_qp_init_attr init) {
    errno = 0;
    ibv_qp* qp = ibv_create_qp(pd_, &init);
    if (qp) {
      ibv_destroy_qp(qp);
      return 0;
    }
    return errno;
  }
  int create_cq_errno(int cqe, int comp_vector) {
    errno = 0;
    ibv_cq* cq = ibv_create_cq(ctx_, cqe, nullptr, nullptr, comp_vector);
    if (cq) {
      ibv_destroy_cq(cq);
      return 0;
    }
    return errno;
  }
  int reg_mr_errno(void* addr, size_t len, int access) {
    errno = 0;
    ibv_mr* mr = ibv_reg_mr(pd_, addr, len, access);
    if (mr) {
      ibv_dereg_mr(mr);
      return 0;
    }
    return errno;
  }
  // A fresh RC QP moved to INIT (and RTR) properly, then given the bad modify.
  int modify_errno(ibv_qp_state from, ibv_qp_attr bad, int mask) {
    ibv_qp_init_attr init = qp_init();
    ibv_qp* qp = ibv_create_qp(pd_, &init);
    if (!qp) return -1;
    ibv_qp_attr a{};
    if (from >= IBV_QPS_INIT) {
      a.qp_state = IBV_QPS_INIT;
      a.port_num = 1;
      EXPECT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                          IBV_QP_ACCESS_FLAGS), 0);
    }
    if (from >= IBV_QPS_RTR) {
      a = rtr();
      EXPECT_EQ(ibv_modify_qp(qp, &a, kRtrMask), 0);
    }
    const int err = ibv_modify_qp(qp, &bad, mask);
    EXPECT_EQ(ibv_destroy_qp(qp), 0);
    return err;
  }
  static constexpr int kRtrMask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                                  IBV_QP_MIN_RNR_TIMER;
  static constexpr int kRtsMask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
  ibv_qp_attr rtr() {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = 0x123;
    a.max_dest_rd_atomic = 1;
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh.hop_limit = 64;
    ibv_query_gid(ctx_, 1, 0, &a.ah_attr.grh.dgid);
    return a;
  }
  ibv_qp_attr rts() {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    return a;
  }

  ibv_cq* cq_ = nullptr;
  ibv_device_attr dev_{};
};

struct Mistake {
  const char* verb;
  const char* mistake;
  int expected;
  std::function<int(Errno&)> make;  // returns the errno observed
};

TEST_F(Errno, table__each_mistake_gets_the_providers_errno) {
  const long page = sysconf(_SC_PAGESIZE);
  // An unmapped page: mapped, then unmapped, so nothing else lives there.
  void* hole = mmap(nullptr, size_t(page), PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(hole, MAP_FAILED);
  ASSERT_EQ(munmap(hole, size_t(page)), 0);
  // Two pages of which only the first is mapped.
  auto* half = static_cast<char*>(mmap(nullptr, 2 * size_t(page), PROT_READ | PROT_WRITE,
                                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(half, MAP_FAILED);
  ASSERT_EQ(munmap(half + page, size_t(page)), 0);
  static char buf[8192];

  const std::vector<Mistake> table = {
      {"ibv_create_cq", "cqe 0", EINVAL, [](Errno& t) { return t.create_cq_errno(0, 0); }},
      {"ibv_create_cq", "cqe < 0", EINVAL, [](Errno& t) { return t.create_cq_errno(-1, 0); }},
      {"ibv_create_cq", "cqe > max_cqe", EINVAL,
       [](Errno& t) { return t.create_cq_errno(t.dev_.max_cqe + 1, 0); }},
      {"ibv_create_cq", "comp_vector >= num_comp_vectors", EINVAL,
       [](Errno& t) { return t.create_cq_errno(4, t.ctx_->num_comp_vectors); }},
      {"ibv_create_cq", "comp_vector < 0", EINVAL,
       [](Errno& t) { return t.create_cq_errno(4, -1); }},

      {"ibv_create_qp", "no send CQ", EINVAL,
       [](Errno& t) { auto i = t.qp_init(); i.send_cq = nullptr; return t.create_qp_errno(i); }},
      {"ibv_create_qp", "no recv CQ", EINVAL,
       [](Errno& t) { auto i = t.qp_init(); i.recv_cq = nullptr; return t.create_qp_errno(i); }},
      {"ibv_create_qp", "max_send_wr > max_qp_wr", EINVAL,
       [](Errno& t) {
         auto i = t.qp_init();
         i.cap.max_send_wr = uint32_t(t.dev_.max_qp_wr) + 1;
         return t.create_qp_errno(i);
       }},
      {"ibv_create_qp", "max_recv_wr > max_qp_wr", EINVAL,
       [](Errno& t) {
         auto i = t.qp_init();
         i.cap.max_recv_wr = uint32_t(t.dev_.max_qp_wr) + 1;
         return t.create_qp_errno(i);
       }},
      {"ibv_create_qp", "max_send_sge > max_sge", EINVAL,
       [](Errno& t) {
         auto i = t.qp_init();
         i.cap.max_send_sge = uint32_t(t.dev_.max_sge) + 1;
         return t.create_qp_errno(i);
       }},
      {"ibv_create_qp", "max_recv_sge > max_sge", EINVAL,
       [](Errno& t) {
         auto i = t.qp_init();
         i.cap.max_recv_sge = uint32_t(t.dev_.max_sge) + 1;
         return t.create_qp_errno(i);
       }},
      {"ibv_create_qp", "max_inline_data too large", EINVAL,
       [](Errno& t) { auto i = t.qp_init(); i.cap.max_inline_data = 1 << 20; return t.create_qp_errno(i); }},
      {"ibv_create_qp", "QP type the device lacks (raw packet)", EOPNOTSUPP,
       [](Errno& t) {
         auto i = t.qp_init();
         i.qp_type = IBV_QPT_RAW_PACKET;
         return t.create_qp_errno(i);
       }},
      {"ibv_create_qp", "XRC target: no XRCD through ibv_create_qp", EINVAL,
       [](Errno& t) {
         auto i = t.qp_init();
         i.qp_type = IBV_QPT_XRC_RECV;
         return t.create_qp_errno(i);
       }},
      {"ibv_create_qp", "not a QP type", EOPNOTSUPP,
       [](Errno& t) { auto i = t.qp_init(); i.qp_type = ibv_qp_type(0); return t.create_qp_errno(i); }},

      {"ibv_modify_qp", "RESET -> RTR (skips INIT)", EINVAL,
       [](Errno& t) { return t.modify_errno(IBV_QPS_RESET, t.rtr(), kRtrMask); }},
      {"ibv_modify_qp", "RESET -> INIT without the port", EINVAL,
       [](Errno& t) {
         ibv_qp_attr a{};
         a.qp_state = IBV_QPS_INIT;
         return t.modify_errno(IBV_QPS_RESET, a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
                                                     IBV_QP_ACCESS_FLAGS);
       }},
      {"ibv_modify_qp", "port 2", EINVAL,
       [](Errno& t) {
         ibv_qp_attr a{};
         a.qp_state = IBV_QPS_INIT;
         a.port_num = 2;
         return t.modify_errno(IBV_QPS_RESET, a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                                     IBV_QP_ACCESS_FLAGS);
       }},
      {"ibv_modify_qp", "pkey_index beyond the table", EINVAL,
       [](Errno& t) {
         ibv_qp_attr a{};
         a.qp_state = IBV_QPS_INIT;
         a.port_num = 1;
         a.pkey_index = 1;
         return t.modify_errno(IBV_QPS_RESET, a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                                     IBV_QP_ACCESS_FLAGS);
       }},
      {"ibv_modify_qp", "unknown access flag", EINVAL,
       [](Errno& t) {
         ibv_qp_attr a{};
         a.qp_state = IBV_QPS_INIT;
         a.port_num = 1;
         a.qp_access_flags = 1 << 15;
         return t.modify_errno(IBV_QPS_RESET, a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                                     IBV_QP_ACCESS_FLAGS);
       }},
      {"ibv_modify_qp", "INIT -> RTR without the AV", EINVAL,
       [](Errno& t) { return t.modify_errno(IBV_QPS_INIT, t.rtr(), kRtrMask & ~IBV_QP_AV); }},
      {"ibv_modify_qp", "AV without a GRH (RoCE)", EINVAL,
       [](Errno& t) {
         ibv_qp_attr a = t.rtr();
         a.ah_attr.is_global = 0;
         return t.modify_errno(IBV_QPS_INIT, a, kRtrMask);
       }},
      {"ibv_modify_qp", "path MTU not an IBV_MTU value", EINVAL,
       [](Errno& t) {
         ibv_qp_attr a = t.rtr();
         a.path_mtu = ibv_mtu(6);
         return t.modify_errno(IBV_QPS_INIT, a, kRtrMask);
       }},
      {"ibv_modify_qp", "sgid_index beyond the GID table", EINVAL,
       [](Errno& t) {
         ibv_qp_attr a = t.rtr();
         a.ah_attr.grh.sgid_index = 5;
         return t.modify_errno(IBV_QPS_INIT, a, kRtrMask);
       }},
      {"ibv_modify_qp", "max_dest_rd_atomic > max_qp_rd_atom", EINVAL,
       [](Errno& t) {
         ibv_qp_attr a = t.rtr();
         a.max_dest_rd_atomic = uint8_t(t.dev_.max_qp_rd_atom + 1);
         return t.modify_errno(IBV_QPS_INIT, a, kRtrMask);
       }},
      {"ibv_modify_qp", "max_rd_atomic > max_qp_init_rd_atom", EINVAL,
       [](Errno& t) {
         ibv_qp_attr a = t.rts();
         a.max_rd_atomic = uint8_t(t.dev_.max_qp_init_rd_atom + 1);
         return t.modify_errno(IBV_QPS_RTR, a, kRtsMask);
       }},
      {"ibv_modify_qp", "RTR -> RTS without the timeout", EINVAL,
       [](Errno& t) { return t.modify_errno(IBV_QPS_RTR, t.rts(), kRtsMask & ~IBV_QP_TIMEOUT); }},
      {"ibv_modify_qp", "an attribute the transition forbids (DEST_QPN in RTR -> RTS)", EINVAL,
       [](Errno& t) { return t.modify_errno(IBV_QPS_RTR, t.rts(), kRtsMask | IBV_QP_DEST_QPN); }},

      {"ibv_reg_mr", "remote write without local write", EINVAL,
       [](Errno& t) { return t.reg_mr_errno(buf, sizeof(buf), IBV_ACCESS_REMOTE_WRITE); }},
      {"ibv_reg_mr", "remote atomic without local write", EINVAL,
       [](Errno& t) { return t.reg_mr_errno(buf, sizeof(buf), IBV_ACCESS_REMOTE_ATOMIC); }},
      {"ibv_reg_mr", "unknown access flag", EINVAL,
       [](Errno& t) { return t.reg_mr_errno(buf, sizeof(buf), 1 << 15); }},
      {"ibv_reg_mr", "length 0", EINVAL,
       [](Errno& t) { return t.reg_mr_errno(buf, 0, IBV_ACCESS_LOCAL_WRITE); }},
      {"ibv_reg_mr", "unmapped memory", EFAULT,
       [hole, page](Errno& t) { return t.reg_mr_errno(hole, size_t(page), IBV_ACCESS_LOCAL_WRITE); }},
      {"ibv_reg_mr", "range running into unmapped memory", EFAULT,
       [half, page](Errno& t) {
         return t.reg_mr_errno(half, 2 * size_t(page), IBV_ACCESS_LOCAL_WRITE);
       }},

      {"ibv_query_port", "port 0", EINVAL,
       [](Errno& t) { ibv_port_attr p; return ibv_query_port(t.ctx_, 0, &p); }},
      {"ibv_query_port", "port 2", EINVAL,
       [](Errno& t) { ibv_port_attr p; return ibv_query_port(t.ctx_, 2, &p); }},
      {"ibv_query_gid_ex", "index beyond the GID table", ENODATA,
       [](Errno& t) { ibv_gid_entry e; return ibv_query_gid_ex(t.ctx_, 1, 1, &e, 0); }},
      {"ibv_query_gid_ex", "flags != 0", EINVAL,
       [](Errno& t) { ibv_gid_entry e; return ibv_query_gid_ex(t.ctx_, 1, 0, &e, 1); }},
      {"ibv_query_device_ex", "input comp_mask != 0", EINVAL,
       [](Errno& t) {
         ibv_query_device_ex_input in{};
         in.comp_mask = 1;
         ibv_device_attr_ex a;
         return ibv_query_device_ex(t.ctx_, &in, &a);
       }},

      {"ibv_dealloc_pd", "MR still registered", EBUSY,
       [](Errno& t) {
         ibv_mr* mr = ibv_reg_mr(t.pd_, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
         const int err = ibv_dealloc_pd(t.pd_);
         EXPECT_EQ(ibv_dereg_mr(mr), 0);
         return err;
       }},
      {"ibv_destroy_cq", "QP still uses it", EBUSY,
       [](Errno& t) {
         auto i = t.qp_init();
         ibv_qp* qp = ibv_create_qp(t.pd_, &i);
         const int err = ibv_destroy_cq(t.cq_);
         EXPECT_EQ(ibv_destroy_qp(qp), 0);
         return err;
       }},
      {"ibv_destroy_comp_channel", "CQ still uses it", EBUSY,
       [](Errno& t) {
         ibv_comp_channel* ch = ibv_create_comp_channel(t.ctx_);
         ibv_cq* cq = ibv_create_cq(t.ctx_, 4, nullptr, ch, 0);
         const int err = ibv_destroy_comp_channel(ch);
         EXPECT_EQ(ibv_destroy_cq(cq), 0);
         EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
         return err;
       }},
      {"ibv_resize_cq", "fewer entries than 1", EINVAL,
       [](Errno& t) { return ibv_resize_cq(t.cq_, 0); }},
      {"ibv_resize_cq", "cqe > max_cqe", EINVAL,
       [](Errno& t) { return ibv_resize_cq(t.cq_, t.dev_.max_cqe + 1); }},
  };
  for (const Mistake& m : table) {
    EXPECT_EQ(m.make(*this), m.expected) << m.verb << ": " << m.mistake;
  }
  EXPECT_EQ(munmap(half, size_t(page)), 0);
}

}  // namespace
}  // namespace vrnic::abi::test
