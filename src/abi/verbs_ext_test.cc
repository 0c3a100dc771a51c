// The extended verbs against the classic ones: ibv_wr_* vs ibv_post_send and ibv_start_poll /
// ibv_next_poll / ibv_end_poll vs ibv_poll_cq give the same bytes and the same CQEs; their
// errors; completion timestamps; ibv_resize_cq; async event delivery and acknowledgement.
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
namespace {

constexpr uint64_t kAllRcOps =
    IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
    IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
    IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
constexpr uint64_t kAllWcFlags =
    IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
    IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |
    IBV_WC_EX_WITH_DLID_PATH_BITS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;

uint64_t now_ns(clockid_t id) {
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

std::ostream& operator<<(std::ostream& os, const Cqe& c) {
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

// One run of the operation sequence from QP a to QP b.
struct Outcome {
  std::vector<uint8_t> a, b;
  std::vector<Cqe> a_cqes, b_cqes;
  uint64_t t0 = 0, t1 = 0, wall0 = 0, wall1 = 0;
};

constexpr size_t kBuf = 64 * 1024;
constexpr size_t kRecvBase = 32 * 1024;  // b's receive buffers: 4 KiB each from here
constexpr uint64_t kCasOriginal = 0x1122334455667788;

class Equivalence : public Ext, public ::testing::WithParamInterface<std::tuple<bool, bool>> {
 protected:
  // ex_post: ibv_wr_* instead of ibv_post_send; ex_poll: ibv_start_poll instead of ibv_poll_cq.
  Outcome run(bool ex_post, bool ex_poll) {
    Outcome r;
    r.a.resize(kBuf);
    r.b.resize(kBuf);
    for (size_t i = 0; i < kBuf; ++i) {
      r.a[i] = uint8_t(i * 13 + 7);
      r.b[i] = uint8_t((i * 7) ^ 0x5a);
    }
    std::memcpy(&r.b[12288], &kCasOriginal, 8);
    const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    ibv_mr* ma = ibv_reg_mr(pd_, r.a.data(), kBuf, access);
    ibv_mr* mb = ibv_reg_mr(pd_, r.b.data(), kBuf, access);
    ibv_cq* ca = make_cq(ex_poll);
    ibv_cq* cb = make_cq(ex_poll);
    EXPECT_TRUE(ma && mb && ca && cb);
    if (!ma || !mb || !ca || !cb) return r;
    ibv_qp* qa = make_qp(ca, ex_post);
    ibv_qp* qb = make_qp(cb, false);
    EXPECT_TRUE(qa && qb);
    if (!qa || !qb) return r;
    connect(qa, qb->qp_num);
    connect(qb, qa->qp_num);

    for (uint64_t i = 0; i < 5; ++i) {
      ibv_sge s{reinterpret_cast<uint64_t>(&r.b[kRecvBase + i * 4096]), 4096, mb->lkey};
      ibv_recv_wr w{};
      w.wr_id = 100 + i;
      w.sg_list = &s;
      w.num_sge = 1;
      ibv_recv_wr* bad = nullptr;
      EXPECT_EQ(ibv_post_recv(qb, &w, &bad), 0);
    }

    auto A = [&](size_t off) { return reinterpret_cast<uint64_t>(&r.a[off]); };
    auto B = [&](size_t off) { return reinterpret_cast<uint64_t>(&r.b[off]); };
    uint8_t inl1[40], inl2[60], inl3[100];
    for (int i = 0; i < 100; ++i) {
      if (i < 40) inl1[i] = uint8_t(0xa0 + i);
      if (i < 60) inl2[i] = uint8_t(0x30 + i);
      inl3[i] = uint8_t(0xff - i);
    }
    const uint32_t lk = ma->lkey, rk = mb->rkey;
    ibv_sge list3[3] = {{A(21000), 100, lk}, {A(22000), 2000, lk}, {A(25000), 1, lk}};
    ibv_sge list2[2] = {{A(26000), 333, lk}, {A(27000), 1025, lk}};
    const unsigned sig = IBV_SEND_SIGNALED;

    r.t0 = now_ns(CLOCK_MONOTONIC);
    r.wall0 = now_ns(CLOCK_REALTIME);
    if (ex_post) {
      ibv_qp_ex* x = ibv_qp_to_qp_ex(qa);
      EXPECT_NE(x, nullptr);
      if (!x) return r;
      ibv_wr_start(x);
      x->wr_id = 1, x->wr_flags = sig;
      ibv_wr_send(x);
      ibv_wr_set_sge(x, lk, A(0), 3000);
      x->wr_id = 2;
      ibv_wr_send_imm(x, htobe32(0xdeadbeef));
      ibv_wr_set_sge(x, lk, A(3000), 1500);
      x->wr_id = 3, x->wr_flags = 0;  // unsignaled: no CQE
      ibv_wr_rdma_write(x, rk, B(0));
      ibv_wr_set_sge(x, lk, A(4500), 5000);
      x->wr_id = 4, x->wr_flags = sig;
      ibv_wr_rdma_write_imm(x, rk, B(6000), htobe32(0x01020304));
      ibv_wr_set_sge(x, lk, A(10000), 700);
      x->wr_id = 5;
      ibv_wr_rdma_read(x, rk, B(8192));
      ibv_wr_set_sge(x, lk, A(16384), 2000);
      x->wr_id = 6;
      ibv_wr_atomic_cmp_swp(x, rk, B(12288), kCasOriginal, 0xabcdef0123456789);
      ibv_wr_set_sge(x, lk, A(20000), 8);
      x->wr_id = 7;
      ibv_wr_atomic_fetch_add(x, rk, B(12296), 0x1111);
      ibv_wr_set_sge(x, lk, A(20008), 8);
      x->wr_id = 8;
      ibv_wr_send(x);
      const ibv_data_buf bufs[2] = {{inl1, sizeof(inl1)}, {inl2, sizeof(inl2)}};
      ibv_wr_set_inline_data_list(x, 2, bufs);
      x->wr_id = 9;
      ibv_wr_rdma_write(x, rk, B(14000));
      ibv_wr_set_inline_data(x, inl3, sizeof(inl3));
      x->wr_id = 10;
      ibv_wr_send(x);
      ibv_wr_set_sge_list(x, 3, list3);
      x->wr_id = 11;
      ibv_wr_rdma_write(x, rk, B(15000));
      ibv_wr_set_sge_list(x, 2, list2);
      EXPECT_EQ(ibv_wr_complete(x), 0);
    } else {
      ibv_sge s[11];
      ibv_send_wr w[11] = {};
      auto one = [&](int i, uint64_t id, ibv_wr_opcode op, unsigned flags, ibv_sge sge) {
        s[i] = sge;
        w[i].wr_id = id;
        w[i].opcode = op;
        w[i].send_flags = flags;
        w[i].sg_list = &s[i];
        w[i].num_sge = 1;
        if (i > 0) w[i - 1].next = &w[i];
      };
      one(0, 1, IBV_WR_SEND, sig, {A(0), 3000, lk});
      one(1, 2, IBV_WR_SEND_WITH_IMM, sig, {A(3000), 1500, lk});
      w[1].imm_data = htobe32(0xdeadbeef);
      one(2, 3, IBV_WR_RDMA_WRITE, 0, {A(4500), 5000, lk});
      w[2].wr.rdma = {B(0), rk};
      one(3, 4, IBV_WR_RDMA_WRITE_WITH_IMM, sig, {A(10000), 700, lk});
      w[3].wr.rdma = {B(6000), rk};
      w[3].imm_data = htobe32(0x01020304);
      one(4, 5, IBV_WR_RDMA_READ, sig, {A(16384), 2000, lk});
      w[4].wr.rdma = {B(8192), rk};
      one(5, 6, IBV_WR_ATOMIC_CMP_AND_SWP, sig, {A(20000), 8, lk});
      w[5].wr.atomic = {B(12288), kCasOriginal, 0xabcdef0123456789, rk};
      one(6, 7, IBV_WR_ATOMIC_FETCH_AND_ADD, sig, {A(20008), 8, lk});
      w[6].wr.atomic = {B(12296), 0x1111, 0, rk};
      ibv_sge inl[2] = {{reinterpret_cast<uint64_t>(inl1), sizeof(inl1), 0},
                        {reinterpret_cast<uint64_t>(inl2), sizeof(inl2), 0}};
      one(7, 8, IBV_WR_SEND, sig | IBV_SEND_INLINE, inl[0]);
      w[7].sg_list = inl;
      w[7].num_sge = 2;
      one(8, 9, IBV_WR_RDMA_WRITE, sig | IBV_SEND_INLINE,
          {reinterpret_cast<uint64_t>(inl3), sizeof(inl3), 0});
      w[8].wr.rdma = {B(14000), rk};
      one(9, 10, IBV_WR_SEND, sig, list3[0]);
      w[9].sg_list = list3;
      w[9].num_sge = 3;
      one(10, 11, IBV_WR_RDMA_WRITE, sig, list2[0]);
      w[10].sg_list = list2;
      w[10].num_sge = 2;
      w[10].wr.rdma = {B(15000), rk};
      ibv_send_wr* bad = nullptr;
      EXPECT_EQ(ibv_post_send(qa, w, &bad), 0);
    }
    r.a_cqes = poll(ca, 10, ex_poll);
    r.b_cqes = poll(cb, 5, ex_poll);
    r.t1 = now_ns(CLOCK_MONOTONIC);
    r.wall1 = now_ns(CLOCK_REALTIME);
    // QP numbers differ between runs: name them by role.
    for (auto* v : {&r.a_cqes, &r.b_cqes}) {
      for (Cqe& c : *v) {
        for (uint32_t* f : {&c.qp_num, &c.src_qp}) {
          if (*f == qa->qp_num) *f = 0xa;
          else if (*f == qb->qp_num) *f = 0xb;
        }
      }
    }
    EXPECT_EQ(ibv_destroy_qp(qa), 0);
    EXPECT_EQ(ibv_destroy_qp(qb), 0);
    EXPECT_EQ(ibv_destroy_cq(ca), 0);
    EXPECT_EQ(ibv_destroy_cq(cb), 0);
    EXPECT_EQ(ibv_dereg_mr(ma), 0);
    EXPECT_EQ(ibv_dereg_mr(mb), 0);
    return r;
  }
};

TEST_P(Equivalence, same_bytes_and_cqes_as_post_send_and_poll_cq) {
  const auto [ex_post, ex_poll] = GetParam();
  const Outcome ref = run(false, false);
  ASSERT_EQ(ref.a_cqes.size(), 10u);
  ASSERT_EQ(ref.b_cqes.size(), 5u);
  // The reference run itself did what the WRs say.
  for (const Cqe& c : ref.a_cqes) EXPECT_EQ(c.status, IBV_WC_SUCCESS) << c;
  for (const Cqe& c : ref.b_cqes) EXPECT_EQ(c.status, IBV_WC_SUCCESS) << c;
  Outcome seed;  // the buffers as seeded, to check against
  seed.a.resize(kBuf);
  seed.b.resize(kBuf);
  for (size_t i = 0; i < kBuf; ++i) {
    seed.a[i] = uint8_t(i * 13 + 7);
    seed.b[i] = uint8_t((i * 7) ^ 0x5a);
  }
  EXPECT_EQ(std::memcmp(&ref.b[kRecvBase], &seed.a[0], 3000), 0);            // SEND
  EXPECT_EQ(std::memcmp(&ref.b[0], &seed.a[4500], 5000), 0);                 // WRITE
  EXPECT_EQ(std::memcmp(&ref.a[16384], &seed.b[8192], 2000), 0);             // READ
  uint64_t v;
  std::memcpy(&v, &ref.a[20000], 8);
  EXPECT_EQ(v, kCasOriginal);                                                // CAS result
  std::memcpy(&v, &ref.b[12288], 8);
  EXPECT_EQ(v, 0xabcdef0123456789u);                                         // swapped
  EXPECT_EQ(ref.b[kRecvBase + 3 * 4096], 0xa0);                              // inline SEND
  EXPECT_EQ(ref.b[kRecvBase + 3 * 4096 + 40], 0x30);
  EXPECT_EQ(ref.b[14000], 0xff);                                             // inline WRITE
  EXPECT_EQ(ref.b_cqes[3].byte_len, 100u);
  EXPECT_EQ(ref.b_cqes[4].byte_len, 2101u);                                  // 3-SGE SEND
  EXPECT_EQ(std::memcmp(&ref.b[15000 + 333], &seed.a[27000], 1025), 0);      // 2-SGE WRITE

  const Outcome got = run(ex_post, ex_poll);
  EXPECT_EQ(got.a, ref.a);
  EXPECT_EQ(got.b, ref.b);
  EXPECT_EQ(got.a_cqes, ref.a_cqes);
  EXPECT_EQ(got.b_cqes, ref.b_cqes);
  if (ex_poll) {
    // Timestamps: device clock (CLOCK_MONOTONIC ns) within the run, in CQ order.
    for (const auto* v : {&got.a_cqes, &got.b_cqes}) {
      uint64_t prev = 0;
      for (const Cqe& c : *v) {
        EXPECT_GE(c.ts, got.t0);
        EXPECT_LE(c.ts, got.t1);
        EXPECT_GE(c.ts, prev);
        prev = c.ts;
        EXPECT_GE(c.wallclock + 1000000, got.wall0);  // 1 ms: the clocks' offset may drift
        EXPECT_LE(c.wallclock, got.wall1 + 1000000);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(PostAndPoll, Equivalence,
                         ::testing::Values(std::make_tuple(true, false),
                                           std::make_tuple(false, true),
                                           std::make_tuple(true, true)));

TEST_F(Ext, query_device_ex__timestamp_clock_and_rt_values) {
  ibv_device_attr_ex ex{};
  ASSERT_EQ(ibv_query_device_ex(ctx_, nullptr, &ex), 0);
  EXPECT_EQ(ex.hca_core_clock, 1000000u);  // kHz: ns ticks
  EXPECT_EQ(ex.completion_timestamp_mask, ~uint64_t(0));
  EXPECT_EQ(ex.phys_port_cnt_ex, 1u);
  ibv_values_ex v{};
  v.comp_mask = IBV_VALUES_MASK_RAW_CLOCK;
  const uint64_t before = now_ns(CLOCK_MONOTONIC);
  ASSERT_EQ(ibv_query_rt_values_ex(ctx_, &v), 0);
  const uint64_t after = now_ns(CLOCK_MONOTONIC);
  const uint64_t raw = uint64_t(v.raw_clock.tv_sec) * 1000000000ull + uint64_t(v.raw_clock.tv_nsec);
  EXPECT_GE(raw, before);
  EXPECT_LE(raw, after);
  v.comp_mask = IBV_VALUES_MASK_RESERVED;
  EXPECT_EQ(ibv_query_rt_values_ex(ctx_, &v), EINVAL);
}

TEST_F(Ext, create_qp_ex__wr_ops_as_requested_and_errors) {
  ibv_cq* cq = make_cq(false);
  ASSERT_NE(cq, nullptr);
  ibv_qp* qp = make_qp(cq, true, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE);
  ASSERT_NE(qp, nullptr) << strerror(errno);
  ibv_qp_ex* x = ibv_qp_to_qp_ex(qp);
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(&x->qp_base, qp);
  EXPECT_NE(x->wr_send, nullptr);
  EXPECT_NE(x->wr_rdma_write, nullptr);
  EXPECT_EQ(x->wr_rdma_read, nullptr);  // not asked for
  EXPECT_EQ(x->wr_atomic_cmp_swp, nullptr);
  EXPECT_EQ(x->wr_send_tso, nullptr);
  EXPECT_NE(x->wr_set_sge_list, nullptr);
  // Bytes inside one packet are placed by memcpy, in no guaranteed order (docs/abi.md).
  EXPECT_EQ(ibv_query_qp_data_in_order(qp, IBV_WR_RDMA_WRITE, 0), 0);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);

  ibv_qp_init_attr_ex init{};
  init.send_cq = init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = init.cap.max_recv_wr = 4;
  init.cap.max_send_sge = init.cap.max_recv_sge = 1;
  init.pd = pd_;
  struct Case {
    const char* what;
    uint32_t comp_mask;
    uint64_t send_ops;
    uint32_t create_flags;
    int err;
    ibv_qp_type type = IBV_QPT_RC;
  } cases[] = {
      {"TSO on RC", IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, IBV_QP_EX_WITH_TSO, 0,
       EOPNOTSUPP},
      {"atomic write", IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
       IBV_QP_EX_WITH_ATOMIC_WRITE, 0, EOPNOTSUPP},
      {"create flags", IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS, 0,
       IBV_QP_CREATE_SCATTER_FCS, EOPNOTSUPP},
      {"xrcd", IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD, 0, 0, EOPNOTSUPP},
      {"no PD", IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, IBV_QP_EX_WITH_SEND, 0, EINVAL},
      {"UD with RDMA write", IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
       IBV_QP_EX_WITH_RDMA_WRITE, 0, EOPNOTSUPP, IBV_QPT_UD},
      {"UC with RDMA read", IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
       IBV_QP_EX_WITH_RDMA_READ, 0, EOPNOTSUPP, IBV_QPT_UC},
      {"UC with atomics", IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
       IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD, 0, EOPNOTSUPP, IBV_QPT_UC},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    init.comp_mask = c.comp_mask;
    init.send_ops_flags = c.send_ops;
    init.create_flags = c.create_flags;
    init.qp_type = c.type;
    errno = 0;
    EXPECT_EQ(ibv_create_qp_ex(ctx_, &init), nullptr);
    EXPECT_EQ(errno, c.err);
  }
  // comp_mask == PD only: rdma-core's wrapper makes a classic QP, with no ibv_qp_ex view.
  init.comp_mask = IBV_QP_INIT_ATTR_PD;
  init.qp_type = IBV_QPT_RC;
  qp = ibv_create_qp_ex(ctx_, &init);
  ASSERT_NE(qp, nullptr);
  EXPECT_EQ(ibv_qp_to_qp_ex(qp), nullptr);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
}

// Mistakes made while building fail ibv_wr_complete and post nothing; ibv_wr_abort posts
// nothing; inline data is copied when set.
class WrBatch : public Ext {
 protected:
  void SetUp() override {
    Ext::SetUp();
    if (HasFatalFailure()) return;
    a_.assign(8192, 0x11);
    b_.assign(8192, 0);
    const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    ma_ = ibv_reg_mr(pd_, a_.data(), a_.size(), access);
    mb_ = ibv_reg_mr(pd_, b_.data(), b_.size(), access);
    cq_ = make_cq(true);
    ASSERT_TRUE(ma_ && mb_ && cq_);
    qa_ = make_qp(cq_, true);
    qb_ = make_qp(cq_, false);
    ASSERT_TRUE(qa_ && qb_);
    connect(qa_, qb_->qp_num);
    connect(qb_, qa_->qp_num);
    x_ = ibv_qp_to_qp_ex(qa_);
    ASSERT_NE(x_, nullptr);
  }
  void TearDown() override {
    if (qa_) {
      EXPECT_EQ(ibv_destroy_qp(qa_), 0);
    }
    if (qb_) {
      EXPECT_EQ(ibv_destroy_qp(qb_), 0);
    }
    if (cq_) {
      EXPECT_EQ(ibv_destroy_cq(cq_), 0);
    }
    if (ma_) {
      EXPECT_EQ(ibv_dereg_mr(ma_), 0);
    }
    if (mb_) {
      EXPECT_EQ(ibv_dereg_mr(mb_), 0);
    }
    Ext::TearDown();
  }

 public:  // the mistake table's functions take the fixture
  uint64_t B(size_t off) { return reinterpret_cast<uint64_t>(&b_[off]); }
  uint64_t A(size_t off) { return reinterpret_cast<uint64_t>(&a_[off]); }
  // A signaled write of 16 bytes of a to b+off, through the builder.
  void good_write(uint64_t id, size_t off) {
    x_->wr_id = id;
    x_->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write(x_, mb_->rkey, B(off));
    ibv_wr_set_sge(x_, ma_->lkey, A(0), 16);
  }
  // True if the CQ stays empty for 50 ms.
  bool no_cqe() {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
    while (std::chrono::steady_clock::now() < until) {
      ibv_wc wc;
      if (ibv_poll_cq(cq_, 1, &wc) != 0) return false;
    }
    return true;
  }

  std::vector<uint8_t> a_, b_;
  ibv_mr* ma_ = nullptr;
  ibv_mr* mb_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qa_ = nullptr;
  ibv_qp* qb_ = nullptr;
  ibv_qp_ex* x_ = nullptr;
};

TEST_F(WrBatch, building_mistakes__wr_complete_fails_nothing_posted) {
  struct Mistake {
    const char* what;
    void (*make)(WrBatch&);
  } mistakes[] = {
      {"setter before any WR", [](WrBatch& t) { ibv_wr_set_sge(t.x_, t.ma_->lkey, t.A(0), 8); }},
      {"too many SGEs",
       [](WrBatch& t) {
         t.good_write(1, 0);
         std::vector<ibv_sge> l(5, ibv_sge{t.A(0), 8, t.ma_->lkey});  // max_send_sge is 4
         ibv_wr_rdma_write(t.x_, t.mb_->rkey, t.B(100));
         ibv_wr_set_sge_list(t.x_, l.size(), l.data());
       }},
      {"inline data too long",
       [](WrBatch& t) {
         t.good_write(1, 0);
         ibv_wr_rdma_write(t.x_, t.mb_->rkey, t.B(100));
         std::vector<uint8_t> big(4096, 1);
         ibv_wr_set_inline_data(t.x_, big.data(), big.size());
       }},
  };
  for (const Mistake& m : mistakes) {
    SCOPED_TRACE(m.what);
    ibv_wr_start(x_);
    m.make(*this);
    EXPECT_EQ(ibv_wr_complete(x_), EINVAL);
    EXPECT_TRUE(no_cqe());
    EXPECT_EQ(b_[0], 0);
  }
  // The QP is still usable: a good batch after the failed ones goes through.
  ibv_wr_start(x_);
  good_write(7, 0);
  good_write(8, 16);
  ASSERT_EQ(ibv_wr_complete(x_), 0);
  auto c = poll(cq_, 2, true);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].wr_id, 7u);
  EXPECT_EQ(c[1].wr_id, 8u);
  EXPECT_EQ(b_[0], 0x11);
  EXPECT_EQ(b_[31], 0x11);
}

TEST_F(WrBatch, abort__posts_nothing) {
  ibv_wr_start(x_);
  good_write(1, 0);
  ibv_wr_abort(x_);
  EXPECT_TRUE(no_cqe());
  EXPECT_EQ(b_[0], 0);
  ibv_wr_start(x_);  // the lock was released by ibv_wr_abort
  EXPECT_EQ(ibv_wr_complete(x_), 0);  // an empty batch
}

TEST_F(WrBatch, inline_data__copied_when_set) {
  uint8_t data[32];
  std::memset(data, 0x42, sizeof(data));
  ibv_wr_start(x_);
  x_->wr_id = 5;
  x_->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_rdma_write(x_, mb_->rkey, B(64));
  ibv_wr_set_inline_data(x_, data, sizeof(data));
  std::memset(data, 0x99, sizeof(data));  // the program may reuse the buffer at once
  ASSERT_EQ(ibv_wr_complete(x_), 0);
  auto c = poll(cq_, 1, true);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(b_[64], 0x42);
  EXPECT_EQ(b_[95], 0x42);
  EXPECT_EQ(b_[96], 0);
}

TEST_F(WrBatch, later_setter_replaces_data__last_wr_only) {
  a_[0] = 0x77;
  a_[100] = 0x88;
  ibv_wr_start(x_);
  x_->wr_id = 1;
  x_->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_rdma_write(x_, mb_->rkey, B(0));
  ibv_wr_set_sge(x_, ma_->lkey, A(0), 1);
  ibv_wr_set_sge(x_, ma_->lkey, A(100), 1);  // replaces the first SGE
  ASSERT_EQ(ibv_wr_complete(x_), 0);
  ASSERT_EQ(poll(cq_, 1, true).size(), 1u);
  EXPECT_EQ(b_[0], 0x88);
}

TEST_F(Ext, create_cq_ex__flags_and_poll_api) {
  ibv_cq_init_attr_ex a{};
  a.cqe = 8;
  struct Case {
    const char* what;
    uint64_t wc_flags;
    uint32_t comp_mask, flags;
    int err;
  } cases[] = {
      {"cvlan", IBV_WC_EX_WITH_CVLAN, 0, 0, EOPNOTSUPP},
      {"flow tag", IBV_WC_EX_WITH_FLOW_TAG, 0, 0, EOPNOTSUPP},
      {"tm info", IBV_WC_EX_WITH_TM_INFO, 0, 0, EOPNOTSUPP},
      {"ignore overrun", 0, IBV_CQ_INIT_ATTR_MASK_FLAGS, IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN,
       EINVAL},
      {"unknown comp_mask", 0, 1u << 7, 0, EINVAL},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    a.wc_flags = c.wc_flags;
    a.comp_mask = c.comp_mask;
    a.flags = c.flags;
    errno = 0;
    EXPECT_EQ(ibv_create_cq_ex(ctx_, &a), nullptr);
    EXPECT_EQ(errno, c.err);
  }
  a = {};
  a.cqe = 8;
  a.wc_flags = IBV_WC_EX_WITH_BYTE_LEN;
  a.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
  a.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
  ibv_cq_ex* cx = ibv_create_cq_ex(ctx_, &a);
  ASSERT_NE(cx, nullptr);
  EXPECT_GE(cx->cqe, 8);
  EXPECT_NE(cx->read_byte_len, nullptr);
  EXPECT_NE(cx->read_opcode, nullptr);
  EXPECT_EQ(cx->read_imm_data, nullptr);  // not asked for
  EXPECT_EQ(cx->read_completion_ts, nullptr);
  ibv_poll_cq_attr pa{};
  EXPECT_EQ(ibv_start_poll(cx, &pa), ENOENT);
  pa.comp_mask = 1;
  EXPECT_EQ(ibv_start_poll(cx, &pa), EINVAL);
  ibv_wc wc;
  EXPECT_EQ(ibv_poll_cq(ibv_cq_ex_to_cq(cx), 1, &wc), 0);  // the classic view works too
  EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cx)), 0);
}

// ibv_resize_cq keeps the CQEs it holds, in order; it cannot shrink below them.
TEST_F(WrBatch, resize_cq__keeps_cqes_and_refuses_below_them) {
  // qa_ in ERR: each WR posted completes at once, in the post call, with WR_FLUSH_ERR, so the
  // CQ holds exactly the CQEs the test made (no waiting on the wire, no race with it).
  ibv_qp_attr err{};
  err.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(qa_, &err, IBV_QP_STATE), 0);
  ibv_wr_start(x_);
  for (uint64_t i = 0; i < 6; ++i) good_write(10 + i, i * 16);
  ASSERT_EQ(ibv_wr_complete(x_), 0);
  EXPECT_EQ(ibv_resize_cq(cq_, 5), EINVAL);  // holds 6
  EXPECT_EQ(ibv_resize_cq(cq_, 0), EINVAL);
  EXPECT_EQ(ibv_resize_cq(cq_, -1), EINVAL);
  ibv_device_attr da{};
  ASSERT_EQ(ibv_query_device(ctx_, &da), 0);
  EXPECT_EQ(ibv_resize_cq(cq_, da.max_cqe + 1), EINVAL);
  ASSERT_EQ(ibv_resize_cq(cq_, 6), 0);
  EXPECT_EQ(cq_->cqe, 6);
  ASSERT_EQ(ibv_resize_cq(cq_, 1000), 0);
  EXPECT_EQ(cq_->cqe, 1000);
  auto c = poll(cq_, 6, false);
  ASSERT_EQ(c.size(), 6u);
  for (uint64_t i = 0; i < 6; ++i) {
    EXPECT_EQ(c[i].wr_id, 10 + i);
    EXPECT_EQ(c[i].status, IBV_WC_WR_FLUSH_ERR);
  }
  // Shrunk to 2 entries, the CQ overruns on the third CQE (IBV_EVENT_CQ_ERR).
  ASSERT_EQ(ibv_resize_cq(cq_, 2), 0);
  ibv_wr_start(x_);
  for (uint64_t i = 0; i < 3; ++i) good_write(20 + i, i * 16);
  ASSERT_EQ(ibv_wr_complete(x_), 0);
  pollfd p{ctx_->async_fd, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1);
  ibv_async_event ev{};
  ASSERT_EQ(ibv_get_async_event(ctx_, &ev), 0);
  EXPECT_EQ(ev.event_type, IBV_EVENT_CQ_ERR);
  EXPECT_EQ(ev.element.cq, cq_);
  ibv_ack_async_event(&ev);
}

}  // namespace
}  // namespace vrnic::abi::test
