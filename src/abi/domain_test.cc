// Thread domains and parent domains: their errors and reference rules, the program's
// allocators called for QPs and CQs made on a parent domain, and traffic through them.
#include <cstdlib>
#include <vector>

#include "abi/verbs_test.h"

namespace vrnic::abi::test {
namespace {

// What the program's allocator saw.
struct Allocations {
  struct Call {
    ibv_pd* pd;
    void* pd_context;
    void* ptr;
    size_t size, alignment;
    uint64_t type;
  };
  std::vector<Call> allocs, frees;
  enum Mode { kAllocate, kUseDefault, kFail } mode = kAllocate;
};

void* test_alloc(ibv_pd* pd, void* pd_context, size_t size, size_t alignment, uint64_t type) {
  auto* a = static_cast<Allocations*>(pd_context);
  if (a->mode == Allocations::kFail) return nullptr;
  if (a->mode == Allocations::kUseDefault) return IBV_ALLOCATOR_USE_DEFAULT;
  void* p = std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
  a->allocs.push_back({pd, pd_context, p, size, alignment, type});
  return p;
}

void test_free(ibv_pd* pd, void* pd_context, void* ptr, uint64_t type) {
  auto* a = static_cast<Allocations*>(pd_context);
  a->frees.push_back({pd, pd_context, ptr, 0, 0, type});
  std::free(ptr);
}

class Domains : public VerbsTest {
 protected:
  ibv_pd* parent(ibv_td* td, Allocations* allocs) {
    ibv_parent_domain_init_attr attr{};
    attr.pd = pd_;
    attr.td = td;
    if (allocs) {
      attr.comp_mask =
          IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
      attr.alloc = test_alloc;
      attr.free = test_free;
      attr.pd_context = allocs;
    }
    return ibv_alloc_parent_domain(ctx_, &attr);
  }
  ibv_cq_ex* cq_on(ibv_pd* parent_domain) {
    ibv_cq_init_attr_ex a{};
    a.cqe = 16;
    a.wc_flags = IBV_WC_EX_WITH_BYTE_LEN;
    a.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
    a.parent_domain = parent_domain;
    return ibv_create_cq_ex(ctx_, &a);
  }
  ibv_qp* qp_on(ibv_pd* pd, ibv_cq* cq) {
    ibv_qp_init_attr_ex a{};
    a.qp_type = IBV_QPT_RC;
    a.send_cq = a.recv_cq = cq;
    a.cap.max_send_wr = a.cap.max_recv_wr = 8;
    a.cap.max_send_sge = a.cap.max_recv_sge = 1;
    a.comp_mask = IBV_QP_INIT_ATTR_PD;
    a.pd = pd;
    return ibv_create_qp_ex(ctx_, &a);
  }
};

TEST_F(Domains, alloc_td__comp_mask_is_einval_and_a_used_td_is_busy) {
  ibv_td_init_attr bad{1};
  errno = 0;
  EXPECT_EQ(ibv_alloc_td(ctx_, &bad), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_td_init_attr ok{};
  ibv_td* td = ibv_alloc_td(ctx_, &ok);
  ASSERT_NE(td, nullptr);
  EXPECT_EQ(td->context, ctx_);
  ibv_pd* pd = parent(td, nullptr);
  ASSERT_NE(pd, nullptr);
  EXPECT_EQ(pd->context, ctx_);
  EXPECT_EQ(ibv_dealloc_td(td), EBUSY);   // the parent domain holds it
  EXPECT_EQ(ibv_dealloc_pd(pd_), EBUSY);  // and its PD
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
  EXPECT_EQ(ibv_dealloc_td(td), 0);
}

TEST_F(Domains, alloc_parent_domain__bad_attributes_are_einval) {
  ibv_parent_domain_init_attr attr{};
  errno = 0;
  EXPECT_EQ(ibv_alloc_parent_domain(ctx_, &attr), nullptr);  // no PD
  EXPECT_EQ(errno, EINVAL);
  attr.pd = pd_;
  attr.comp_mask = 1u << 5;  // unknown
  errno = 0;
  EXPECT_EQ(ibv_alloc_parent_domain(ctx_, &attr), nullptr);
  EXPECT_EQ(errno, EINVAL);
  attr.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS;  // without the functions
  errno = 0;
  EXPECT_EQ(ibv_alloc_parent_domain(ctx_, &attr), nullptr);
  EXPECT_EQ(errno, EINVAL);
  // Nothing was kept: the PD is free to go (TearDown deallocates it).
}

TEST_F(Domains, create_cq_ex__parent_domain_must_be_one) {
  errno = 0;
  EXPECT_EQ(cq_on(nullptr), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(cq_on(pd_), nullptr);  // a plain PD
  EXPECT_EQ(errno, EINVAL);
}

// Each allocation is given back exactly once, with the type it was made with.
void expect_all_freed(const Allocations& a) {
  ASSERT_EQ(a.frees.size(), a.allocs.size());
  for (const auto& f : a.frees) {
    int matches = 0;
    for (const auto& c : a.allocs) matches += c.ptr == f.ptr && c.type == f.type;
    EXPECT_EQ(matches, 1) << f.ptr;
  }
}

TEST_F(Domains, allocators__qp_and_cq_memory_comes_from_the_program_and_goes_back) {
  Allocations allocs;
  ibv_pd* pd = parent(nullptr, &allocs);
  ASSERT_NE(pd, nullptr);
  ibv_cq_ex* cq = cq_on(pd);
  ASSERT_NE(cq, nullptr);
  // The CQ object (the ibv_cq_ex lives in it) and its ring of 16 CQEs.
  ASSERT_EQ(allocs.allocs.size(), 2u);
  EXPECT_EQ(allocs.allocs[0].ptr, static_cast<void*>(cq));
  EXPECT_GE(allocs.allocs[0].size, sizeof(ibv_cq_ex));
  EXPECT_GE(allocs.allocs[1].size, 16 * sizeof(ibv_wc) / 2);
  ibv_qp* qp = qp_on(pd, ibv_cq_ex_to_cq(cq));
  ASSERT_NE(qp, nullptr);
  ASSERT_EQ(allocs.allocs.size(), 3u);
  EXPECT_EQ(allocs.allocs[2].ptr, static_cast<void*>(qp));
  EXPECT_GE(allocs.allocs[2].size, sizeof(ibv_qp_ex));
  EXPECT_EQ(qp->pd, pd);
  for (const auto& c : allocs.allocs) {
    EXPECT_EQ(c.pd, pd);
    EXPECT_EQ(c.pd_context, &allocs);
    EXPECT_EQ(c.alignment & (c.alignment - 1), 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(c.ptr) % c.alignment, 0u);
  }
  // Three kinds: CQ, CQ ring, QP.
  EXPECT_NE(allocs.allocs[0].type, allocs.allocs[1].type);
  EXPECT_NE(allocs.allocs[1].type, allocs.allocs[2].type);
  EXPECT_NE(allocs.allocs[0].type, allocs.allocs[2].type);
  // Resizing takes a new ring from the allocator and gives the old one back.
  ASSERT_EQ(ibv_resize_cq(ibv_cq_ex_to_cq(cq), 64), 0);
  ASSERT_EQ(allocs.allocs.size(), 4u);
  EXPECT_EQ(allocs.allocs[3].type, allocs.allocs[1].type);
  EXPECT_GT(allocs.allocs[3].size, allocs.allocs[1].size);
  ASSERT_EQ(allocs.frees.size(), 1u);
  EXPECT_EQ(allocs.frees[0].ptr, allocs.allocs[1].ptr);
  EXPECT_EQ(ibv_dealloc_pd(pd), EBUSY);  // the QP and CQ are made on it
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  ASSERT_EQ(allocs.frees.size(), 2u);
  EXPECT_EQ(allocs.frees[1].ptr, allocs.allocs[2].ptr);
  EXPECT_EQ(ibv_dealloc_pd(pd), EBUSY);  // the CQ still is
  EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);
  expect_all_freed(allocs);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
}

// The CQ's CQEs really are in the program's memory: a completion passes through it.
TEST_F(Domains, allocators__cqes_go_through_the_supplied_ring) {
  Allocations allocs;
  ibv_pd* pd = parent(nullptr, &allocs);
  ASSERT_NE(pd, nullptr);
  ibv_cq_ex* cq = cq_on(pd);
  ASSERT_NE(cq, nullptr);
  ibv_qp* qp = qp_on(pd, ibv_cq_ex_to_cq(cq));
  ASSERT_NE(qp, nullptr);
  ASSERT_EQ(allocs.allocs.size(), 3u);
  const auto& ring = allocs.allocs[1];
  std::vector<uint8_t> before(static_cast<uint8_t*>(ring.ptr),
                              static_cast<uint8_t*>(ring.ptr) + ring.size);
  // A receive flushed by the move to ERR completes into the CQ.
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(qp, &attr, IBV_QP_STATE), 0);
  ibv_recv_wr rw{};
  rw.wr_id = 0x1122334455667788ull;
  ibv_recv_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_recv(qp, &rw, &bad), 0);
  std::vector<uint8_t> after(static_cast<uint8_t*>(ring.ptr),
                             static_cast<uint8_t*>(ring.ptr) + ring.size);
  EXPECT_NE(before, after);  // the CQE was written there
  ibv_wc wc{};
  ASSERT_EQ(ibv_poll_cq(ibv_cq_ex_to_cq(cq), 1, &wc), 1);
  EXPECT_EQ(wc.wr_id, 0x1122334455667788ull);
  EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);
  expect_all_freed(allocs);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
}

