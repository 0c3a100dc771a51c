// Shared by the DirectWindow tests: addresses, constants and the two-window fixture.
#pragma once
#include "live/direct_window.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/types.h"

namespace vrnic::live {

using engine::DirectMr;
using engine::DirectOp;
using engine::DirectQp;
using engine::DirectSpan;
using Ip = std::array<uint8_t, 16>;

// Addresses unique to this process (ctest runs test processes side by side, and a window
// created at an address replaces the table another left there).
inline Ip address(uint8_t tag) {
  const uint32_t pid = static_cast<uint32_t>(getpid());
  Ip ip{};
  ip[0] = 127;
  ip[1] = tag;
  ip[2] = uint8_t(pid >> 8);
  ip[3] = uint8_t(pid);
  return ip;
}

inline bool file_exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

inline constexpr uint32_t kAllRemote = engine::kRemoteWrite | engine::kRemoteRead;
inline constexpr uint32_t kPd = 7;
inline constexpr uint32_t kKey = 0x00000305;  // slot 3, generation 5
inline constexpr uint32_t kRespQpn = 0x11, kReqQpn = 0x22;
inline constexpr uint64_t kIova = 0x10000;
inline constexpr size_t kLen = 4096;

// Static facts the header states for peers that map the file.
static_assert(sizeof(DirectWindow::MrSlot) == 64 && sizeof(DirectWindow::QpSlot) == 64);
static_assert((DirectWindow::kMrSlots & (DirectWindow::kMrSlots - 1)) == 0 &&
              (DirectWindow::kQpSlots & (DirectWindow::kQpSlots - 1)) == 0);
static_assert(sizeof(DirectWindow::Header) <= 4096);
static_assert(std::atomic<uint32_t>::is_always_lock_free &&
              std::atomic<uint64_t>::is_always_lock_free);

class DirectWindowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    req_ip_ = address(201);
    resp_ip_ = address(202);
    int err = 0;
    req_.reset(DirectWindow::create(false, req_ip_, err));
    ASSERT_NE(req_, nullptr) << std::strerror(err);
    resp_.reset(DirectWindow::create(false, resp_ip_, err));
    ASSERT_NE(resp_, nullptr) << std::strerror(err);
    target_.assign(kLen, 0);
    source_.resize(kLen);
    for (size_t i = 0; i < kLen; ++i) source_[i] = uint8_t(i * 13 + 5);
  }

  DirectMr mr(uint32_t key = kKey, uint32_t access = kAllRemote | engine::kLocalWrite,
              uint32_t pd = kPd) {
    DirectMr m;
    m.key = key;
    m.pd = pd;
    m.access = access;
    m.iova = kIova;
    m.length = kLen;
    m.host = target_.data();
    return m;
  }
  DirectQp qp(uint32_t access = kAllRemote, bool responds = true) {
    DirectQp q;
    q.qpn = kRespQpn;
    q.pd = kPd;
    q.access = access;
    q.dest_qpn = kReqQpn;
    q.responds = responds;
    q.ipv6 = false;
    q.dest_ip = req_ip_;
    return q;
  }
  void publish_defaults() {
    resp_->publish_mr(mr());
    resp_->publish_qp(qp());
  }
  // An op of one local span (spans_ keeps it alive until the next call).
  DirectOp op(bool read, uint64_t remote_addr, uint8_t* local, uint64_t len,
              uint32_t rkey = kKey, bool transient = false) {
    spans_.assign(1, DirectSpan{local, len, transient});
    return op_spans(read, remote_addr, len, rkey);
  }
  DirectOp op_spans(bool read, uint64_t remote_addr, uint64_t len, uint32_t rkey = kKey) {
    DirectOp o;
    o.read = read;
    o.qpn = kReqQpn;
    o.dest_qpn = kRespQpn;
    o.ipv6 = false;
    o.src_ip = req_ip_;
    o.dest_ip = resp_ip_;
    o.rkey = rkey;
    o.remote_addr = remote_addr;
    o.length = len;
    o.local = std::span<const DirectSpan>(spans_.data(), spans_.size());
    return o;
  }
  bool target_untouched() const {
    return std::all_of(target_.begin(), target_.end(), [](uint8_t b) { return b == 0; });
  }
  // A WRITE of 64 bytes at offset 128 is refused: submit false, nothing queued, the target
  // unchanged after a flush.
  void expect_write_refused(const DirectOp& o) {
    EXPECT_FALSE(req_->submit(o));
    EXPECT_EQ(req_->queued(), 0u);
    EXPECT_EQ(req_->flush(), 0u);
    EXPECT_TRUE(target_untouched());
  }
  DirectOp write64(uint32_t rkey = kKey) {
    return op(false, kIova + 128, source_.data(), 64, rkey);
  }
  // A READ of 64 bytes from offset 128 is refused: the local buffer keeps its bytes.
  void expect_read_refused(uint32_t rkey = kKey) {
    std::vector<uint8_t> local(64, 0xee);
    std::memset(target_.data() + 128, 0x42, 64);
    EXPECT_FALSE(req_->submit(op(true, kIova + 128, local.data(), 64, rkey)));
    EXPECT_EQ(req_->queued(), 0u);
    EXPECT_EQ(req_->flush(), 0u);
    EXPECT_TRUE(std::all_of(local.begin(), local.end(), [](uint8_t b) { return b == 0xee; }));
    std::memset(target_.data() + 128, 0, 64);
  }

  Ip req_ip_{}, resp_ip_{};
  std::unique_ptr<DirectWindow> req_, resp_;
  std::vector<uint8_t> target_, source_;
  std::vector<DirectSpan> spans_;
};

}  // namespace vrnic::live
