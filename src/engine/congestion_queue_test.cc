// DCQCN against a congested switch queue, in virtual time: a sender at 25 Gb/s into a
// 10 Gb/s bottleneck whose switch marks CE as RED does (the DCQCN paper's Kmin 5 KB, Kmax
// 200 KB, Pmax 1 %). With congestion control the queue stays short; without, it holds the
// sender's whole window.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "engine/device.h"
#include "engine/test_host_memory.h"
#include "transport/loop/loop_wire.h"

namespace vrnic::engine::testing {
namespace {

constexpr double kLineBps = 25e9, kBottleneckBps = 10e9;
constexpr uint64_t kKmin = 5'000, kKmax = 200'000;  // the switch's RED marking
constexpr double kPmax = 0.01;
constexpr uint64_t kHopNs = 1000, kReturnNs = 2000;
constexpr size_t kOverhead = 14 + 4 + 20 + 8;  // Ethernet + FCS, IPv4, UDP around a packet
// The queue is judged after the first window's burst (sent before any CNP could come back).
constexpr uint64_t kSettleNs = 5'000'000;

struct Frame {
  WirePacket pkt;  // data points into bytes
  std::vector<uint8_t> bytes;
  uint64_t at = 0;  // when it reaches the next stage
};

uint64_t serialize_ns(size_t bytes, double bps) {
  return static_cast<uint64_t>((bytes + kOverhead) * 8e9 / bps);
}

// The two links and the switch between a sender (a) and a receiver (b).
class Bottleneck {
 public:
  struct Port : PacketPort {
    Bottleneck* net = nullptr;
    bool sender = false;
    void send(std::span<const WirePacket> batch) override {
      for (const WirePacket& p : batch) net->take(p, sender);
    }
    uint16_t source_port_for(uint32_t qpn) override { return 0xc000 | (qpn & 0x3fff); }
  };

  transport::VirtualClock clock;
  Port a_port, b_port;
  std::deque<Frame> to_switch, to_b, to_a;
  std::deque<Frame> queue;  // the switch's egress queue; Frame::at: when it leaves
  uint64_t queue_bytes = 0, nic_free = 0, switch_free = 0, marked = 0;
  uint64_t rng = 0x9e3779b97f4a7c15ull;  // splitmix64 state: the same marks every run
  std::vector<std::pair<uint64_t, uint64_t>> samples;  // (time, queue bytes) at departures

  Bottleneck() {
    a_port.net = b_port.net = this;
    a_port.sender = true;
  }

