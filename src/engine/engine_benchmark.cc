// The engine on its own: two Devices joined by an in-memory wire, no system calls, one
// thread. Every packet goes the whole way: the requester builds it (headers, payload copy,
// ICRC), the wire copies it, the responder checks the ICRC, parses, checks the key and
// places the payload, and the ACKs travel back the same way. The figures are therefore the
// work of BOTH ends on one core.
//
//   BM_Write64      64 B RDMA WRITEs, 1 in 64 signaled: data packets/s per core
//   BM_Write64K     64 KiB RDMA WRITEs (16 packets of 4 KiB each): bytes/s per core
//   BM_Send64       64 B SENDs into posted receives: data packets/s per core
//   BM_PingPong8    8 B inline SENDs answered by SENDs, one at a time, each ACK held for
//                   the answer (as the live runtime holds it for ib_send_lat or UCX's
//                   am_lat): the engine's share of a ping-pong's round trip (both ends'
//                   posts, receives and polls), time per round trip
//
// req_side_pkts/s and resp_side_pkts/s: the same data packets over the CPU time of each
// end's engine calls alone — the rate of one end with a core of its own, as in two
// processes. The thread's CPU time is split between the ends in the proportion of the
// time measured around each end's calls.
#include <benchmark/benchmark.h>

#include <time.h>

#include <array>
#include <cstring>
#include <vector>

#include "engine/device.h"
#include "engine/test_host_memory.h"

namespace vrnic::engine {
namespace {

class FixedClock : public Clock {
 public:
  uint64_t now_ns() const override { return 1'000'000'000; }  // timers never fire
};

struct NullSink : EventSink {
  void on_cq_event(Cq*, void*) override {}
  void on_async_event(const AsyncEvent&) override {}
};

// A port that copies each packet into a reused slot (no allocation once warm); the
// benchmark loop hands the slots to the peer Device in batches.
class MemPort : public PacketPort {
 public:
  struct Slot {
    wire::IpUdpInfo ip;
    std::vector<uint8_t> bytes;
  };
  void send(std::span<const WirePacket> batch) override {
    for (const WirePacket& p : batch) {
      if (used_ == slots_.size()) slots_.emplace_back();
      Slot& s = slots_[used_++];
      s.ip = p.ip;
      s.bytes.assign(p.data.begin(), p.data.end());
    }
    packets_ += batch.size();
  }
  uint16_t source_port_for(uint32_t qpn) override { return uint16_t(0xC000 | (qpn & 0x3fff)); }

  // Delivers everything queued to `to`, in batches of up to 64 (recvmmsg-sized).
  // Returns the number of packets delivered.
  size_t deliver(Device& to, uint64_t hold_acks_ns = 0) {
    if (used_ == 0) return 0;
    std::swap(slots_, in_flight_);
    size_t n = used_;
    used_ = 0;
    pkts_.resize(n);
    for (size_t i = 0; i < n; ++i) pkts_[i] = WirePacket{in_flight_[i].ip, 0, in_flight_[i].bytes};
    for (size_t i = 0; i < n; i += 64)
      to.receive(std::span<const WirePacket>(pkts_.data() + i, std::min<size_t>(64, n - i)),
                 hold_acks_ns);
    return n;
  }
  uint64_t packets() const { return packets_; }

 private:
  std::vector<Slot> slots_, in_flight_;
  std::vector<WirePacket> pkts_;
  size_t used_ = 0;
  uint64_t packets_ = 0;
};

Gid gid_of(uint8_t last) {
  Gid g;
  g.raw = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, last};
  return g;
}

struct Side {
  MemPort port;
  NullSink sink;
  FixedClock clock;
  testing::FakeHostMemory memory;  // no on-demand region: never asked
  Device dev;
  Pd* pd;
  Cq* cq;
  Qp* qp;
  std::vector<uint8_t> buf;
  MrInfo mr;

  static DeviceConfig config_for(uint8_t ip_last) {
    DeviceConfig c;
    c.gid = gid_of(ip_last);
    return c;
  }

  Side(uint8_t ip_last, size_t buf_size)
      : dev(config_for(ip_last), port, clock, memory, sink), buf(buf_size) {
    pd = dev.alloc_pd();
    uint32_t cqe = 1 << 16;
    cq = dev.create_cq(cqe, nullptr);
    dev.reg_mr(pd, buf.data(), buf.size(), reinterpret_cast<uint64_t>(buf.data()),
               kLocalWrite | kRemoteWrite | kRemoteRead, mr);
    QpInitAttr init;
    init.pd = pd;
    init.send_cq = init.recv_cq = cq;
    init.cap = {4096, 4096, 1, 1, 64};
    Errno err = 0;
    qp = dev.create_qp(init, err);
  }

