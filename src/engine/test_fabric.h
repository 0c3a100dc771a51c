// Test harness for protocol tests: engines on a LoopWire, registered buffers, connected RC
// QPs, and a run loop that delivers packets and advances virtual time to the next timer.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "engine/device.h"
#include "engine/requester.h"
#include "engine/test_host_memory.h"
#include "transport/loop/loop_wire.h"

namespace vrnic::engine::testing {

struct RecordingSink : EventSink {
  struct GsiMad {
    wire::IpUdpInfo from;
    std::vector<uint8_t> mad;
  };
  std::vector<Cq*> cq_events;
  std::vector<AsyncEvent> async_events;
  bool take_gsi = false;  // a connection manager is attached: QP1's MADs are kept
  std::vector<GsiMad> gsi;
  void on_cq_event(Cq* cq, void*) override { cq_events.push_back(cq); }
  void on_async_event(const AsyncEvent& ev) override { async_events.push_back(ev); }
  bool on_gsi_mad(const wire::IpUdpInfo& from, std::span<const uint8_t> mad) override {
    if (take_gsi) gsi.push_back({from, {mad.begin(), mad.end()}});
    return take_gsi;
  }
};

struct Buffer {
  std::vector<uint8_t> bytes;
  MrInfo mr;
  uint8_t* data() { return bytes.data(); }
  uint64_t addr() const { return reinterpret_cast<uint64_t>(bytes.data()); }
};

struct Node {
  transport::LoopPort* port = nullptr;
  RecordingSink sink;
  FakeHostMemory memory;  // the pages of this node's on-demand regions
  std::unique_ptr<Device> dev;
  Pd* pd = nullptr;
  Cq* cq = nullptr;
  std::vector<std::unique_ptr<Buffer>> buffers;
  Gid gid;

  Counters& ctr() { return dev->counters(); }
  Buffer& reg(size_t size, uint32_t access = kLocalWrite | kRemoteWrite | kRemoteRead |
                                             kRemoteAtomic,
              Pd* in_pd = nullptr) {
    auto b = std::make_unique<Buffer>();
    b->bytes.resize(size);
    EXPECT_EQ(dev->reg_mr(in_pd ? in_pd : pd, b->data(), size, b->addr(), access, b->mr), 0);
    buffers.push_back(std::move(b));
    return *buffers.back();
  }
  Qp* create_qp(uint32_t depth = 256, Cq* use_cq = nullptr) {
    QpInitAttr init;
    init.pd = pd;
    init.send_cq = init.recv_cq = use_cq ? use_cq : cq;
    init.cap = {depth, depth, 8, 8, 64};
    Errno err = 0;
    Qp* qp = dev->create_qp(init, err);
    EXPECT_EQ(err, 0);
    return qp;
  }
  std::vector<WorkCompletion> poll(Cq* which = nullptr) {
    std::vector<WorkCompletion> out;
    WorkCompletion wc[16];
    int n;
    while ((n = dev->poll_cq(which ? which : cq, wc, 16)) > 0) out.insert(out.end(), wc, wc + n);
    return out;
  }
};

struct ConnectOptions {
  uint8_t mtu = 3;  // 1024
  uint32_t a_psn = 100, b_psn = 5000;
  uint8_t timeout = 14, retry_cnt = 7, rnr_retry = 7, min_rnr_timer = 1;
  uint8_t max_rd_atomic = 16;
  uint8_t traffic_class = 0;
  uint32_t access = kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic;
};

class Fabric {
 public:
  explicit Fabric(uint64_t seed = 1) : wire_(seed) {}

  transport::LoopWire& wire() { return wire_; }
  transport::VirtualClock& clock() { return wire_.clock(); }

  // tweak: changes to the default DeviceConfig (congestion control parameters, ...).
  Node& add_node(uint8_t ip_last, const std::function<void(DeviceConfig&)>& tweak = {}) {
    auto n = std::make_unique<Node>();
    std::array<uint8_t, 16> addr{10, 0, 0, ip_last};
    n->port = &wire_.add_port(addr);
    n->gid.raw = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, ip_last};
    DeviceConfig cfg;
    cfg.gid = n->gid;
    cfg.name_seed[0] = ip_last;  // each node its own QPNs and keys, the same in every run
    if (tweak) tweak(cfg);
    n->dev = std::make_unique<Device>(cfg, *n->port, wire_.clock(), n->memory, n->sink);
    Device* dev = n->dev.get();
    n->port->set_receiver([dev](std::span<const WirePacket> b) { dev->receive(b); });
    n->pd = dev->alloc_pd();
    uint32_t cqe = 1 << 16;
    n->cq = dev->create_cq(cqe, nullptr);
    nodes_.push_back(std::move(n));
    return *nodes_.back();
  }