TEST_F(Domains, allocators__use_default_and_failure) {
  Allocations allocs;
  allocs.mode = Allocations::kUseDefault;
  ibv_pd* pd = parent(nullptr, &allocs);
  ASSERT_NE(pd, nullptr);
  ibv_cq_ex* cq = cq_on(pd);
  ASSERT_NE(cq, nullptr);
  EXPECT_TRUE(allocs.allocs.empty());
  EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);
  EXPECT_TRUE(allocs.frees.empty());  // not the program's memory: not given back to it
  allocs.mode = Allocations::kFail;
  errno = 0;
  EXPECT_EQ(cq_on(pd), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);  // the failed CQ did not keep it
}

// A QP and an MR on a parent domain protect as its PD: traffic with a QP of the PD works.
TEST_F(Domains, parent_domain__qp_and_mr_carry_traffic) {
  Allocations allocs;
  ibv_td_init_attr td_attr{};
  ibv_td* td = ibv_alloc_td(ctx_, &td_attr);
  ASSERT_NE(td, nullptr);
  ibv_pd* pd = parent(td, &allocs);
  ASSERT_NE(pd, nullptr);
  ibv_cq* cq = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  ibv_qp* a = qp_on(pd, cq);   // on the parent domain
  ibv_qp* b = qp_on(pd_, cq);  // on its PD
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  std::vector<uint8_t> src(256, 0x5a), dst(256, 0);
  ibv_mr* src_mr = ibv_reg_mr(pd, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* dst_mr = ibv_reg_mr(pd_, dst.data(), dst.size(),
                              IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ASSERT_NE(src_mr, nullptr);
  ASSERT_NE(dst_mr, nullptr);
  EXPECT_EQ(src_mr->pd, pd);
  connect_rc(a, b->qp_num);
  connect_rc(b, a->qp_num);
  ibv_sge s{reinterpret_cast<uint64_t>(src.data()), 256, src_mr->lkey};
  ibv_send_wr w{};
  w.wr_id = 1;
  w.opcode = IBV_WR_RDMA_WRITE;
  w.send_flags = IBV_SEND_SIGNALED;
  w.sg_list = &s;
  w.num_sge = 1;
  w.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(dst.data());
  w.wr.rdma.rkey = dst_mr->rkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a, &w, &bad), 0);
  ibv_wc wc{};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  int got = 0;
  while (got == 0 && std::chrono::steady_clock::now() < deadline) got = ibv_poll_cq(cq, 1, &wc);
  ASSERT_EQ(got, 1);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(dst, src);
  EXPECT_EQ(ibv_dealloc_pd(pd), EBUSY);  // the QP and the MR
  EXPECT_EQ(ibv_destroy_qp(a), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), EBUSY);  // the MR
  EXPECT_EQ(ibv_dereg_mr(src_mr), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
  EXPECT_EQ(ibv_dealloc_td(td), 0);
  EXPECT_EQ(ibv_destroy_qp(b), 0);
  EXPECT_EQ(ibv_dereg_mr(dst_mr), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(allocs.allocs.size(), 1u);  // the QP (the CQ was not made on the domain)
  expect_all_freed(allocs);
}

}  // namespace
}  // namespace vrnic::abi::test