  void bring_up(const Gid& peer, uint32_t peer_qpn) {
    QpAttr a;
    a.qp_state = QpState::kInit;
    a.port_num = 1;
    a.qp_access_flags = kLocalWrite | kRemoteWrite | kRemoteRead;
    dev.modify_qp(qp, a, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags);
    a.qp_state = QpState::kRtr;
    a.path_mtu = 5;  // 4096
    a.dest_qp_num = peer_qpn;
    a.rq_psn = 0;
    a.max_dest_rd_atomic = 16;
    a.min_rnr_timer = 1;
    a.ah.dgid = peer;
    dev.modify_qp(qp, a, kAttrState | kAttrAv | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn |
                             kAttrMaxDestRdAtomic | kAttrMinRnrTimer);
    a.qp_state = QpState::kRts;
    a.sq_psn = 0;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 16;
    dev.modify_qp(qp, a, kAttrState | kAttrSqPsn | kAttrTimeout | kAttrRetryCnt |
                             kAttrRnrRetry | kAttrMaxQpRdAtomic);
  }
};

uint64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}
// The split between the two ends is timed with the monotonic clock (vDSO, ~20 ns a call;
// the thread CPU clock is a system call that would cost more than the packets it times).
uint64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

struct Pair {
  Side a, b;
  // Time spent inside each side's engine calls (the requester side a, the responder side
  // b), so each end's share of the CPU time can be read separately.
  uint64_t a_ns = 0, b_ns = 0;
  explicit Pair(size_t buf_size) : a(1, buf_size), b(2, buf_size) {
    a.bring_up(gid_of(2), b.dev.qp_num(b.qp));
    b.bring_up(gid_of(1), a.dev.qp_num(a.qp));
  }
  // Moves packets both ways until the wire is quiet.
  void run() {
    for (;;) {
      uint64_t t0 = mono_ns();
      size_t n = a.port.deliver(b.dev);
      uint64_t t1 = mono_ns();
      n += b.port.deliver(a.dev);
      uint64_t t2 = mono_ns();
      b_ns += t1 - t0;
      a_ns += t2 - t1;
      if (n == 0) return;
    }
  }
};

// Posts `batch` WRs of `size` bytes (the last one signaled), runs the wire until they are
// acknowledged, and checks the completion. Returns false if anything went wrong.
bool round(Pair& p, std::vector<SendWr>& wrs, WrOpcode op, int recv_needed) {
  Side& a = p.a;
  Side& b = p.b;
  if (recv_needed > 0) {
    static thread_local std::vector<RecvWr> rws;
    static thread_local Sge rsge;
    rsge = {reinterpret_cast<uint64_t>(b.buf.data()), uint32_t(b.buf.size()), b.mr.lkey};
    rws.assign(size_t(recv_needed), RecvWr{0, &rsge, 1});
    size_t bad = 0;
    if (b.dev.post_recv(b.qp, rws.data(), rws.size(), &bad) != 0) return false;
  }
  for (auto& w : wrs) w.opcode = op;
  size_t bad = 0;
  uint64_t t0 = mono_ns();
  if (a.dev.post_send(a.qp, wrs.data(), wrs.size(), &bad) != 0) return false;
  p.a_ns += mono_ns() - t0;
  p.run();
  WorkCompletion wc[64];
  t0 = mono_ns();
  int n = a.dev.poll_cq(a.cq, wc, 64);
  uint64_t t1 = mono_ns();
  int m = 0, got;
  while ((got = b.dev.poll_cq(b.cq, wc + 1, 63)) > 0) m += got;
  p.a_ns += t1 - t0;
  p.b_ns += mono_ns() - t1;
  if (n != 1 || wc[0].status != WcStatus::kSuccess) return false;
  return recv_needed == 0 || m == recv_needed;
}

void run_bench(benchmark::State& state, uint32_t size, WrOpcode op) {
  const size_t batch = 64;
  Pair p(size_t(size) * 2 + 4096);
  Sge sge{reinterpret_cast<uint64_t>(p.a.buf.data()), size, p.a.mr.lkey};
  std::vector<SendWr> wrs(batch);
  for (size_t i = 0; i < batch; ++i) {
    SendWr& w = wrs[i];
    w.wr_id = i;
    w.sg_list = &sge;
    w.num_sge = 1;
    w.remote_addr = reinterpret_cast<uint64_t>(p.b.buf.data());
    w.rkey = p.b.mr.rkey;
    w.send_flags = i + 1 == batch ? uint32_t(kSendSignaled) : 0u;
  }
  const int recv = op == WrOpcode::kSend ? int(batch) : 0;
  const uint64_t pkts0 = p.a.port.packets(), acks0 = p.b.port.packets();
  const uint64_t cpu0 = thread_cpu_ns();
  for (auto _ : state)
    if (!round(p, wrs, op, recv)) {
      state.SkipWithError("a work request failed");
      return;
    }
  const double cpu = double(thread_cpu_ns() - cpu0);
  const double data_pkts = double(p.a.port.packets() - pkts0);
  const double timed = double(p.a_ns + p.b_ns);
  state.counters["data_pkts/s"] = benchmark::Counter(data_pkts, benchmark::Counter::kIsRate);
  // Each end's rate on a core of its own: data packets over the CPU time of that end's
  // engine calls (the wire copy is charged to the receiving end).
  if (p.a_ns > 0 && p.b_ns > 0) {
    state.counters["req_side_pkts/s"] = data_pkts * 1e9 / (cpu * double(p.a_ns) / timed);
    state.counters["resp_side_pkts/s"] = data_pkts * 1e9 / (cpu * double(p.b_ns) / timed);
  }
  state.counters["acks/data_pkt"] =
      data_pkts > 0 ? double(p.b.port.packets() - acks0) / data_pkts : 0;
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(batch));
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(batch) * size);
}

