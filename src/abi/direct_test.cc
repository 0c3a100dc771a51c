// Direct mode through the verbs (VRNIC_DIRECT=1, set in main): bytes, CQEs, counters, ordering.
#include "abi/direct_test_support.h"

namespace vrnic::abi::test {
namespace {

TEST_F(Direct, write__lands_byte_exact_and_completes_without_packets) {
  const Counters before(dev());
  for (size_t len : {size_t(1), size_t(1000), size_t(4097), kSize / 2}) {
    SCOPED_TRACE(len);
    std::fill(b_buf_.begin(), b_buf_.end(), 0);
    ibv_sge s = sge(a_buf_, a_mr_, 3, len);
    ibv_send_wr w = rdma(IBV_WR_RDMA_WRITE, 0x1000 + len, &s, 1, b_buf_.data() + 5, b_mr_->rkey);
    const ibv_wc wc = post_and_wait(w);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    EXPECT_EQ(wc.opcode, IBV_WC_RDMA_WRITE);
    EXPECT_EQ(wc.wr_id, 0x1000 + len);
    EXPECT_EQ(wc.qp_num, a_->qp_num);
    EXPECT_EQ(std::memcmp(b_buf_.data() + 5, a_buf_.data() + 3, len), 0);
    EXPECT_TRUE(all_zero(b_buf_.data(), 5));
    EXPECT_EQ(b_buf_[5 + len], 0);  // nothing past the message
  }
  const Counters after(dev());
  EXPECT_EQ(after["direct_writes"] - before["direct_writes"], 4u);
  EXPECT_EQ(after["direct_bytes"] - before["direct_bytes"], 1 + 1000 + 4097 + kSize / 2);
  EXPECT_EQ(after["direct_fallbacks"], before["direct_fallbacks"]);
  EXPECT_EQ(after["tx_write"], before["tx_write"]);
  EXPECT_EQ(after["rx_write"], before["rx_write"]);
  EXPECT_EQ(after["cqe_ok"] - before["cqe_ok"], 4u);
}

TEST_F(Direct, read__comes_back_byte_exact_and_completes_without_packets) {
  for (size_t i = 0; i < kSize; ++i) b_buf_[i] = uint8_t(i * 7 + 3);
  std::fill(a_buf_.begin(), a_buf_.end(), 0);
  const Counters before(dev());
  for (size_t len : {size_t(1), size_t(1025), kSize / 4}) {
    SCOPED_TRACE(len);
    ibv_sge s = sge(a_buf_, a_mr_, 11, len);
    ibv_send_wr w = rdma(IBV_WR_RDMA_READ, 0x2000 + len, &s, 1, b_buf_.data() + 9, b_mr_->rkey);
    const ibv_wc wc = post_and_wait(w);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    EXPECT_EQ(wc.opcode, IBV_WC_RDMA_READ);
    EXPECT_EQ(wc.byte_len, len);
    EXPECT_EQ(wc.wr_id, 0x2000 + len);
    EXPECT_EQ(std::memcmp(a_buf_.data() + 11, b_buf_.data() + 9, len), 0);
    EXPECT_EQ(a_buf_[11 + len], 0);
    EXPECT_TRUE(all_zero(a_buf_.data(), 11));
  }
  const Counters after(dev());
  EXPECT_EQ(after["direct_reads"] - before["direct_reads"], 3u);
  EXPECT_EQ(after["direct_writes"], before["direct_writes"]);
  EXPECT_EQ(after["tx_read_request"], before["tx_read_request"]);
  EXPECT_EQ(after["tx_read_response"], before["tx_read_response"]);
  EXPECT_EQ(after["direct_fallbacks"], before["direct_fallbacks"]);
}

TEST_F(Direct, sge_list__write_gathers_read_scatters) {
  ibv_sge s[4] = {sge(a_buf_, a_mr_, 0, 1), sge(a_buf_, a_mr_, 5000, 999),
                  sge(a_buf_, a_mr_, 100, 0), sge(a_buf_, a_mr_, 70000, 4096)};
  const Counters before(dev());
  ibv_send_wr w = rdma(IBV_WR_RDMA_WRITE, 41, s, 4, b_buf_.data() + 64, b_mr_->rkey);
  ibv_wc wc = post_and_wait(w);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(wc.wr_id, 41u);
  const uint8_t* t = b_buf_.data() + 64;
  EXPECT_EQ(t[0], a_buf_[0]);
  EXPECT_EQ(std::memcmp(t + 1, a_buf_.data() + 5000, 999), 0);
  EXPECT_EQ(std::memcmp(t + 1000, a_buf_.data() + 70000, 4096), 0);
  EXPECT_EQ(t[5096], 0);

  // Read the 5096 bytes back into three pieces elsewhere in a's buffer.
  std::fill(a_buf_.begin() + 200000, a_buf_.begin() + 300000, 0);
  ibv_sge r[3] = {sge(a_buf_, a_mr_, 200000, 7), sge(a_buf_, a_mr_, 250000, 4000),
                  sge(a_buf_, a_mr_, 210000, 1089)};
  ibv_send_wr rw = rdma(IBV_WR_RDMA_READ, 42, r, 3, t, b_mr_->rkey);
  wc = post_and_wait(rw);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(wc.byte_len, 5096u);
  EXPECT_EQ(std::memcmp(a_buf_.data() + 200000, t, 7), 0);
  EXPECT_EQ(std::memcmp(a_buf_.data() + 250000, t + 7, 4000), 0);
  EXPECT_EQ(std::memcmp(a_buf_.data() + 210000, t + 4007, 1089), 0);
  EXPECT_EQ(a_buf_[200007], 0);
  EXPECT_EQ(a_buf_[254000], 0);
  EXPECT_EQ(a_buf_[211089], 0);
  const Counters after(dev());
  EXPECT_EQ(after["direct_writes"] - before["direct_writes"], 1u);
  EXPECT_EQ(after["direct_reads"] - before["direct_reads"], 1u);
  EXPECT_EQ(after["direct_bytes"] - before["direct_bytes"], 2 * 5096u);
  EXPECT_EQ(after["tx_write"] + after["tx_read_request"],
            before["tx_write"] + before["tx_read_request"]);
}

TEST_F(Direct, inline_write__data_taken_at_post) {
  std::vector<uint8_t> src(48);
  for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(0xa0 + i);
  const std::vector<uint8_t> expect = src;
  ibv_sge s{reinterpret_cast<uint64_t>(src.data()), uint32_t(src.size()), 0};  // no lkey needed
  const Counters before(dev());
  ibv_send_wr w = rdma(IBV_WR_RDMA_WRITE, 51, &s, 1, b_buf_.data() + 10, b_mr_->rkey);
  w.send_flags |= IBV_SEND_INLINE;
  post(w);
  std::fill(src.begin(), src.end(), 0xee);  // the WR's buffer may be reused once posted
  auto wcs = wait(1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS) << ibv_wc_status_str(wcs[0].status);
  EXPECT_EQ(wcs[0].opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(wcs[0].wr_id, 51u);
  EXPECT_EQ(std::memcmp(b_buf_.data() + 10, expect.data(), expect.size()), 0);
  EXPECT_EQ(b_buf_[58], 0);
  EXPECT_EQ(b_buf_[9], 0);
  const Counters after(dev());
  EXPECT_EQ(after["direct_writes"] - before["direct_writes"], 1u);
  EXPECT_EQ(after["tx_write"], before["tx_write"]);
}

TEST_F(Direct, unsignaled_writes_then_a_signaled_one__one_cqe_all_bytes) {
  constexpr int kN = 20;
  std::vector<ibv_sge> s(kN);
  std::vector<ibv_send_wr> w(kN);
  for (int i = 0; i < kN; ++i) {
    s[i] = sge(a_buf_, a_mr_, 1000 * i, 777);
    w[i] = rdma(IBV_WR_RDMA_WRITE, 600 + i, &s[i], 1, b_buf_.data() + 2000 * i, b_mr_->rkey,
                /*signaled=*/i == kN - 1);
    if (i + 1 < kN) w[i].next = &w[i + 1];
  }
  const Counters before(dev());
  post(w[0]);
  auto wcs = wait(1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS) << ibv_wc_status_str(wcs[0].status);
  EXPECT_EQ(wcs[0].wr_id, uint64_t(600 + kN - 1));
  EXPECT_EQ(wcs[0].opcode, IBV_WC_RDMA_WRITE);
  expect_no_more_cqes();
  for (int i = 0; i < kN; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(std::memcmp(b_buf_.data() + 2000 * i, a_buf_.data() + 1000 * i, 777), 0);
    EXPECT_EQ(b_buf_[2000 * i + 777], 0);
  }
  const Counters after(dev());
  EXPECT_EQ(after["direct_writes"] - before["direct_writes"], uint64_t(kN));
  EXPECT_EQ(after["tx_write"], before["tx_write"]);
  EXPECT_EQ(after["cqe_ok"] - before["cqe_ok"], 1u);
}

TEST_F(Direct, completion_event__a_program_that_sleeps_on_the_channel_gets_it) {
  ASSERT_EQ(ibv_req_notify_cq(cq_, 0), 0);
  const Counters before(dev());
  ibv_sge s = sge(a_buf_, a_mr_, 0, 8192);
  ibv_send_wr w = rdma(IBV_WR_RDMA_WRITE, 55, &s, 1, b_buf_.data(), b_mr_->rkey);
  post(w);
  // No poll: the program sleeps until the event (the copy must not wait for its next call).
  pollfd p{channel_->fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 5000), 1);
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  ASSERT_EQ(ibv_get_cq_event(channel_, &ev_cq, &ev_ctx), 0);
  EXPECT_EQ(ev_cq, cq_);
  EXPECT_EQ(ev_ctx, this);
  ibv_ack_cq_events(cq_, 1);
  EXPECT_EQ(std::memcmp(b_buf_.data(), a_buf_.data(), 8192), 0);
  ibv_wc wc{};
  ASSERT_EQ(ibv_poll_cq(cq_, 1, &wc), 1);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.wr_id, 55u);
  const Counters after(dev());
  EXPECT_EQ(after["direct_writes"] - before["direct_writes"], 1u);
}

// --- what direct mode does not carry goes on the wire, in order ------------------------------

TEST_F(Direct, write_with_imm__on_the_wire_and_delivered) {
  ibv_sge rs = sge(b_buf_, b_mr_, kSize - 64, 64);  // a receive WQE consumed by the immediate
  ibv_recv_wr rwr{};
  rwr.wr_id = 77;
  rwr.sg_list = &rs;
  rwr.num_sge = 1;
  ibv_recv_wr* bad_r = nullptr;
  ASSERT_EQ(ibv_post_recv(b_, &rwr, &bad_r), 0);
  const Counters before(dev());
  ibv_sge s = sge(a_buf_, a_mr_, 0, 3000);
  ibv_send_wr w = rdma(IBV_WR_RDMA_WRITE_WITH_IMM, 78, &s, 1, b_buf_.data() + 100, b_mr_->rkey);
  w.imm_data = htobe32(0xfeedf00d);
  post(w);
  auto wcs = wait(2);
  ASSERT_EQ(wcs.size(), 2u);
  bool saw_recv = false, saw_send = false;
  for (const ibv_wc& wc : wcs) {
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    if (wc.qp_num == b_->qp_num) {
      saw_recv = true;
      EXPECT_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
      EXPECT_EQ(wc.wr_id, 77u);
      EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
      EXPECT_EQ(be32toh(wc.imm_data), 0xfeedf00du);
    } else {
      saw_send = true;
      EXPECT_EQ(wc.opcode, IBV_WC_RDMA_WRITE);
      EXPECT_EQ(wc.wr_id, 78u);
    }
  }
  EXPECT_TRUE(saw_recv && saw_send);
  EXPECT_EQ(std::memcmp(b_buf_.data() + 100, a_buf_.data(), 3000), 0);
  const Counters after(dev());
  EXPECT_GT(after["tx_write"], before["tx_write"]);
  EXPECT_EQ(after["direct_writes"], before["direct_writes"]);
}

TEST_F(Direct, write_then_send__the_receiver_sees_the_send_after_the_bytes) {
  ibv_sge rs = sge(b_buf_, b_mr_, kSize - 4096, 4096);
  ibv_recv_wr rwr{};
  rwr.wr_id = 90;
  rwr.sg_list = &rs;
  rwr.num_sge = 1;
  ibv_recv_wr* bad_r = nullptr;
  ASSERT_EQ(ibv_post_recv(b_, &rwr, &bad_r), 0);
  const Counters before(dev());
  constexpr size_t kWrite = 256 * 1024;
  ibv_sge ws = sge(a_buf_, a_mr_, 0, kWrite);
  ibv_send_wr w = rdma(IBV_WR_RDMA_WRITE, 91, &ws, 1, b_buf_.data(), b_mr_->rkey,
                       /*signaled=*/false);
  ibv_sge ss = sge(a_buf_, a_mr_, 500000, 100);
  ibv_send_wr send{};
  send.wr_id = 92;
  send.opcode = IBV_WR_SEND;
  send.send_flags = IBV_SEND_SIGNALED;
  send.sg_list = &ss;
  send.num_sge = 1;
  w.next = &send;
  post(w);
  bool saw_recv = false, saw_send = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!(saw_recv && saw_send) && std::chrono::steady_clock::now() < deadline) {
    ibv_wc wc;
    if (ibv_poll_cq(cq_, 1, &wc) != 1) continue;
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    if (wc.opcode == IBV_WC_RECV) {
      saw_recv = true;
      EXPECT_EQ(wc.wr_id, 90u);
      EXPECT_EQ(wc.byte_len, 100u);
      // The receiver learns of the SEND: the WRITE before it is wholly in place.
      EXPECT_EQ(std::memcmp(b_buf_.data(), a_buf_.data(), kWrite), 0);
      EXPECT_EQ(std::memcmp(b_buf_.data() + kSize - 4096, a_buf_.data() + 500000, 100), 0);
    } else {
      saw_send = true;
      EXPECT_EQ(wc.opcode, IBV_WC_SEND);
      EXPECT_EQ(wc.wr_id, 92u);
    }
  }
  EXPECT_TRUE(saw_recv);
  EXPECT_TRUE(saw_send);
  const Counters after(dev());
  EXPECT_EQ(after["direct_writes"] - before["direct_writes"], 1u);  // the WRITE went direct
  EXPECT_EQ(after["tx_write"], before["tx_write"]);
  EXPECT_EQ(after["tx_send"] - before["tx_send"], 1u);  // the SEND on the wire
  expect_no_more_cqes();
}

