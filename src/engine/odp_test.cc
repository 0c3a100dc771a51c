// On-demand paging: ODP regions are not touched at registration, accesses to unmapped or
// read-only pages fail with the IB error (never a signal), implicit ODP, ibv_advise_mr.
#include "engine/odp.h"

#include <cstring>
#include <new>

#include <gtest/gtest.h>

#include "engine/test_fabric.h"

namespace vrnic::engine::testing {
namespace {

constexpr uint32_t kAll = kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic;
constexpr uint32_t kPrefetch = 0, kPrefetchWrite = 1, kPrefetchNoFault = 2;

using Region = OdpRegion;

TEST(FakeHostMemory, pages_present__reports_mapping_and_write_permission) {
  FakeHostMemory host;
  Region r(host);
  EXPECT_TRUE(host.pages_present(r.base, r.ps, false));
  EXPECT_TRUE(host.pages_present(r.base, r.ps, true));
  EXPECT_FALSE(host.pages_present(r.base, r.ps + 1, false));  // runs into the hole
  EXPECT_FALSE(host.pages_present(r.base + r.ps + 10, 4, false));
  EXPECT_TRUE(host.pages_present(r.base + 2 * r.ps, r.ps, false));
  EXPECT_FALSE(host.pages_present(r.base + 2 * r.ps, r.ps, true));  // read-only page
  EXPECT_TRUE(host.pages_present(r.base, 0, true));
  EXPECT_FALSE(host.pages_present(nullptr, 8, false));  // nothing is present unless mapped
}

struct Odp : ::testing::Test {
  Fabric f;
  Node& a = f.add_node(1);
  Node& b = f.add_node(2);
  Qp* qa = a.create_qp();
  Qp* qb = b.create_qp();
  Region r{b.memory};
  MrInfo odp;  // b: ODP MR over the three pages