  static Frame copy(const WirePacket& p, uint64_t at) {
    Frame f{p, std::vector<uint8_t>(p.data.begin(), p.data.end()), at};
    return f;
  }
  // The sender's NIC puts packets on its 25 Gb/s link in order; the receiver's go straight
  // back (ACKs and CNPs: no queue on the way back).
  void take(const WirePacket& p, bool from_sender) {
    const uint64_t now = clock.now_ns();
    if (!from_sender) {
      to_a.push_back(copy(p, now + kReturnNs));
      return;
    }
    nic_free = std::max(nic_free, now) + serialize_ns(p.data.size(), kLineBps);
    to_switch.push_back(copy(p, nic_free));
  }
  double uniform() {
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return static_cast<double>((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
  }
  // RED: no mark up to Kmin, then with a probability rising to Pmax at Kmax, always above.
  bool mark(uint64_t q) {
    if (q <= kKmin) return false;
    if (q > kKmax) return true;
    return uniform() < kPmax * static_cast<double>(q - kKmin) / (kKmax - kKmin);
  }
  // A packet reaches the switch: queued behind the others for the 10 Gb/s link.
  void arrive(Frame f) {
    switch_free = std::max(switch_free, f.at) + serialize_ns(f.bytes.size(), kBottleneckBps);
    f.at = switch_free;
    queue_bytes += f.bytes.size();
    queue.push_back(std::move(f));
  }
  // The head of the queue leaves: marked CE if it is ECN-capable and RED says so for the
  // queue it leaves behind (marking at dequeue: the mark does not wait out the queue).
  void depart() {
    Frame f = std::move(queue.front());
    queue.pop_front();
    queue_bytes -= f.bytes.size();
    samples.emplace_back(f.at, queue_bytes);
    if ((f.pkt.tos & 0x3) != 0 && mark(queue_bytes)) {
      f.pkt.tos |= 0x3;
      ++marked;
    }
    f.at += kHopNs;
    to_b.push_back(std::move(f));
  }
};

struct Side {
  testing::FakeHostMemory memory;
  struct : EventSink {
    void on_cq_event(Cq*, void*) override {}
    void on_async_event(const AsyncEvent&) override {}
  } sink;
  std::unique_ptr<Device> dev;
  Pd* pd = nullptr;
  Cq* cq = nullptr;
  Qp* qp = nullptr;
  std::vector<uint8_t> buf;
  MrInfo mr;
};

struct Result {
  uint64_t queue_max_late = 0, queue_mean_late = 0, marked = 0, cnps = 0, completed = 0;
  uint64_t done_ns = 0;  // when the last WRITE completed
};

Gid gid_of(uint8_t last) {
  Gid g;
  g.raw = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, last};
  return g;
}

void open(Side& s, Bottleneck& net, PacketPort& port, uint8_t last, bool cc) {
  DeviceConfig cfg;
  cfg.gid = gid_of(last);
  cfg.cc.enabled = cc;
  cfg.cc.pace_at_line_rate = true;  // a NIC on a link: it never sends faster than 25 Gb/s
  cfg.cc.pacer_burst_ns = 0;        // in virtual time nobody wakes late
  cfg.send_window_bytes = 4 << 20;  // 1024 packets of 4 KiB in flight
  s.dev = std::make_unique<Device>(cfg, port, net.clock, s.memory, s.sink);
  s.pd = s.dev->alloc_pd();
  uint32_t cqe = 4096;
  s.cq = s.dev->create_cq(cqe, nullptr);
  QpInitAttr init;
  init.pd = s.pd;
  init.send_cq = init.recv_cq = s.cq;
  init.cap = {1024, 16, 1, 1, 0};
  Errno err = 0;
  s.qp = s.dev->create_qp(init, err);
  ASSERT_EQ(err, 0);
  s.buf.assign(1 << 20, static_cast<uint8_t>(last));
  ASSERT_EQ(s.dev->reg_mr(s.pd, s.buf.data(), s.buf.size(), reinterpret_cast<uint64_t>(s.buf.data()),
                          kLocalWrite | kRemoteWrite, s.mr), 0);
}

void connect(Side& s, const Side& peer, uint8_t peer_last) {
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.port_num = 1;
  a.qp_access_flags = kRemoteWrite;
  ASSERT_EQ(s.dev->modify_qp(s.qp, a, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags), 0);
  a.qp_state = QpState::kRtr;
  a.path_mtu = 5;  // 4096
  a.dest_qp_num = peer.dev->qp_num(peer.qp);
  a.ah.dgid = gid_of(peer_last);
  a.max_dest_rd_atomic = 1;
  ASSERT_EQ(s.dev->modify_qp(s.qp, a, kAttrState | kAttrAv | kAttrPathMtu | kAttrDestQpn |
                                          kAttrRqPsn | kAttrMaxDestRdAtomic | kAttrMinRnrTimer),
            0);
  a.qp_state = QpState::kRts;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  ASSERT_EQ(s.dev->modify_qp(s.qp, a, kAttrState | kAttrSqPsn | kAttrTimeout | kAttrRetryCnt |
                                          kAttrRnrRetry | kAttrMaxQpRdAtomic),
            0);
}

// Delivers every frame of `q` due by `now` to `dev`, one batch.
void deliver(std::deque<Frame>& q, Device& dev, uint64_t now) {
  std::vector<WirePacket> batch;
  std::deque<Frame> taken;
  while (!q.empty() && q.front().at <= now) {
    taken.push_back(std::move(q.front()));
    q.pop_front();
  }
  for (Frame& f : taken) batch.push_back({f.pkt.ip, f.pkt.tos, f.bytes});
  if (!batch.empty()) dev.receive(batch);
}

Result run(bool cc, int writes, uint64_t duration_ns) {
  Bottleneck net;
  Side a, b;
  Result r;
  open(a, net, net.a_port, 1, cc);
  open(b, net, net.b_port, 2, cc);
  connect(a, b, 2);
  connect(b, a, 1);
  const uint64_t start = net.clock.now_ns();
  for (int i = 0; i < writes; ++i) {
    Sge s{reinterpret_cast<uint64_t>(a.buf.data()), 65536, a.mr.lkey};
    SendWr wr;
    wr.opcode = WrOpcode::kRdmaWrite;
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.send_flags = kSendSignaled;
    wr.remote_addr = reinterpret_cast<uint64_t>(b.buf.data()) + (i % 16) * 65536;
    wr.rkey = b.mr.rkey;
    EXPECT_EQ(a.dev->post_send(a.qp, &wr, 1, nullptr), 0);
  }
  WorkCompletion wc[64];
  while (net.clock.now_ns() - start < duration_ns) {
    uint64_t t = std::min({a.dev->next_timer_ns(), b.dev->next_timer_ns(),
                           net.to_switch.empty() ? UINT64_MAX : net.to_switch.front().at,
                           net.queue.empty() ? UINT64_MAX : net.queue.front().at,
                           net.to_b.empty() ? UINT64_MAX : net.to_b.front().at,
                           net.to_a.empty() ? UINT64_MAX : net.to_a.front().at});
    if (t == UINT64_MAX) break;
    net.clock.advance_to(t);
    const uint64_t now = net.clock.now_ns();
    while (!net.to_switch.empty() && net.to_switch.front().at <= now) {
      net.arrive(std::move(net.to_switch.front()));
      net.to_switch.pop_front();
    }
    while (!net.queue.empty() && net.queue.front().at <= now) net.depart();
    deliver(net.to_b, *b.dev, now);
    deliver(net.to_a, *a.dev, now);
    if (a.dev->next_timer_ns() <= now) a.dev->on_timer();
    if (b.dev->next_timer_ns() <= now) b.dev->on_timer();
    for (int n; (n = a.dev->poll_cq(a.cq, wc, 64)) > 0;)
      for (int i = 0; i < n; ++i) {
        r.completed += wc[i].status == WcStatus::kSuccess;
        r.done_ns = now - start;
      }
  }
  uint64_t sum = 0, n = 0;
  for (auto [t, q] : net.samples) {
    if (t - start < kSettleNs) continue;  // after the first burst
    r.queue_max_late = std::max(r.queue_max_late, q);
    sum += q;
    ++n;
  }
  r.queue_mean_late = n ? sum / n : 0;
  r.marked = net.marked;
  r.cnps = b.dev->counters().np_cnp_sent;
  return r;
}

TEST(CongestionQueue, dcqcn__keeps_the_switch_queue_near_the_marking_threshold) {
  // 300 WRITEs of 64 KiB (19.7 MB) take 15.7 ms at 10 Gb/s; 40 ms of virtual time at most.
  const Result with = run(true, 300, 40'000'000);
  const Result without = run(false, 300, 40'000'000);
  for (const auto& [name, r] : {std::pair{"with DCQCN", with}, std::pair{"without", without}})
    std::printf("%-10s queue after 5 ms: mean %llu B, max %llu B; %llu marked, %llu CNPs, "
                "%llu WRITEs done in %.2f ms\n", name, (unsigned long long)r.queue_mean_late,
                (unsigned long long)r.queue_max_late, (unsigned long long)r.marked,
                (unsigned long long)r.cnps, (unsigned long long)r.completed, r.done_ns / 1e6);
  EXPECT_GT(with.cnps, 0u);
  EXPECT_EQ(without.marked, 0u);  // Not-ECT without congestion control: nothing to mark
  // Without, the sender keeps its whole window (4 MiB) in flight, most of it in the queue.
  EXPECT_GT(without.queue_mean_late, 2'000'000u);
  // With DCQCN (NVIDIA's defaults) the queue stays short: on average within RED's marking
  // range, at its longest (the overshoot before a cut takes hold) within twice Kmax.
  EXPECT_LT(with.queue_mean_late, kKmax / 2);
  EXPECT_LT(with.queue_max_late, 2 * kKmax);
  // Both move the data: every WRITE completed.
  EXPECT_EQ(with.completed, 300u);
  EXPECT_EQ(without.completed, 300u);
  EXPECT_LT(with.done_ns, 40'000'000u);
}

}  // namespace
}  // namespace vrnic::engine::testing
