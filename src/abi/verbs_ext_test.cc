// The extended verbs against the classic ones (same bytes and CQEs); device, QP and CQ queries.
#include "abi/verbs_ext_test_support.h"

namespace vrnic::abi::test {
namespace {

// One run of the operation sequence from QP a to QP b.
struct Outcome {
  std::vector<uint8_t> a, b;
  std::vector<Cqe> a_cqes, b_cqes;
  uint64_t t0 = 0, t1 = 0, wall0 = 0, wall1 = 0;
};

constexpr size_t kBuf = 64 * 1024;
constexpr size_t kRecvBase = 32 * 1024;  // b's receive buffers: 4 KiB each from here
constexpr uint64_t kCasOriginal = 0x1122334455667788;

// The operations of one run: addresses in a's and b's buffers, keys, inline data, SGE lists.
struct Ops {
  uint64_t a = 0, b = 0;  // buffer bases
  uint32_t lk = 0, rk = 0;
  uint8_t inl1[40], inl2[60], inl3[100];
  ibv_sge list3[3], list2[2];
  uint64_t A(size_t off) const { return a + off; }
  uint64_t B(size_t off) const { return b + off; }
  Ops(Outcome& r, const ibv_mr* ma, const ibv_mr* mb)
      : a(reinterpret_cast<uint64_t>(r.a.data())), b(reinterpret_cast<uint64_t>(r.b.data())),
        lk(ma->lkey), rk(mb->rkey),
        list3{{A(21000), 100, lk}, {A(22000), 2000, lk}, {A(25000), 1, lk}},
        list2{{A(26000), 333, lk}, {A(27000), 1025, lk}} {
    for (int i = 0; i < 100; ++i) {
      if (i < 40) inl1[i] = uint8_t(0xa0 + i);
      if (i < 60) inl2[i] = uint8_t(0x30 + i);
      inl3[i] = uint8_t(0xff - i);
    }
  }
};

constexpr unsigned kSig = IBV_SEND_SIGNALED;

// The sequence through ibv_wr_*.
void post_ex(ibv_qp* qa, Ops& o) {
  ibv_qp_ex* x = ibv_qp_to_qp_ex(qa);
  ASSERT_NE(x, nullptr);
  const uint32_t lk = o.lk, rk = o.rk;
  ibv_wr_start(x);
  x->wr_id = 1, x->wr_flags = kSig;
  ibv_wr_send(x);
  ibv_wr_set_sge(x, lk, o.A(0), 3000);
  x->wr_id = 2;
  ibv_wr_send_imm(x, htobe32(0xdeadbeef));
  ibv_wr_set_sge(x, lk, o.A(3000), 1500);
  x->wr_id = 3, x->wr_flags = 0;  // unsignaled: no CQE
  ibv_wr_rdma_write(x, rk, o.B(0));
  ibv_wr_set_sge(x, lk, o.A(4500), 5000);
  x->wr_id = 4, x->wr_flags = kSig;
  ibv_wr_rdma_write_imm(x, rk, o.B(6000), htobe32(0x01020304));
  ibv_wr_set_sge(x, lk, o.A(10000), 700);
  x->wr_id = 5;
  ibv_wr_rdma_read(x, rk, o.B(8192));
  ibv_wr_set_sge(x, lk, o.A(16384), 2000);
  x->wr_id = 6;
  ibv_wr_atomic_cmp_swp(x, rk, o.B(12288), kCasOriginal, 0xabcdef0123456789);
  ibv_wr_set_sge(x, lk, o.A(20000), 8);
  x->wr_id = 7;
  ibv_wr_atomic_fetch_add(x, rk, o.B(12296), 0x1111);
  ibv_wr_set_sge(x, lk, o.A(20008), 8);
  x->wr_id = 8;
  ibv_wr_send(x);
  const ibv_data_buf bufs[2] = {{o.inl1, sizeof(o.inl1)}, {o.inl2, sizeof(o.inl2)}};
  ibv_wr_set_inline_data_list(x, 2, bufs);
  x->wr_id = 9;
  ibv_wr_rdma_write(x, rk, o.B(14000));
  ibv_wr_set_inline_data(x, o.inl3, sizeof(o.inl3));
  x->wr_id = 10;
  ibv_wr_send(x);
  ibv_wr_set_sge_list(x, 3, o.list3);
  x->wr_id = 11;
  ibv_wr_rdma_write(x, rk, o.B(15000));
  ibv_wr_set_sge_list(x, 2, o.list2);
  EXPECT_EQ(ibv_wr_complete(x), 0);
}

// The same sequence as one ibv_post_send list.
void post_classic(ibv_qp* qa, Ops& o) {
  const uint32_t lk = o.lk, rk = o.rk;
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
  one(0, 1, IBV_WR_SEND, kSig, {o.A(0), 3000, lk});
  one(1, 2, IBV_WR_SEND_WITH_IMM, kSig, {o.A(3000), 1500, lk});
  w[1].imm_data = htobe32(0xdeadbeef);
  one(2, 3, IBV_WR_RDMA_WRITE, 0, {o.A(4500), 5000, lk});
  w[2].wr.rdma = {o.B(0), rk};
  one(3, 4, IBV_WR_RDMA_WRITE_WITH_IMM, kSig, {o.A(10000), 700, lk});
  w[3].wr.rdma = {o.B(6000), rk};
  w[3].imm_data = htobe32(0x01020304);
  one(4, 5, IBV_WR_RDMA_READ, kSig, {o.A(16384), 2000, lk});
  w[4].wr.rdma = {o.B(8192), rk};
  one(5, 6, IBV_WR_ATOMIC_CMP_AND_SWP, kSig, {o.A(20000), 8, lk});
  w[5].wr.atomic = {o.B(12288), kCasOriginal, 0xabcdef0123456789, rk};
  one(6, 7, IBV_WR_ATOMIC_FETCH_AND_ADD, kSig, {o.A(20008), 8, lk});
  w[6].wr.atomic = {o.B(12296), 0x1111, 0, rk};
  ibv_sge inl[2] = {{reinterpret_cast<uint64_t>(o.inl1), sizeof(o.inl1), 0},
                    {reinterpret_cast<uint64_t>(o.inl2), sizeof(o.inl2), 0}};
  one(7, 8, IBV_WR_SEND, kSig | IBV_SEND_INLINE, inl[0]);
  w[7].sg_list = inl;
  w[7].num_sge = 2;
  one(8, 9, IBV_WR_RDMA_WRITE, kSig | IBV_SEND_INLINE,
      {reinterpret_cast<uint64_t>(o.inl3), sizeof(o.inl3), 0});
  w[8].wr.rdma = {o.B(14000), rk};
  one(9, 10, IBV_WR_SEND, kSig, o.list3[0]);
  w[9].sg_list = o.list3;
  w[9].num_sge = 3;
  one(10, 11, IBV_WR_RDMA_WRITE, kSig, o.list2[0]);
  w[10].sg_list = o.list2;
  w[10].num_sge = 2;
  w[10].wr.rdma = {o.B(15000), rk};
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(qa, w, &bad), 0);
}

// Buffers of a known pattern, with the compare-and-swap target at b[12288].
void fill(Outcome& r) {
  r.a.resize(kBuf);
  r.b.resize(kBuf);
  for (size_t i = 0; i < kBuf; ++i) {
    r.a[i] = uint8_t(i * 13 + 7);
    r.b[i] = uint8_t((i * 7) ^ 0x5a);
  }
  std::memcpy(&r.b[12288], &kCasOriginal, 8);
}

// QP numbers differ between runs: name them by role.
void name_by_role(Outcome& r, uint32_t qpn_a, uint32_t qpn_b) {
  for (auto* v : {&r.a_cqes, &r.b_cqes})
    for (Cqe& c : *v)
      for (uint32_t* f : {&c.qp_num, &c.src_qp}) {
        if (*f == qpn_a) *f = 0xa;
        else if (*f == qpn_b) *f = 0xb;
      }
}

class Equivalence : public Ext, public ::testing::WithParamInterface<std::tuple<bool, bool>> {
 protected:
  // ex_post: ibv_wr_* instead of ibv_post_send; ex_poll: ibv_start_poll instead of ibv_poll_cq.
  Outcome run(bool ex_post, bool ex_poll) {
    Outcome r;
    fill(r);
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
    post_receives(qb, r, mb);
    Ops ops(r, ma, mb);
    r.t0 = now_ns(CLOCK_MONOTONIC);
    r.wall0 = now_ns(CLOCK_REALTIME);
    if (ex_post) post_ex(qa, ops);
    else post_classic(qa, ops);
    r.a_cqes = poll(ca, 10, ex_poll);
    r.b_cqes = poll(cb, 5, ex_poll);
    r.t1 = now_ns(CLOCK_MONOTONIC);
    r.wall1 = now_ns(CLOCK_REALTIME);
    name_by_role(r, qa->qp_num, qb->qp_num);
    EXPECT_EQ(ibv_destroy_qp(qa), 0);
    EXPECT_EQ(ibv_destroy_qp(qb), 0);
    EXPECT_EQ(ibv_destroy_cq(ca), 0);
    EXPECT_EQ(ibv_destroy_cq(cb), 0);
    EXPECT_EQ(ibv_dereg_mr(ma), 0);
    EXPECT_EQ(ibv_dereg_mr(mb), 0);
    return r;
  }
  // Five 4 KiB receives in b's buffer from kRecvBase.
  void post_receives(ibv_qp* qb, Outcome& r, const ibv_mr* mb) {
    for (uint64_t i = 0; i < 5; ++i) {
      ibv_sge s{reinterpret_cast<uint64_t>(&r.b[kRecvBase + i * 4096]), 4096, mb->lkey};
      ibv_recv_wr w{};
      w.wr_id = 100 + i;
      w.sg_list = &s;
      w.num_sge = 1;
      ibv_recv_wr* bad = nullptr;
      EXPECT_EQ(ibv_post_recv(qb, &w, &bad), 0);
    }
  }
};

TEST_P(Equivalence, ibv_wr_and_ibv_start_poll__same_bytes_and_cqes_as_post_send_and_poll_cq) {
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
      {"atomic write on UC", IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
       IBV_QP_EX_WITH_ATOMIC_WRITE, 0, EOPNOTSUPP, IBV_QPT_UC},
      {"atomic write on XRC", IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
       IBV_QP_EX_WITH_ATOMIC_WRITE, 0, EOPNOTSUPP, IBV_QPT_XRC_SEND},
      {"create flags", IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS, 0,
       IBV_QP_CREATE_SCATTER_FCS, EOPNOTSUPP},
      {"XRC target without an XRCD", IBV_QP_INIT_ATTR_XRCD, 0, 0, EINVAL, IBV_QPT_XRC_RECV},
      {"XRC target with atomics", IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
       IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD, 0, EOPNOTSUPP, IBV_QPT_XRC_RECV},
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

TEST_F(Ext, create_cq_ex__flags_and_poll_api) {
  ibv_cq_init_attr_ex a{};
  a.cqe = 8;
  struct Case {
    const char* what;
    uint64_t wc_flags;
    uint32_t comp_mask, flags;
    int err;
  } cases[] = {
      {"wc_flags bit beyond the enum", uint64_t(1) << 40, 0, 0, EOPNOTSUPP},
      {"wc_flags bit after WALLCLOCK", uint64_t(1) << 12, 0, 0, EOPNOTSUPP},
      // A known creation flag vrnic cannot honour (it always reports overruns).
      {"ignore overrun", 0, IBV_CQ_INIT_ATTR_MASK_FLAGS, IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN,
       EOPNOTSUPP},
      {"ignore overrun, single threaded", 0, IBV_CQ_INIT_ATTR_MASK_FLAGS,
       IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN | IBV_CREATE_CQ_ATTR_SINGLE_THREADED, EOPNOTSUPP},
      {"unknown creation flag", 0, IBV_CQ_INIT_ATTR_MASK_FLAGS, 1u << 5, EINVAL},
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

}  // namespace
}  // namespace vrnic::abi::test