TEST_F(Direct, write_then_atomic__the_atomic_sees_the_written_value) {
  uint8_t* target = b_buf_.data() + 4096;
  const uint64_t value = 0x0102030405060708;
  std::memcpy(a_buf_.data(), &value, 8);
  std::memset(a_buf_.data() + 64, 0, 8);
  const Counters before(dev());
  ibv_sge ws = sge(a_buf_, a_mr_, 0, 8);
  ibv_send_wr w = rdma(IBV_WR_RDMA_WRITE, 60, &ws, 1, target, b_mr_->rkey, /*signaled=*/false);
  ibv_sge as = sge(a_buf_, a_mr_, 64, 8);
  ibv_send_wr add{};
  add.wr_id = 61;
  add.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
  add.send_flags = IBV_SEND_SIGNALED;
  add.sg_list = &as;
  add.num_sge = 1;
  add.wr.atomic.remote_addr = reinterpret_cast<uint64_t>(target);
  add.wr.atomic.rkey = b_mr_->rkey;
  add.wr.atomic.compare_add = 0x10;
  w.next = &add;
  post(w);
  auto wcs = wait(1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS) << ibv_wc_status_str(wcs[0].status);
  EXPECT_EQ(wcs[0].opcode, IBV_WC_FETCH_ADD);
  uint64_t fetched = 0, now = 0;
  std::memcpy(&fetched, a_buf_.data() + 64, 8);
  std::memcpy(&now, target, 8);
  EXPECT_EQ(fetched, value);  // the WRITE before it was in place
  EXPECT_EQ(now, value + 0x10);
  const Counters after(dev());
  EXPECT_EQ(after["direct_writes"] - before["direct_writes"], 1u);
  EXPECT_EQ(after["tx_atomic"] - before["tx_atomic"], 1u);
}

