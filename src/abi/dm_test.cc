// Device memory: allocation limits, the memcpy calls, zero-based DM MRs in RDMA WRITE, READ
// and SEND, a remote access past the MR, and the errors of each call.
#include <numeric>
#include <utility>

#include "abi/verbs_test.h"

namespace vrnic::abi::test {
namespace {

constexpr size_t kDmSize = 4096;
constexpr unsigned kDmAccess = IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE |
                               IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

class DeviceMemory : public Loopback {
 protected:
  void SetUp() override {
    Loopback::SetUp();
    if (HasFatalFailure()) return;
    ibv_alloc_dm_attr attr{};
    attr.length = kDmSize;
    dm_ = ibv_alloc_dm(ctx_, &attr);
    ASSERT_NE(dm_, nullptr) << errno;
  }
  void TearDown() override {
    if (dm_mr_) {
      EXPECT_EQ(ibv_dereg_mr(dm_mr_), 0);
    }
    if (dm_) {
      EXPECT_EQ(ibv_free_dm(dm_), 0);
    }
    Loopback::TearDown();
  }
  // The whole block as one zero-based MR.
  void register_dm() {
    dm_mr_ = ibv_reg_dm_mr(pd_, dm_, 0, kDmSize, kDmAccess);
    ASSERT_NE(dm_mr_, nullptr) << errno;
  }
  ibv_wc post_and_wait(ibv_qp* qp, ibv_send_wr& w) {
    ibv_send_wr* bad = nullptr;
    EXPECT_EQ(ibv_post_send(qp, &w, &bad), 0);
    auto got = wait(1);
    EXPECT_EQ(got.size(), 1u);
    return got.empty() ? ibv_wc{} : got[0];
  }
  ibv_dm* dm_ = nullptr;
  ibv_mr* dm_mr_ = nullptr;
};

TEST_F(DeviceMemory, query_device_ex__advertises_max_dm_size) {
  ibv_device_attr_ex attr{};
  ASSERT_EQ(ibv_query_device_ex(ctx_, nullptr, &attr), 0);
  EXPECT_EQ(attr.max_dm_size, 256u * 1024);
}

TEST_F(DeviceMemory, alloc_dm__bad_attributes_einval_and_exhaustion_enomem) {
  ibv_alloc_dm_attr attr{};
  errno = 0;
  EXPECT_EQ(ibv_alloc_dm(ctx_, &attr), nullptr);  // length 0
  EXPECT_EQ(errno, EINVAL);
  attr.length = 256 * 1024 + 1;  // over max_dm_size
  errno = 0;
  EXPECT_EQ(ibv_alloc_dm(ctx_, &attr), nullptr);
  EXPECT_EQ(errno, EINVAL);
  attr.length = 64;
  attr.comp_mask = 1;
  errno = 0;
  EXPECT_EQ(ibv_alloc_dm(ctx_, &attr), nullptr);
  EXPECT_EQ(errno, EINVAL);
  attr.comp_mask = 0;
  attr.log_align_req = 13;  // more than a page
  errno = 0;
  EXPECT_EQ(ibv_alloc_dm(ctx_, &attr), nullptr);
  EXPECT_EQ(errno, EINVAL);
  // The fixture holds 4 KiB: the rest fits once, then the device has none left.
  attr.log_align_req = 12;
  attr.length = 256 * 1024 - kDmSize;
  ibv_dm* rest = ibv_alloc_dm(ctx_, &attr);
  ASSERT_NE(rest, nullptr);
  attr.length = 1;
  errno = 0;
  EXPECT_EQ(ibv_alloc_dm(ctx_, &attr), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_EQ(ibv_free_dm(rest), 0);
  ibv_dm* again = ibv_alloc_dm(ctx_, &attr);  // freed memory is available again
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(ibv_free_dm(again), 0);
}

TEST_F(DeviceMemory, memcpy__round_trip_and_out_of_bounds_efault) {
  std::vector<uint8_t> in(100), out(100, 0);
  std::iota(in.begin(), in.end(), uint8_t(1));
  ASSERT_EQ(ibv_memcpy_to_dm(dm_, kDmSize - 100, in.data(), 100), 0);
  ASSERT_EQ(ibv_memcpy_from_dm(out.data(), dm_, kDmSize - 100, 100), 0);
  EXPECT_EQ(out, in);
  EXPECT_EQ(ibv_memcpy_to_dm(dm_, kDmSize - 99, in.data(), 100), EFAULT);
  EXPECT_EQ(ibv_memcpy_from_dm(out.data(), dm_, kDmSize + 1, 0), EFAULT);
  EXPECT_EQ(ibv_memcpy_from_dm(out.data(), dm_, UINT64_MAX - 10, 100), EFAULT);  // wraps
  EXPECT_EQ(ibv_memcpy_to_dm(dm_, 0, in.data(), 0), 0);
}

// mlx5_access_dm: the range is checked against the block first (EFAULT), then the 4-byte
// granularity of MEMIC accesses (EINVAL); a refused copy moves no byte.
TEST_F(DeviceMemory, memcpy__unaligned_offset_or_length_einval_as_mlx5) {
  std::vector<uint8_t> in(64, 0xab), out(64, 0xcd);
  ASSERT_EQ(ibv_memcpy_to_dm(dm_, 0, in.data(), 64), 0);
  const std::vector<uint8_t> other(64, 0x11);
  for (auto [offset, length] : {std::pair<uint64_t, size_t>{2, 8}, {0, 6}, {1, 1}, {4, 63}}) {
    EXPECT_EQ(ibv_memcpy_to_dm(dm_, offset, other.data(), length), EINVAL) << offset << "+" << length;
    EXPECT_EQ(ibv_memcpy_from_dm(out.data(), dm_, offset, length), EINVAL) << offset << "+" << length;
  }
  EXPECT_EQ(out, std::vector<uint8_t>(64, 0xcd));  // nothing read
  ASSERT_EQ(ibv_memcpy_from_dm(out.data(), dm_, 0, 64), 0);
  EXPECT_EQ(out, in);  // nothing written
  // Unaligned and past the end: the bounds are checked first.
  EXPECT_EQ(ibv_memcpy_to_dm(dm_, kDmSize - 2, in.data(), 4), EFAULT);
  EXPECT_EQ(ibv_memcpy_from_dm(out.data(), dm_, kDmSize - 4, 6), EFAULT);
  // Aligned at the very end, and empty copies, are fine.
  EXPECT_EQ(ibv_memcpy_to_dm(dm_, kDmSize - 4, in.data(), 4), 0);
  EXPECT_EQ(ibv_memcpy_from_dm(out.data(), dm_, kDmSize, 0), 0);
}

// The kernel's DM MR checks (offset and length within the block) admit an empty region, and
// mlx5 registers it: a zero-length, zero-based MR, anywhere in the block up to its end.
TEST_F(DeviceMemory, reg_dm_mr__zero_length_registers) {
  for (uint64_t offset : {uint64_t(0), uint64_t(100), uint64_t(kDmSize)}) {
    errno = 0;
    ibv_mr* mr = ibv_reg_dm_mr(pd_, dm_, offset, 0, kDmAccess);
    ASSERT_NE(mr, nullptr) << offset << ": " << errno;
    EXPECT_EQ(mr->length, 0u);
    EXPECT_EQ(mr->addr, nullptr);
    EXPECT_EQ(ibv_free_dm(dm_), EBUSY);  // it holds the block like any DM MR
    EXPECT_EQ(ibv_dereg_mr(mr), 0);
  }
  errno = 0;
  EXPECT_EQ(ibv_reg_dm_mr(pd_, dm_, kDmSize + 1, 0, kDmAccess), nullptr);  // past the block
  EXPECT_EQ(errno, EINVAL);
  // Memory of the process keeps the kernel's rule: no pages, no region.
  errno = 0;
  EXPECT_EQ(ibv_reg_mr(pd_, a_buf_.data(), 0, IBV_ACCESS_LOCAL_WRITE), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

// Neither mlx5 nor the kernel asks a DM MR for 4-byte alignment (only the copies do): an
// MR at an odd offset and length registers, and a WRITE into it lands there.
TEST_F(DeviceMemory, reg_dm_mr__unaligned_offset_and_length_register_as_mlx5) {
  dm_mr_ = ibv_reg_dm_mr(pd_, dm_, 3, 9, kDmAccess);
  ASSERT_NE(dm_mr_, nullptr) << errno;
  EXPECT_EQ(dm_mr_->length, 9u);
  std::fill(a_buf_.begin(), a_buf_.begin() + 9, 0x5a);
  ibv_sge s = sge(a_buf_, a_mr_, 0, 9);
  ibv_send_wr w = rdma_to_b(IBV_WR_RDMA_WRITE, 5, &s, dm_mr_->rkey);
  w.wr.rdma.remote_addr = 0;
  EXPECT_EQ(post_and_wait(a_, w).status, IBV_WC_SUCCESS);
  std::vector<uint8_t> got(16);
  ASSERT_EQ(ibv_memcpy_from_dm(got.data(), dm_, 0, 16), 0);
  const std::vector<uint8_t> want = {0, 0, 0, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a,
                                     0x5a, 0, 0, 0, 0};
  EXPECT_EQ(got, want);
}

TEST_F(DeviceMemory, reg_dm_mr__errors_and_free_dm_busy) {
  errno = 0;
  EXPECT_EQ(ibv_reg_dm_mr(pd_, dm_, 0, 64, IBV_ACCESS_LOCAL_WRITE), nullptr);  // not zero-based
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(ibv_reg_dm_mr(pd_, dm_, 0, 64, IBV_ACCESS_ZERO_BASED | IBV_ACCESS_MW_BIND), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(ibv_reg_dm_mr(pd_, dm_, kDmSize - 63, 64, kDmAccess), nullptr);  // past the end
  EXPECT_EQ(errno, EINVAL);
  ibv_mr* mr = ibv_reg_dm_mr(pd_, dm_, 64, 128, kDmAccess);
  ASSERT_NE(mr, nullptr);
  EXPECT_EQ(mr->addr, nullptr);  // zero-based, as rdma-core reports a DM MR
  EXPECT_EQ(mr->length, 128u);
  EXPECT_EQ(mr->pd, pd_);
  EXPECT_EQ(ibv_free_dm(dm_), EBUSY);
  EXPECT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                         IBV_ACCESS_LOCAL_WRITE), IBV_REREG_MR_ERR_CMD);
  EXPECT_EQ(ibv_dealloc_pd(pd_), EBUSY);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
}

TEST_F(DeviceMemory, rdma_write_lands_at_the_offset_and_read_returns_it) {
  register_dm();
  std::iota(a_buf_.begin(), a_buf_.begin() + 512, uint8_t(7));
  ibv_sge s = sge(a_buf_, a_mr_, 0, 512);
  ibv_send_wr w = rdma_to_b(IBV_WR_RDMA_WRITE, 1, &s, dm_mr_->rkey);
  w.wr.rdma.remote_addr = 1000;  // zero-based: an offset into the DM MR
  EXPECT_EQ(post_and_wait(a_, w).status, IBV_WC_SUCCESS);
  std::vector<uint8_t> got(512);
  ASSERT_EQ(ibv_memcpy_from_dm(got.data(), dm_, 1000, 512), 0);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), a_buf_.begin()));
  // READ it back into a's buffer at 4096.
  ibv_sge r = sge(a_buf_, a_mr_, 4096, 512);
  ibv_send_wr rd = rdma_to_b(IBV_WR_RDMA_READ, 2, &r, dm_mr_->rkey);
  rd.wr.rdma.remote_addr = 1000;
  EXPECT_EQ(post_and_wait(a_, rd).status, IBV_WC_SUCCESS);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), a_buf_.begin() + 4096));
}