  // RESET -> INIT -> RTR -> RTS on both sides.
  static void connect(Node& a, Qp* qa, Node& b, Qp* qb, const ConnectOptions& o = {}) {
    bring_up(a, qa, b.gid, b.dev->qp_num(qb), o.a_psn, o.b_psn, o);
    bring_up(b, qb, a.gid, a.dev->qp_num(qa), o.b_psn, o.a_psn, o);
  }
  static void bring_up(Node& n, Qp* qp, const Gid& dgid, uint32_t dqpn, uint32_t sq_psn,
                       uint32_t rq_psn, const ConnectOptions& o) {
    QpAttr a;
    a.qp_state = QpState::kInit;
    a.pkey_index = 0;
    a.port_num = 1;
    a.qp_access_flags = o.access;
    ASSERT_EQ(n.dev->modify_qp(qp, a, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags), 0);
    a.qp_state = QpState::kRtr;
    a.path_mtu = o.mtu;
    a.dest_qp_num = dqpn;
    a.rq_psn = rq_psn;
    a.max_dest_rd_atomic = o.max_rd_atomic;
    a.min_rnr_timer = o.min_rnr_timer;
    a.ah.dgid = dgid;
    a.ah.traffic_class = o.traffic_class;
    ASSERT_EQ(n.dev->modify_qp(qp, a,
                               kAttrState | kAttrAv | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn |
                                   kAttrMaxDestRdAtomic | kAttrMinRnrTimer),
              0);
    a.qp_state = QpState::kRts;
    a.sq_psn = sq_psn;
    a.timeout = o.timeout;
    a.retry_cnt = o.retry_cnt;
    a.rnr_retry = o.rnr_retry;
    a.max_rd_atomic = o.max_rd_atomic;
    ASSERT_EQ(n.dev->modify_qp(qp, a,
                               kAttrState | kAttrSqPsn | kAttrTimeout | kAttrRetryCnt |
                                   kAttrRnrRetry | kAttrMaxQpRdAtomic),
              0);
  }

  // Delivers packets and fires timers in virtual time until nothing is in flight and no
  // timer is armed, or until max_ns of virtual time passed. Returns false on the limit.
  bool run(uint64_t max_ns = 600'000'000'000ull) {
    uint64_t start = clock().now_ns();
    for (size_t iter = 0; iter < 50'000'000; ++iter) {
      if (wire_.deliver_all() > 0) continue;
      uint64_t t = wire_.next_due_ns();
      for (auto& n : nodes_) t = std::min(t, n->dev->next_timer_ns());
      if (t == UINT64_MAX) return true;
      if (t - start > max_ns) return false;
      clock().advance_to(t);
      for (auto& n : nodes_)
        if (n->dev->next_timer_ns() <= clock().now_ns()) n->dev->on_timer();
    }
    return false;
  }

 private:
  transport::LoopWire wire_;
  std::vector<std::unique_ptr<Node>> nodes_;
};

// Deterministic pseudo-random bytes (splitmix64, 8 bytes per step: fast for MiB buffers).
// A requester QP's window (requester.h send_window) at the fabric's 1024 B path MTU with
// the default DeviceConfig: also the size of the pieces a long READ is requested in.
inline constexpr uint32_t kWindow1k =
    std::clamp(DeviceConfig{}.send_window_bytes / 1024u, kMinSendWindow, kMaxSendWindow);

inline void fill_random(uint8_t* p, size_t n, uint32_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i += 8) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    std::memcpy(p + i, &z, n - i < 8 ? n - i : 8);
  }
}

// A signaled one-SGE work request (raddr / rkey for RDMA and atomics).
inline SendWr wr_of(WrOpcode op, uint64_t id, Sge* sg, uint64_t raddr = 0, uint32_t rkey = 0) {
  SendWr wr;
  wr.wr_id = id;
  wr.opcode = op;
  wr.sg_list = sg;
  wr.num_sge = 1;
  wr.send_flags = kSendSignaled;
  wr.remote_addr = raddr;
  wr.rkey = rkey;
  return wr;
}

inline Errno post_send(Node& n, Qp* qp, const SendWr& wr) {
  size_t bad = SIZE_MAX;
  return n.dev->post_send(qp, &wr, 1, &bad);
}
inline Errno post_recv(Node& n, Qp* qp, uint64_t wr_id, std::vector<Sge> sges) {
  RecvWr wr;
  wr.wr_id = wr_id;
  wr.sg_list = sges.data();
  wr.num_sge = static_cast<uint32_t>(sges.size());
  size_t bad = SIZE_MAX;
  return n.dev->post_recv(qp, &wr, 1, &bad);
}

}  // namespace vrnic::engine::testing