void BM_Write64(benchmark::State& state) { run_bench(state, 64, WrOpcode::kRdmaWrite); }
void BM_Write64K(benchmark::State& state) { run_bench(state, 65536, WrOpcode::kRdmaWrite); }
void BM_Send64(benchmark::State& state) { run_bench(state, 64, WrOpcode::kSend); }

// One side's half of a ping-pong: its message arrives (the peer's held ACK with it), it
// takes the receive completion and its own send's, reposts the receive and answers.
// Returns the completions found.
int answer(Side& me, Side& peer, const SendWr& wr, const RecvWr& rwr) {
  constexpr uint64_t kHold = 1'000'000'000;  // the clock never moves: held until the answer
  peer.port.deliver(me.dev, kHold);
  WorkCompletion wc[4];
  int got = me.dev.poll_cq(me.cq, wc, 4);
  for (int i = 0; i < got; ++i)
    if (wc[i].status != WcStatus::kSuccess) return -1;
  size_t bad = 0;
  if (me.dev.post_recv(me.qp, &rwr, 1, &bad) != 0) return -1;
  if (me.dev.post_send(me.qp, &wr, 1, &bad) != 0) return -1;
  return got;
}

void BM_PingPong8(benchmark::State& state) {
  Pair p(4096);
  Sge sa{reinterpret_cast<uint64_t>(p.a.buf.data()), 8, p.a.mr.lkey};
  Sge sb{reinterpret_cast<uint64_t>(p.b.buf.data()), 8, p.b.mr.lkey};
  SendWr wa, wb;
  wa.sg_list = &sa;
  wb.sg_list = &sb;
  wa.num_sge = wb.num_sge = 1;
  wa.send_flags = wb.send_flags = uint32_t(kSendSignaled) | uint32_t(kSendInline);
  Sge ra{reinterpret_cast<uint64_t>(p.a.buf.data()) + 64, 64, p.a.mr.lkey};
  Sge rb{reinterpret_cast<uint64_t>(p.b.buf.data()) + 64, 64, p.b.mr.lkey};
  RecvWr rwa{0, &ra, 1}, rwb{0, &rb, 1};
  size_t bad = 0;
  for (int i = 0; i < 64; ++i) {
    p.a.dev.post_recv(p.a.qp, &rwa, 1, &bad);
    p.b.dev.post_recv(p.b.qp, &rwb, 1, &bad);
  }
  p.a.dev.post_send(p.a.qp, &wa, 1, &bad);
  int64_t completions = 0;
  for (auto _ : state) {
    const int b = answer(p.b, p.a, wb, rwb), a = answer(p.a, p.b, wa, rwa);
    if (a < 0 || b < 0) {
      state.SkipWithError("a work request failed");
      return;
    }
    completions += a + b;
  }
  // Each side takes a receive and a send completion per round trip once warm.
  state.counters["cqes/rtt"] = double(completions) / double(state.iterations());
  state.counters["pkts/rtt"] =
      double(p.a.port.packets() + p.b.port.packets()) / double(state.iterations());
}

BENCHMARK(BM_Write64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Write64K)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Send64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PingPong8)->Unit(benchmark::kNanosecond);

}  // namespace
}  // namespace vrnic::engine

BENCHMARK_MAIN();