TEST_F(DeviceMemory, send_from_a_dm_mr_delivers_its_bytes) {
  register_dm();
  std::vector<uint8_t> in(300);
  std::iota(in.begin(), in.end(), uint8_t(40));
  ASSERT_EQ(ibv_memcpy_to_dm(dm_, 200, in.data(), in.size()), 0);
  ibv_sge rs = sge(b_buf_, b_mr_, 0, 4096);
  ibv_recv_wr rw{};
  rw.wr_id = 9;
  rw.sg_list = &rs;
  rw.num_sge = 1;
  ibv_recv_wr* bad_r = nullptr;
  ASSERT_EQ(ibv_post_recv(b_, &rw, &bad_r), 0);
  ibv_sge s{200, 300, dm_mr_->lkey};  // local SGE: an offset into the DM MR
  ibv_send_wr w{};
  w.wr_id = 3;
  w.opcode = IBV_WR_SEND;
  w.send_flags = IBV_SEND_SIGNALED;
  w.sg_list = &s;
  w.num_sge = 1;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a_, &w, &bad), 0);
  auto wcs = wait(2);  // the send and the receive
  ASSERT_EQ(wcs.size(), 2u);
  for (const ibv_wc& wc : wcs) EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << wc.wr_id;
  EXPECT_TRUE(std::equal(in.begin(), in.end(), b_buf_.begin()));
}

