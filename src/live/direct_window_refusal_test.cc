// DirectWindow refusals: each case submits false and leaves the target untouched.
#include "live/direct_window_test_support.h"

namespace vrnic::live {
namespace {

// --- refusals (each: submit false, nothing moves) ------------------------------------------

TEST_F(DirectWindowTest, refused__wrong_rkey) {
  publish_defaults();
  expect_write_refused(write64(0x00000705));  // another slot, nothing there
  expect_read_refused(0x00000705);
}

TEST_F(DirectWindowTest, refused__stale_generation_same_slot) {
  publish_defaults();
  expect_write_refused(write64((kKey & ~0xffu) | 0x06));
  expect_write_refused(write64((kKey & ~0xffu) | 0x04));
  expect_read_refused((kKey & ~0xffu) | 0x06);
  // The exact key still works.
  ASSERT_TRUE(req_->submit(write64()));
  EXPECT_EQ(req_->flush(), 1u);
  EXPECT_EQ(std::memcmp(target_.data() + 128, source_.data(), 64), 0);
}

TEST_F(DirectWindowTest, refused__region_republished_with_a_new_generation) {
  publish_defaults();
  resp_->retract_mr(kKey);
  resp_->publish_mr(mr((kKey & ~0xffu) | 0x06));  // slot reused by the next registration
  expect_write_refused(write64(kKey));
}

TEST_F(DirectWindowTest, refused__start_before_the_region) {
  publish_defaults();
  expect_write_refused(op(false, kIova - 1, source_.data(), 2));
  expect_write_refused(op(false, 0, source_.data(), 2));
}

TEST_F(DirectWindowTest, refused__end_past_the_region) {
  publish_defaults();
  expect_write_refused(op(false, kIova + kLen - 1, source_.data(), 2));
  expect_write_refused(op(false, kIova + kLen, source_.data(), 1));
  std::vector<uint8_t> local(2, 0xee);
  EXPECT_FALSE(req_->submit(op(true, kIova + kLen - 1, local.data(), 2)));
  EXPECT_EQ(req_->flush(), 0u);
  EXPECT_EQ(local[0], 0xee);
}

TEST_F(DirectWindowTest, refused__length_that_wraps_around) {
  publish_defaults();
  // remote_addr + length overflows to a value inside the region.
  const uint64_t huge = std::numeric_limits<uint64_t>::max() - 7;  // addr + huge == addr - 8
  expect_write_refused(op(false, kIova + 64, source_.data(), huge));
  expect_write_refused(op(false, kIova + 64, source_.data(), std::numeric_limits<uint64_t>::max()));
}

TEST_F(DirectWindowTest, refused__write_without_remote_write_on_the_region) {
  resp_->publish_mr(mr(kKey, engine::kLocalWrite | engine::kRemoteRead));
  resp_->publish_qp(qp());
  expect_write_refused(write64());
  // A read is allowed by the same region.
  std::vector<uint8_t> local(64, 0xee);
  ASSERT_TRUE(req_->submit(op(true, kIova, local.data(), 64)));
  EXPECT_EQ(req_->flush(), 1u);
  EXPECT_EQ(local[0], 0);
}

TEST_F(DirectWindowTest, refused__read_without_remote_read_on_the_region) {
  resp_->publish_mr(mr(kKey, engine::kLocalWrite | engine::kRemoteWrite));
  resp_->publish_qp(qp());
  expect_read_refused();
  ASSERT_TRUE(req_->submit(write64()));  // a write is allowed
  EXPECT_EQ(req_->flush(), 1u);
}

TEST_F(DirectWindowTest, refused__on_demand_region) {
  resp_->publish_mr(mr(kKey, kAllRemote | engine::kLocalWrite | engine::kOnDemand));
  resp_->publish_qp(qp());
  expect_write_refused(write64());
  expect_read_refused();
}

TEST_F(DirectWindowTest, refused__region_of_another_pd_than_the_qp) {
  resp_->publish_mr(mr(kKey, kAllRemote | engine::kLocalWrite, kPd + 1));
  resp_->publish_qp(qp());
  expect_write_refused(write64());
  expect_read_refused();
}

TEST_F(DirectWindowTest, refused__qp_not_responding) {
  resp_->publish_mr(mr());
  resp_->publish_qp(qp(kAllRemote, /*responds=*/false));  // INIT or ERR
  expect_write_refused(write64());
  expect_read_refused();
  resp_->publish_qp(qp(kAllRemote, true));  // RTR
  ASSERT_TRUE(req_->submit(write64()));
  EXPECT_EQ(req_->flush(), 1u);
  resp_->publish_qp(qp(kAllRemote, false));  // then ERR
  std::memset(target_.data(), 0, kLen);
  expect_write_refused(write64());
}

TEST_F(DirectWindowTest, refused__qp_connected_to_another_qpn) {
  resp_->publish_mr(mr());
  DirectQp q = qp();
  q.dest_qpn = kReqQpn + 1;
  resp_->publish_qp(q);
  expect_write_refused(write64());
  expect_read_refused();
}

TEST_F(DirectWindowTest, refused__qp_connected_to_another_address) {
  resp_->publish_mr(mr());
  DirectQp q = qp();
  q.dest_ip = address(203);
  resp_->publish_qp(q);
  expect_write_refused(write64());
  expect_read_refused();
  q.dest_ip = req_ip_;  // same address, but as IPv6
  q.ipv6 = true;
  resp_->publish_qp(q);
  expect_write_refused(write64());
}

TEST_F(DirectWindowTest, refused__request_for_another_qpn_than_published) {
  publish_defaults();
  DirectOp o = write64();
  o.dest_qpn = kRespQpn + DirectWindow::kQpSlots;  // the same slot, another QP number
  expect_write_refused(o);
  o = write64();
  o.dest_qpn = kRespQpn + 1;  // an empty slot
  expect_write_refused(o);
}

TEST_F(DirectWindowTest, refused__qp_access_flags_without_the_right) {
  resp_->publish_mr(mr());
  resp_->publish_qp(qp(engine::kRemoteRead));
  expect_write_refused(write64());
  resp_->publish_qp(qp(engine::kRemoteWrite));
  expect_read_refused();
  resp_->publish_qp(qp(0));
  expect_write_refused(write64());
  expect_read_refused();
}

TEST_F(DirectWindowTest, refused__retracted_region) {
  publish_defaults();
  ASSERT_TRUE(req_->submit(write64()));
  EXPECT_EQ(req_->flush(), 1u);
  std::memset(target_.data(), 0, kLen);
  resp_->retract_mr(kKey);
  expect_write_refused(write64());
  expect_read_refused();
}

TEST_F(DirectWindowTest, retract__of_another_key_in_the_slot_leaves_the_region) {
  publish_defaults();
  resp_->retract_mr((kKey & ~0xffu) | 0x09);  // same slot, not this region
  ASSERT_TRUE(req_->submit(write64()));
  EXPECT_EQ(req_->flush(), 1u);
  EXPECT_EQ(std::memcmp(target_.data() + 128, source_.data(), 64), 0);
}

TEST_F(DirectWindowTest, refused__retracted_qp) {
  publish_defaults();
  resp_->retract_qp(kRespQpn);
  expect_write_refused(write64());
  expect_read_refused();
}

TEST_F(DirectWindowTest, refused__no_table_at_the_address) {
  publish_defaults();
  DirectOp o = write64();
  o.dest_ip = address(204);  // no window there
  ASSERT_FALSE(file_exists(DirectWindow::path_for(false, o.dest_ip)));
  expect_write_refused(o);
  expect_write_refused(o);  // again (within the retry delay)
}

TEST_F(DirectWindowTest, refused__table_closed_by_its_owner) {
  publish_defaults();
  ASSERT_TRUE(req_->submit(write64()));  // the peer's table is mapped now
  EXPECT_EQ(req_->flush(), 1u);
  std::memset(target_.data(), 0, kLen);
  resp_.reset();  // the responder's device closes
  expect_write_refused(write64());
  expect_write_refused(write64());
  expect_read_refused();
}

TEST_F(DirectWindowTest, table_closed__a_new_owner_at_the_address_is_found_again) {
  publish_defaults();
  ASSERT_TRUE(req_->submit(write64()));
  EXPECT_EQ(req_->flush(), 1u);
  std::memset(target_.data(), 0, kLen);
  resp_.reset();
  expect_write_refused(write64());
  int err = 0;
  resp_.reset(DirectWindow::create(false, resp_ip_, err));
  ASSERT_NE(resp_, nullptr) << std::strerror(err);
  publish_defaults();
  // A missing table is looked for again after a while (100 ms), not on every request.
  bool ok = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!ok && std::chrono::steady_clock::now() < deadline) {
    ok = req_->submit(write64());
    if (!ok) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(ok);
  EXPECT_EQ(req_->flush(), 1u);
  EXPECT_EQ(std::memcmp(target_.data() + 128, source_.data(), 64), 0);
}

TEST_F(DirectWindowTest, refused__closed_while_a_copy_is_queued_then_resubmit_fails) {
  publish_defaults();
  ASSERT_TRUE(req_->submit(write64()));
  resp_->close_table();  // the owner closes with a copy of ours queued on its table
  // Nothing more goes to the closed table; the queued one is still the caller's to flush.
  std::vector<uint8_t> other(64, 0x3c);
  EXPECT_FALSE(req_->submit(op(false, kIova + 1024, other.data(), 64)));
  EXPECT_EQ(req_->queued(), 1u);
  EXPECT_EQ(req_->flush(), 1u);  // the memory is still there: it lands
  EXPECT_EQ(target_[1024], 0);
  EXPECT_FALSE(req_->submit(write64()));
}

}  // namespace
}  // namespace vrnic::live