TEST_F(Direct, wire_write_then_read__the_read_sees_it) {
  ibv_sge rs = sge(b_buf_, b_mr_, kSize - 64, 64);
  ibv_recv_wr rwr{};
  rwr.wr_id = 70;
  rwr.sg_list = &rs;
  rwr.num_sge = 1;
  ibv_recv_wr* bad_r = nullptr;
  ASSERT_EQ(ibv_post_recv(b_, &rwr, &bad_r), 0);
  ibv_sge ws = sge(a_buf_, a_mr_, 0, 20000);
  ibv_send_wr w = rdma(IBV_WR_RDMA_WRITE_WITH_IMM, 71, &ws, 1, b_buf_.data() + 8192,
                       b_mr_->rkey, /*signaled=*/false);
  std::fill(a_buf_.begin() + 500000, a_buf_.begin() + 530000, 0);
  ibv_sge rd = sge(a_buf_, a_mr_, 500000, 20000);
  ibv_send_wr r = rdma(IBV_WR_RDMA_READ, 72, &rd, 1, b_buf_.data() + 8192, b_mr_->rkey);
  w.next = &r;
  post(w);
  auto wcs = wait(2);  // b's receive (the immediate) and a's READ
  ASSERT_EQ(wcs.size(), 2u);
  for (const ibv_wc& wc : wcs) {
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    if (wc.qp_num == a_->qp_num) {
      EXPECT_EQ(wc.opcode, IBV_WC_RDMA_READ);
      EXPECT_EQ(wc.byte_len, 20000u);
    }
  }
  EXPECT_EQ(std::memcmp(a_buf_.data() + 500000, a_buf_.data(), 20000), 0);
  EXPECT_EQ(std::memcmp(b_buf_.data() + 8192, a_buf_.data(), 20000), 0);
}

}  // namespace
}  // namespace vrnic::abi::test

int main(int argc, char** argv) {
  // Before any verb opens the device (it reads the variable then).
  setenv("VRNIC_DIRECT", "1", 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
