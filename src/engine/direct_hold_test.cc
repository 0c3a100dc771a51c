// Direct mode in the engine with a stand-in link: copies held for a batch never leave the
// rest of the queue waiting for a poll that performs nothing (the READ limit, a fence, a bind,
// wire work behind them), and a held unsignaled copy is performed within kDirectHoldMaxNs.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "engine/ports.h"
#include "engine/requester.h"
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

// Node a sends through the fake link, node b is the responder on the loop wire.
struct DirectPair {
  transport::LoopWire wire{1};
  FakeLink link;
  Node a, b;
  Qp* qa = nullptr;
  Qp* qb = nullptr;
  DirectPair() {
    for (auto [n, last, direct] : {std::tuple{&a, 1, true}, std::tuple{&b, 2, false}}) {
      std::array<uint8_t, 16> addr{10, 0, 0, static_cast<uint8_t>(last)};
      n->port = &wire.add_port(addr);
      n->gid.raw = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, static_cast<uint8_t>(last)};
      DeviceConfig cfg;
      cfg.gid = n->gid;
      if (direct) cfg.direct = &link;
      n->dev = std::make_unique<Device>(cfg, *n->port, wire.clock(), n->memory, n->sink);
      Device* dev = n->dev.get();
      n->port->set_receiver([dev](std::span<const WirePacket> p) { dev->receive(p); });
      n->pd = dev->alloc_pd();
      uint32_t cqe = 1024;
      n->cq = dev->create_cq(cqe, nullptr);
    }
    qa = a.create_qp();
    qb = b.create_qp();
    ConnectOptions o;
    o.max_rd_atomic = 16;
    Fabric::connect(a, qa, b, qb, o);
  }
};

TEST(DirectReadLimit, post_send__held_reads_beyond_the_limit_still_complete) {
  DirectPair p;
  FakeLink& link = p.link;
  Node& a = p.a;
  Node& b = p.b;
  Qp* qa = p.qa;
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
    wrs[i].send_flags = i == kReads - 1 ? uint32_t{kSendSignaled} : 0u;
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

// A WQE that must go on the wire behind held copies (a SEND after an unsignaled WRITE)
// performs them at once, in order, without waiting for a poll: the program may be polling
// for that SEND's completion only.
TEST(DirectHold, post_send__wire_work_behind_held_copies_performs_them_first) {
  DirectPair p;
  Buffer& target = p.b.reg(256);
  Buffer& src = p.a.reg(256);
  Buffer& rbuf = p.b.reg(64);
  fill_random(src.data(), 256, 3);
  Sge rsge{rbuf.addr(), 64, rbuf.mr.lkey};
  RecvWr rwr;
  rwr.wr_id = 77;
  rwr.sg_list = &rsge;
  rwr.num_sge = 1;
  size_t bad = SIZE_MAX;
  ASSERT_EQ(p.b.dev->post_recv(p.qb, &rwr, 1, &bad), 0);
  Sge wsge{src.addr(), 256, src.mr.lkey};
  Sge ssge{src.addr(), 8, src.mr.lkey};
  SendWr wrs[2] = {wr_of(WrOpcode::kRdmaWrite, 1, &wsge, target.addr(), target.mr.rkey),
                   wr_of(WrOpcode::kSend, 2, &ssge, 0, 0)};
  wrs[0].send_flags = 0;  // unsignaled: no poll would perform it
  wrs[1].send_flags = kSendSignaled;
  p.a.dev->set_direct_hold(true);
  ASSERT_EQ(p.a.dev->post_send(p.qa, wrs, 2, &bad), 0);
  p.a.dev->set_direct_hold(false);
  EXPECT_EQ(p.link.flushes, 1);       // the WRITE was performed during the post
  EXPECT_EQ(p.link.queued(), 0u);
  EXPECT_EQ(p.a.ctr().tx_send, 1u);   // and the SEND left behind it
  EXPECT_EQ(std::memcmp(target.data(), src.data(), 256), 0);
  p.wire.deliver_all();
  std::vector<WorkCompletion> rw = p.b.poll();
  ASSERT_EQ(rw.size(), 1u);
  EXPECT_EQ(rw[0].wr_id, 77u);
  EXPECT_EQ(rw[0].status, WcStatus::kSuccess);
  std::vector<WorkCompletion> sw = p.a.poll();
  ASSERT_EQ(sw.size(), 1u);
  EXPECT_EQ(sw[0].wr_id, 2u);
  EXPECT_EQ(p.a.ctr().direct_writes, 1u);
  EXPECT_EQ(p.a.ctr().tx_write, 0u);
}

// An unsignaled copy held for a burst is not performed by a poll at once (the batching),
// but a poll performs it once it has waited kDirectHoldMaxNs: a program polling for
// something else (a reply that needs this data at the peer) is never stuck behind it.
TEST(DirectHold, poll_cq__unsignaled_held_copy_is_performed_within_the_bound) {
  DirectPair p;
  Buffer& target = p.b.reg(64);
  Buffer& src = p.a.reg(64);
  fill_random(src.data(), 64, 5);
  Sge sge{src.addr(), 64, src.mr.lkey};
  SendWr wr = wr_of(WrOpcode::kRdmaWrite, 1, &sge, target.addr(), target.mr.rkey);
  wr.send_flags = 0;
  size_t bad = SIZE_MAX;
  p.a.dev->set_direct_hold(true);
  ASSERT_EQ(p.a.dev->post_send(p.qa, &wr, 1, &bad), 0);
  p.a.dev->set_direct_hold(false);
  EXPECT_TRUE(p.a.poll().empty());
  EXPECT_EQ(p.link.queued(), 1u);  // still held: the burst may go on
  EXPECT_TRUE(p.a.dev->has_pending_tx());  // so the runtime keeps servicing the device
  p.wire.clock().advance(kDirectHoldMaxNs);
  EXPECT_TRUE(p.a.poll().empty());  // unsignaled: performed, but no CQE
  EXPECT_EQ(p.link.queued(), 0u);
  EXPECT_EQ(std::memcmp(target.data(), src.data(), 64), 0);
  EXPECT_EQ(p.a.ctr().direct_writes, 1u);
}

}  // namespace
}  // namespace vrnic::engine::testing
