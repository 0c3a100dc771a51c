// Direct mode and the READ limit (max_rd_atomic): direct READs held for a batch count as
// outstanding, so a burst of more unsignaled READs than the limit must not leave the rest of
// the queue (and its signaled READ) waiting for a poll that performs nothing.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "engine/ports.h"
#include "engine/test_fabric.h"

namespace vrnic::engine::testing {
namespace {

// A link that allows every access and copies within this process at flush (iova == address
// in these tests, as in test_fabric's buffers).
class FakeLink final : public DirectLink {
 public:
  struct Queued {
    bool read;
    uint8_t* remote;
    std::vector<DirectSpan> local;
  };
  void publish_mr(const DirectMr&) override {}
  void retract_mr(uint32_t) override {}
  void publish_qp(const DirectQp&) override {}
  void retract_qp(uint32_t) override {}
  bool submit(const DirectOp& op) override {
    ops_.push_back({op.read, reinterpret_cast<uint8_t*>(op.remote_addr),
                    std::vector<DirectSpan>(op.local.begin(), op.local.end())});
    return true;
  }
  size_t flush() override {
    for (const Queued& q : ops_) {
      uint8_t* remote = q.remote;
      for (const DirectSpan& s : q.local) {
        if (q.read) std::memcpy(s.addr, remote, s.len);
        else std::memcpy(remote, s.addr, s.len);
        remote += s.len;
      }
    }
    size_t n = ops_.size();
    ops_.clear();
    ++flushes;
    return n;
  }
  size_t queued() const override { return ops_.size(); }
  bool full() const override { return ops_.size() >= 256; }
  int flushes = 0;

 private:
  std::vector<Queued> ops_;
};

TEST(DirectReadLimit, HeldReadsBeyondTheLimitStillComplete) {
  transport::LoopWire wire(1);
  FakeLink link;
  Node a, b;
  for (auto [n, last, direct] : {std::tuple{&a, 1, true}, std::tuple{&b, 2, false}}) {
    std::array<uint8_t, 16> addr{10, 0, 0, static_cast<uint8_t>(last)};
    n->port = &wire.add_port(addr);
    n->gid.raw = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, static_cast<uint8_t>(last)};
    DeviceConfig cfg;
    cfg.gid = n->gid;
    if (direct) cfg.direct = &link;
    n->dev = std::make_unique<Device>(cfg, *n->port, wire.clock(), n->sink);
    Device* dev = n->dev.get();
    n->port->set_receiver([dev](std::span<const WirePacket> p) { dev->receive(p); });
    n->pd = dev->alloc_pd();
    uint32_t cqe = 1024;
    n->cq = dev->create_cq(cqe, nullptr);
  }
  Qp* qa = a.create_qp();
  Qp* qb = b.create_qp();
  ConnectOptions o;
  o.max_rd_atomic = 16;
  Fabric::connect(a, qa, b, qb, o);

  constexpr int kReads = 40;  // 2.5 x the limit; only the last is signaled
  constexpr size_t kLen = 64;
  Buffer& remote = b.reg(kReads * kLen);
  Buffer& local = a.reg(kReads * kLen);
  fill_random(remote.data(), remote.bytes.size(), 7);
  std::vector<Sge> sges(kReads);
  std::vector<SendWr> wrs(kReads);
  for (int i = 0; i < kReads; ++i) {
    sges[i] = {local.addr() + i * kLen, static_cast<uint32_t>(kLen), local.mr.lkey};
    wrs[i] = wr_of(WrOpcode::kRdmaRead, i, &sges[i], remote.addr() + i * kLen, remote.mr.rkey);
    wrs[i].send_flags = i == kReads - 1 ? kSendSignaled : 0;
  }
  // As LiveNic does for a burst: copies are held during the post, the hold ends after it
  // without a flush, and the program's poll performs what a signaled copy waits for.
  a.dev->set_direct_hold(true);
  size_t bad = SIZE_MAX;
  ASSERT_EQ(a.dev->post_send(qa, wrs.data(), kReads, &bad), 0);
  a.dev->set_direct_hold(false);
  std::vector<WorkCompletion> wcs = a.poll();
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[0].wr_id, static_cast<uint64_t>(kReads - 1));
  EXPECT_EQ(std::memcmp(local.data(), remote.data(), kReads * kLen), 0);
  EXPECT_EQ(a.ctr().direct_reads, static_cast<uint64_t>(kReads));
  EXPECT_EQ(a.ctr().tx_read_request, 0u);  // nothing went on the wire
  EXPECT_GE(link.flushes, 2);               // the limit made it perform the first 16 early
}

}  // namespace
}  // namespace vrnic::engine::testing
