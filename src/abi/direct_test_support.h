// Shared by the direct-mode verbs tests: the counters file reader and the Direct fixture.
#pragma once
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "abi/verbs_test.h"
#include "live/counters_file.h"

namespace vrnic::abi::test {

// The device's counters, read from its counters file (/dev/shm/vrnic.<pid>.vrnic0).
class Counters {
 public:
  explicit Counters(const std::string& device) {
    live::CountersSnapshot s;
    ok_ = live::read_counters_file(live::counters_path(getpid(), device), s);
    values_ = std::move(s.counters);
  }
  bool ok() const { return ok_; }
  uint64_t operator[](const std::string& name) const {
    for (const auto& [n, v] : values_)
      if (n == name) return v;
    ADD_FAILURE() << "no counter " << name;
    return 0;
  }

 private:
  bool ok_ = false;
  std::vector<std::pair<std::string, uint64_t>> values_;
};

// Loopback's two connected RC QPs (verbs_test.h), with direct mode on.
class Direct : public Loopback {
 protected:
  void SetUp() override {
    Loopback::SetUp();
    if (HasFatalFailure()) return;
    for (size_t i = 0; i < kSize; ++i) a_buf_[i] = uint8_t(i * 31 + (i >> 9) + 1);
    ASSERT_TRUE(Counters(dev()).ok());
  }
  void TearDown() override {
    if (c_mr_) {
      EXPECT_EQ(ibv_dereg_mr(c_mr_), 0);
    }
    Loopback::TearDown();
  }

  std::string dev() const { return ibv_get_device_name(list_[0]); }

  // No completion shows up for a while.
  void expect_no_more_cqes() {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    while (std::chrono::steady_clock::now() < until) {
      ibv_wc wc;
      const int got = ibv_poll_cq(cq_, 1, &wc);
      ASSERT_EQ(got, 0) << "unexpected CQE wr_id " << wc.wr_id << " status "
                        << ibv_wc_status_str(wc.status);
    }
  }

  ibv_send_wr rdma(ibv_wr_opcode opcode, uint64_t wr_id, ibv_sge* s, int nsge,
                   const uint8_t* remote, uint32_t rkey, bool signaled = true) {
    ibv_send_wr w{};
    w.wr_id = wr_id;
    w.opcode = opcode;
    w.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
    w.sg_list = s;
    w.num_sge = nsge;
    w.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(remote);
    w.wr.rdma.rkey = rkey;
    return w;
  }
  void post(ibv_send_wr& w) {
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_send(a_, &w, &bad), 0);
    EXPECT_EQ(bad, nullptr);
  }
  // One signaled WR posted on a, its one CQE.
  ibv_wc post_and_wait(ibv_send_wr& w) {
    post(w);
    auto wcs = wait(1);
    EXPECT_EQ(wcs.size(), 1u);
    return wcs.empty() ? ibv_wc{} : wcs[0];
  }
  // The responder QP b reports the access violation as an affiliated asynchronous event
  // (consumed here: ibv_destroy_qp would wait for an event read but not acknowledged).
  void expect_access_error_event_on_b() {
    pollfd p{ctx_->async_fd, POLLIN, 0};
    ASSERT_EQ(poll(&p, 1, 5000), 1);
    ibv_async_event ev{};
    ASSERT_EQ(ibv_get_async_event(ctx_, &ev), 0);
    EXPECT_EQ(ev.event_type, IBV_EVENT_QP_ACCESS_ERR) << ibv_event_type_str(ev.event_type);
    EXPECT_EQ(ev.element.qp, b_);
    ibv_ack_async_event(&ev);
  }
  static bool all_zero(const uint8_t* p, size_t n) {
    for (size_t i = 0; i < n; ++i)
      if (p[i] != 0) return false;
    return true;
  }

  ibv_mr* c_mr_ = nullptr;
};

}  // namespace vrnic::abi::test
