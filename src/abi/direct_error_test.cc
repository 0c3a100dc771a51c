// Direct mode through the verbs: every access error still completes as the wire's NAK would.
#include "abi/direct_test_support.h"

namespace vrnic::abi::test {
namespace {

// --- errors as on the wire -----------------------------------------------------------------

TEST_F(Direct, bad_rkey__remote_access_error_target_untouched) {
  const Counters before(dev());
  ibv_sge s = sge(a_buf_, a_mr_, 0, 64);
  ibv_send_wr w = rdma(IBV_WR_RDMA_WRITE, 9, &s, 1, b_buf_.data(), b_mr_->rkey ^ 0x80);
  const ibv_wc wc = post_and_wait(w);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.wr_id, 9u);
  EXPECT_TRUE(all_zero(b_buf_.data(), kSize));
  expect_access_error_event_on_b();
  const Counters after(dev());
  EXPECT_GT(after["direct_fallbacks"], before["direct_fallbacks"]);
  EXPECT_EQ(after["direct_writes"], before["direct_writes"]);
  EXPECT_GT(after["tx_write"], before["tx_write"]);  // the responder was asked, and NAKed
  EXPECT_GT(after["tx_nak_rem_access"], before["tx_nak_rem_access"]);
}

TEST_F(Direct, bad_rkey_read__remote_access_error_local_untouched) {
  std::fill(b_buf_.begin(), b_buf_.end(), 0x5a);
  std::fill(a_buf_.begin(), a_buf_.end(), 0);
  const Counters before(dev());
  ibv_sge s = sge(a_buf_, a_mr_, 0, 64);
  ibv_send_wr w = rdma(IBV_WR_RDMA_READ, 10, &s, 1, b_buf_.data(), b_mr_->rkey + 0x100);
  const ibv_wc wc = post_and_wait(w);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_TRUE(all_zero(a_buf_.data(), kSize));
  expect_access_error_event_on_b();
  const Counters after(dev());
  EXPECT_GT(after["direct_fallbacks"], before["direct_fallbacks"]);
  EXPECT_EQ(after["direct_reads"], before["direct_reads"]);
}

TEST_F(Direct, out_of_bounds__remote_access_error_target_untouched) {
  const Counters before(dev());
  ibv_sge s = sge(a_buf_, a_mr_, 0, 64);
  ibv_send_wr w = rdma(IBV_WR_RDMA_WRITE, 11, &s, 1, b_buf_.data() + kSize - 32, b_mr_->rkey);
  const ibv_wc wc = post_and_wait(w);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_TRUE(all_zero(b_buf_.data(), kSize));
  expect_access_error_event_on_b();
  const Counters after(dev());
  EXPECT_GT(after["direct_fallbacks"], before["direct_fallbacks"]);
  EXPECT_EQ(after["direct_writes"], before["direct_writes"]);
}

TEST_F(Direct, out_of_bounds_before_the_region__remote_access_error) {
  const Counters before(dev());
  ibv_sge s = sge(a_buf_, a_mr_, 0, 64);
  ibv_send_wr w = rdma(IBV_WR_RDMA_READ, 12, &s, 1, b_buf_.data() - 16, b_mr_->rkey);
  std::fill(a_buf_.begin(), a_buf_.begin() + 64, 0x33);
  const ibv_wc wc = post_and_wait(w);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  for (size_t i = 0; i < 64; ++i) ASSERT_EQ(a_buf_[i], 0x33) << i;
  expect_access_error_event_on_b();
  const Counters after(dev());
  EXPECT_GT(after["direct_fallbacks"], before["direct_fallbacks"]);
  EXPECT_EQ(after["direct_reads"], before["direct_reads"]);
}

TEST_F(Direct, region_without_remote_write__remote_access_error_target_untouched) {
  std::vector<uint8_t> c(8192, 0);
  c_mr_ = ibv_reg_mr(pd_, c.data(), c.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
  ASSERT_NE(c_mr_, nullptr);
  const Counters before(dev());
  // Reading it is allowed, and goes direct.
  ibv_sge rs = sge(a_buf_, a_mr_, 0, 128);
  ibv_send_wr r = rdma(IBV_WR_RDMA_READ, 20, &rs, 1, c.data(), c_mr_->rkey);
  ibv_wc wc = post_and_wait(r);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_TRUE(all_zero(a_buf_.data(), 128));
  ibv_sge s = sge(a_buf_, a_mr_, 1000, 64);
  ibv_send_wr w = rdma(IBV_WR_RDMA_WRITE, 21, &s, 1, c.data(), c_mr_->rkey);
  wc = post_and_wait(w);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_TRUE(all_zero(c.data(), c.size()));
  expect_access_error_event_on_b();
  const Counters after(dev());
  EXPECT_EQ(after["direct_reads"] - before["direct_reads"], 1u);
  EXPECT_EQ(after["direct_writes"], before["direct_writes"]);
  EXPECT_GT(after["direct_fallbacks"], before["direct_fallbacks"]);
  EXPECT_EQ(ibv_dereg_mr(c_mr_), 0);  // before c goes
  c_mr_ = nullptr;
}

TEST_F(Direct, region_of_another_pd__remote_access_error_target_untouched) {
  ibv_pd* other = ibv_alloc_pd(ctx_);
  ASSERT_NE(other, nullptr);
  std::vector<uint8_t> c(8192, 0);
  c_mr_ = ibv_reg_mr(other, c.data(), c.size(),
                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  ASSERT_NE(c_mr_, nullptr);
  const Counters before(dev());
  ibv_sge s = sge(a_buf_, a_mr_, 0, 64);
  ibv_send_wr w = rdma(IBV_WR_RDMA_WRITE, 25, &s, 1, c.data(), c_mr_->rkey);
  const ibv_wc wc = post_and_wait(w);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_TRUE(all_zero(c.data(), c.size()));
  expect_access_error_event_on_b();
  const Counters after(dev());
  EXPECT_EQ(after["direct_writes"], before["direct_writes"]);
  EXPECT_GT(after["direct_fallbacks"], before["direct_fallbacks"]);
  EXPECT_EQ(ibv_dereg_mr(c_mr_), 0);
  c_mr_ = nullptr;
  EXPECT_EQ(ibv_dealloc_pd(other), 0);
}

TEST_F(Direct, responder_qp_without_remote_write__remote_access_error) {
  // b's access flags changed in RTS: the table follows.
  ibv_qp_attr attr{};
  attr.qp_access_flags = IBV_ACCESS_REMOTE_READ;
  ASSERT_EQ(ibv_modify_qp(b_, &attr, IBV_QP_ACCESS_FLAGS), 0);
  for (size_t i = 0; i < 64; ++i) b_buf_[i] = uint8_t(i + 1);
  const Counters before(dev());
  ibv_sge rs = sge(a_buf_, a_mr_, 0, 64);  // reading is still allowed, directly
  ibv_send_wr r = rdma(IBV_WR_RDMA_READ, 26, &rs, 1, b_buf_.data(), b_mr_->rkey);
  ibv_wc wc = post_and_wait(r);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(std::memcmp(a_buf_.data(), b_buf_.data(), 64), 0);
  std::fill(b_buf_.begin(), b_buf_.begin() + 64, 0);
  ibv_sge s = sge(a_buf_, a_mr_, 1000, 64);
  ibv_send_wr w = rdma(IBV_WR_RDMA_WRITE, 27, &s, 1, b_buf_.data(), b_mr_->rkey);
  wc = post_and_wait(w);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_TRUE(all_zero(b_buf_.data(), kSize));
  expect_access_error_event_on_b();
  const Counters after(dev());
  EXPECT_EQ(after["direct_reads"] - before["direct_reads"], 1u);
  EXPECT_EQ(after["direct_writes"], before["direct_writes"]);
  EXPECT_GT(after["direct_fallbacks"], before["direct_fallbacks"]);
}

TEST_F(Direct, responder_qp_in_error__not_direct_and_nothing_lands) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(b_, &attr, IBV_QP_STATE), 0);
  const Counters before(dev());
  ibv_sge s = sge(a_buf_, a_mr_, 0, 64);
  ibv_send_wr w = rdma(IBV_WR_RDMA_WRITE, 28, &s, 1, b_buf_.data(), b_mr_->rkey);
  const ibv_wc wc = post_and_wait(w);
  // On the wire the responder in ERR drops the request: the requester runs out of retries.
  EXPECT_EQ(wc.status, IBV_WC_RETRY_EXC_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_TRUE(all_zero(b_buf_.data(), kSize));
  const Counters after(dev());
  EXPECT_EQ(after["direct_writes"], before["direct_writes"]);
  EXPECT_GT(after["direct_fallbacks"], before["direct_fallbacks"]);
  EXPECT_GT(after["tx_write"], before["tx_write"]);
}

TEST_F(Direct, dereg_mr__old_rkey_refused_after_a_direct_write) {
  ibv_sge s = sge(a_buf_, a_mr_, 0, 4096);
  ibv_send_wr w = rdma(IBV_WR_RDMA_WRITE, 30, &s, 1, b_buf_.data(), b_mr_->rkey);
  ibv_wc wc = post_and_wait(w);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(std::memcmp(b_buf_.data(), a_buf_.data(), 4096), 0);
  const Counters mid(dev());
  EXPECT_GE(mid["direct_writes"], 1u);
  const uint32_t old_rkey = b_mr_->rkey;
  ASSERT_EQ(ibv_dereg_mr(b_mr_), 0);
  b_mr_ = nullptr;
  std::fill(b_buf_.begin(), b_buf_.end(), 0);
  ibv_sge s2 = sge(a_buf_, a_mr_, 8192, 256);
  ibv_send_wr w2 = rdma(IBV_WR_RDMA_WRITE, 31, &s2, 1, b_buf_.data(), old_rkey);
  wc = post_and_wait(w2);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.wr_id, 31u);
  EXPECT_TRUE(all_zero(b_buf_.data(), kSize));
  expect_access_error_event_on_b();
  const Counters after(dev());
  EXPECT_EQ(after["direct_writes"], mid["direct_writes"]);
  EXPECT_GT(after["direct_fallbacks"], mid["direct_fallbacks"]);
}

TEST_F(Direct, rereg_mr__new_translation_and_rights_are_followed) {
  // Move b's region to another buffer (same keys): a write lands in the new one.
  std::vector<uint8_t> other(kSize, 0);
  ASSERT_EQ(ibv_rereg_mr(b_mr_, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, other.data(), kSize,
                         0), 0);
  const Counters before(dev());
  ibv_sge s = sge(a_buf_, a_mr_, 0, 2048);
  ibv_send_wr w = rdma(IBV_WR_RDMA_WRITE, 80, &s, 1, other.data() + 16, b_mr_->rkey);
  ibv_wc wc = post_and_wait(w);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(std::memcmp(other.data() + 16, a_buf_.data(), 2048), 0);
  EXPECT_TRUE(all_zero(b_buf_.data(), kSize));  // not the old buffer
  const Counters mid(dev());
  EXPECT_EQ(mid["direct_writes"] - before["direct_writes"], 1u);
  // Drop remote write: the next write is refused as on the wire.
  ASSERT_EQ(ibv_rereg_mr(b_mr_, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ), 0);
  std::fill(other.begin(), other.end(), 0);
  ibv_send_wr w2 = rdma(IBV_WR_RDMA_WRITE, 81, &s, 1, other.data() + 16, b_mr_->rkey);
  wc = post_and_wait(w2);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_TRUE(all_zero(other.data(), kSize));
  expect_access_error_event_on_b();
  const Counters after(dev());
  EXPECT_EQ(after["direct_writes"], mid["direct_writes"]);
  EXPECT_GT(after["direct_fallbacks"], mid["direct_fallbacks"]);
  ASSERT_EQ(ibv_dereg_mr(b_mr_), 0);  // before `other` goes
  b_mr_ = nullptr;
}

TEST_F(Direct, dereg_then_new_region_in_the_slot__old_rkey_still_refused) {
  const uint32_t old_rkey = b_mr_->rkey;
  ASSERT_EQ(ibv_dereg_mr(b_mr_), 0);
  b_mr_ = ibv_reg_mr(pd_, b_buf_.data(), kSize, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ASSERT_NE(b_mr_, nullptr);
  if (b_mr_->rkey == old_rkey) GTEST_FAIL() << "the new registration reused the key";
  const Counters before(dev());
  ibv_sge s = sge(a_buf_, a_mr_, 0, 64);
  ibv_send_wr w = rdma(IBV_WR_RDMA_WRITE, 40, &s, 1, b_buf_.data(), old_rkey);
  ibv_wc wc = post_and_wait(w);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_TRUE(all_zero(b_buf_.data(), kSize));
  expect_access_error_event_on_b();
  // The new key works, and directly.
  ibv_send_wr ok = rdma(IBV_WR_RDMA_WRITE, 41, &s, 1, b_buf_.data(), b_mr_->rkey);
  ASSERT_EQ(ibv_destroy_qp(a_), 0);  // a is in error after the NAK: a fresh pair
  ASSERT_EQ(ibv_destroy_qp(b_), 0);
  a_ = make_qp();
  b_ = make_qp();
  ASSERT_NE(a_, nullptr);
  ASSERT_NE(b_, nullptr);
  connect_rc(a_, b_->qp_num, {.my_psn = 300, .remote_psn = 400});
  connect_rc(b_, a_->qp_num, {.my_psn = 400, .remote_psn = 300});
  wc = post_and_wait(ok);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(std::memcmp(b_buf_.data(), a_buf_.data(), 64), 0);
  const Counters after(dev());
  EXPECT_GT(after["direct_fallbacks"], before["direct_fallbacks"]);
  EXPECT_EQ(after["direct_writes"] - before["direct_writes"], 1u);
}

}  // namespace
}  // namespace vrnic::abi::test