// IBA 9.7.5.2.4 / o9-20: an access outside the region is NAKed with Remote Access Error;
// the requester completes IBV_WC_REM_ACCESS_ERR and nothing past the block is written.
TEST_F(DeviceMemory, write_past_the_dm_mr_is_a_remote_access_error) {
  dm_mr_ = ibv_reg_dm_mr(pd_, dm_, 0, 1024, kDmAccess);
  ASSERT_NE(dm_mr_, nullptr);
  ibv_sge s = sge(a_buf_, a_mr_, 0, 64);
  ibv_send_wr w = rdma_to_b(IBV_WR_RDMA_WRITE, 4, &s, dm_mr_->rkey);
  w.wr.rdma.remote_addr = 1024 - 32;  // half of it past the MR
  std::fill(a_buf_.begin(), a_buf_.begin() + 64, 0xee);
  EXPECT_EQ(post_and_wait(a_, w).status, IBV_WC_REM_ACCESS_ERR);
  std::vector<uint8_t> got(64);
  ASSERT_EQ(ibv_memcpy_from_dm(got.data(), dm_, 1024 - 32, 64), 0);
  EXPECT_EQ(got, std::vector<uint8_t>(64, 0));  // nothing placed
}

}  // namespace
}  // namespace vrnic::abi::test