  void SetUp() override {
    Fabric::connect(a, qa, b, qb);
    // Registration does not touch the pages: the hole and the read-only page are fine.
    ASSERT_EQ(b.dev->reg_mr(b.pd, r.base, 3 * r.ps, r.addr(0), kAll | kOnDemand, odp), 0);
    EXPECT_EQ(b.memory.checks, 0u);
  }
  WorkCompletion rdma(WrOpcode op, Buffer& local, uint32_t len, uint64_t remote, uint32_t rkey) {
    Sge sg{local.addr(), len, local.mr.lkey};
    EXPECT_EQ(post_send(a, qa, wr_of(op, 7, &sg, remote, rkey)), 0);
    EXPECT_TRUE(f.run());
    auto wcs = a.poll();
    EXPECT_EQ(wcs.size(), 1u);
    return wcs.empty() ? WorkCompletion{} : wcs[0];
  }
};

TEST_F(Odp, write__and_read_on_mapped_pages_succeed) {
  Buffer& src = a.reg(256);
  fill_random(src.data(), 256, 3);
  EXPECT_EQ(rdma(WrOpcode::kRdmaWrite, src, 256, r.addr(0, 100), odp.rkey).status,
            WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(r.base + 100, src.data(), 256), 0);
  Buffer& dst = a.reg(64);
  EXPECT_EQ(rdma(WrOpcode::kRdmaRead, dst, 64, r.addr(2, 8), odp.rkey).status,
            WcStatus::kSuccess);
  EXPECT_EQ(dst.data()[0], 0x5a);
  EXPECT_EQ(dst.data()[63], 0x5a);
}

TEST_F(Odp, write__to_unmapped_page_is_remote_access_error) {
  Buffer& src = a.reg(64);
  fill_random(src.data(), 64, 6);
  WorkCompletion wc = rdma(WrOpcode::kRdmaWrite, src, 64, r.addr(1, 0), odp.rkey);
  EXPECT_EQ(wc.status, WcStatus::kRemAccessErr);
  EXPECT_EQ(b.ctr().tx_nak_rem_access, 1u);
  EXPECT_TRUE(r.untouched(1));  // nothing written to the absent page
}

TEST_F(Odp, write__spanning_into_unmapped_page_writes_nothing) {
  Buffer& src = a.reg(128);
  fill_random(src.data(), 128, 4);
  WorkCompletion wc = rdma(WrOpcode::kRdmaWrite, src, 128, r.addr(0, r.ps - 64), odp.rkey);
  EXPECT_EQ(wc.status, WcStatus::kRemAccessErr);
  EXPECT_EQ(r.base[r.ps - 64], 0x5a);  // checked before the first byte
  EXPECT_TRUE(r.untouched(0));
  EXPECT_TRUE(r.untouched(1));
}

TEST_F(Odp, write__to_read_only_page_is_remote_access_error) {
  Buffer& src = a.reg(64);
  fill_random(src.data(), 64, 7);
  WorkCompletion wc = rdma(WrOpcode::kRdmaWrite, src, 64, r.addr(2, 0), odp.rkey);
  EXPECT_EQ(wc.status, WcStatus::kRemAccessErr);
  EXPECT_EQ(r.base[2 * r.ps], 0x5a);
  EXPECT_TRUE(r.untouched(2));
}

TEST_F(Odp, read__on_unmapped_page_is_remote_access_error) {
  Buffer& dst = a.reg(64);
  EXPECT_EQ(rdma(WrOpcode::kRdmaRead, dst, 64, r.addr(1, 0), odp.rkey).status,
            WcStatus::kRemAccessErr);
  EXPECT_EQ(dst.data()[0], 0);  // the absent page's bytes were not read back
  EXPECT_EQ(dst.data()[63], 0);
}

TEST_F(Odp, atomic__on_unmapped_page_is_remote_access_error) {
  Buffer& dst = a.reg(8);
  EXPECT_EQ(rdma(WrOpcode::kAtomicFetchAdd, dst, 8, r.addr(1, 0), odp.rkey).status,
            WcStatus::kRemAccessErr);
  EXPECT_TRUE(r.untouched(1));  // no add happened
}

TEST_F(Odp, post_send__local_sge_on_unmapped_page_is_local_protection_error) {
  // a sends from its own ODP region with a hole.
  Region local(a.memory);
  MrInfo mr;
  ASSERT_EQ(a.dev->reg_mr(a.pd, local.base, 3 * local.ps, local.addr(0), kAll | kOnDemand, mr), 0);
  Buffer& dst = b.reg(4096);
  ASSERT_EQ(post_recv(b, qb, 1, {{dst.addr(), 4096, dst.mr.lkey}}), 0);
  Sge sg{local.addr(1, 0), 64, mr.lkey};
  SendWr wr;
  wr.wr_id = 9;
  wr.opcode = WrOpcode::kSend;
  wr.send_flags = kSendSignaled;
  wr.sg_list = &sg;
  wr.num_sge = 1;
  ASSERT_EQ(post_send(a, qa, wr), 0);
  ASSERT_TRUE(f.run());
  auto wcs = a.poll();
  ASSERT_GE(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 9u);
  EXPECT_EQ(wcs[0].status, WcStatus::kLocProtErr);
}

TEST_F(Odp, reg_mr__implicit_region_covers_the_address_space) {
  MrInfo imp;
  ASSERT_EQ(b.dev->reg_mr(b.pd, nullptr, SIZE_MAX, 0, kAll | kOnDemand, imp), 0);
  std::vector<uint8_t> target(1000, 0);
  b.memory.map(target.data(), target.size());
  Buffer& src = a.reg(1000);
  fill_random(src.data(), 1000, 5);
  EXPECT_EQ(rdma(WrOpcode::kRdmaWrite, src, 1000, reinterpret_cast<uint64_t>(target.data()),
                 imp.rkey).status,
            WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(target.data(), src.data(), 1000), 0);
  // Address 0 is not mapped: an error, not a crash.
  Buffer& dst = a.reg(8);
  EXPECT_EQ(rdma(WrOpcode::kRdmaRead, dst, 8, 0, imp.rkey).status, WcStatus::kRemAccessErr);
}

TEST_F(Odp, reg_mr__bad_on_demand_arguments_are_einval) {
  MrInfo m;
  // (NULL, SIZE_MAX) is implicit ODP only.
  EXPECT_EQ(b.dev->reg_mr(b.pd, nullptr, SIZE_MAX, 0, kAll, m), EINVAL);
  EXPECT_EQ(b.dev->reg_mr(b.pd, nullptr, 4096, 0, kAll | kOnDemand, m), EINVAL);
  EXPECT_EQ(b.dev->reg_mr(b.pd, nullptr, SIZE_MAX, 4096, kAll | kOnDemand, m), EINVAL);
}

TEST_F(Odp, advise_mr__prefetch_flags_and_errors) {
  Sge ok{r.addr(0), uint32_t(r.ps), odp.lkey};
  EXPECT_EQ(b.dev->advise_mr(b.pd, kPrefetch, 1, &ok, 1), 0);
  EXPECT_EQ(b.dev->advise_mr(b.pd, kPrefetchWrite, 0, &ok, 1), 0);
  EXPECT_EQ(b.dev->advise_mr(b.pd, kPrefetch, 0, &ok, 0), 0);
  EXPECT_EQ(b.dev->advise_mr(b.pd, 7, 0, &ok, 1), EOPNOTSUPP);  // unknown advice
  EXPECT_EQ(b.dev->advise_mr(b.pd, kPrefetch, 2, &ok, 1), EINVAL);  // unknown flag
  Sge hole{r.addr(1), 16, odp.lkey};
  EXPECT_EQ(b.dev->advise_mr(b.pd, kPrefetch, 0, &hole, 1), EFAULT);
  EXPECT_EQ(b.dev->advise_mr(b.pd, kPrefetchNoFault, 0, &hole, 1), 0);
  Sge ro{r.addr(2), 16, odp.lkey};
  EXPECT_EQ(b.dev->advise_mr(b.pd, kPrefetch, 0, &ro, 1), 0);
  EXPECT_EQ(b.dev->advise_mr(b.pd, kPrefetchWrite, 0, &ro, 1), EFAULT);
  Sge out{r.addr(2, 16), uint32_t(r.ps), odp.lkey};  // past the end of the region
  EXPECT_EQ(b.dev->advise_mr(b.pd, kPrefetchNoFault, 0, &out, 1), EFAULT);
  Sge bad_key{r.addr(0), 16, odp.lkey + 1};
  EXPECT_EQ(b.dev->advise_mr(b.pd, kPrefetch, 0, &bad_key, 1), EFAULT);
  Buffer& plain = b.reg(64);
  Sge not_odp{plain.addr(), 64, plain.mr.lkey};
  EXPECT_EQ(b.dev->advise_mr(b.pd, kPrefetch, 0, &not_odp, 1), EINVAL);
  Pd* other = b.dev->alloc_pd();
  EXPECT_EQ(b.dev->advise_mr(other, kPrefetch, 0, &ok, 1), EINVAL);  // MR of another PD
  MrInfo ro_mr;
  ASSERT_EQ(b.dev->reg_mr(b.pd, r.base, r.ps, r.addr(0), kRemoteRead | kOnDemand, ro_mr), 0);
  Sge no_write{r.addr(0), 16, ro_mr.lkey};
  EXPECT_EQ(b.dev->advise_mr(b.pd, kPrefetchWrite, 0, &no_write, 1), EFAULT);
}

}  // namespace
}  // namespace vrnic::engine::testing
