// Tests of the live device: singleton and refcount, addresses across processes, counters file.
#include "live/live_nic.h"

#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "live/counters_file.h"
#include "wire/frame.h"
#include "wire/icrc.h"

namespace vrnic::live {
namespace {

class LiveNicTest : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("VRNIC_IP");
    unsetenv("VRNIC_PCAP");
    unsetenv("VRNIC_FAULTS");
    unsetenv("VRNIC_RX_QUEUES");
  }
};

TEST_F(LiveNicTest, acquire__twice_is_one_device_with_a_refcount) {
  int err = 0;
  LiveNic* a = LiveNic::acquire({}, err);
  ASSERT_NE(a, nullptr) << std::strerror(err);
  LiveNic* b = LiveNic::acquire({}, err);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a->name(), "vrnic0");
  LiveNic::release(b);
  // Still open: the counters file is there until the last release.
  std::string path = a->counters_path();
  ASSERT_FALSE(path.empty());
  EXPECT_EQ(access(path.c_str(), F_OK), 0);
  LiveNic::release(a);
  EXPECT_NE(access(path.c_str(), F_OK), 0);
}

TEST_F(LiveNicTest, acquire__gid_is_the_ipv4_mapped_address) {
  int err = 0;
  LiveNic* nic = LiveNic::acquire({}, err);
  ASSERT_NE(nic, nullptr);
  EXPECT_FALSE(nic->is_ipv6());
  EXPECT_TRUE(nic->gid().is_ipv4_mapped());
  const auto& g = nic->gid().raw;
  char expect[32];
  std::snprintf(expect, sizeof expect, "%u.%u.%u.%u", g[12], g[13], g[14], g[15]);
  EXPECT_EQ(nic->ip_string(), expect);
  EXPECT_EQ(g[12], 127);
  LiveNic::release(nic);
}

TEST_F(LiveNicTest, acquire__two_processes_get_different_addresses) {
  int up[2], go[2];
  ASSERT_EQ(pipe(up), 0);
  ASSERT_EQ(pipe(go), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int err = 0;
    LiveNic* nic = LiveNic::acquire({}, err);
    char ip[64] = {};
    if (nic) std::snprintf(ip, sizeof ip, "%s", nic->ip_string().c_str());
    (void)!write(up[1], ip, sizeof ip);
    char c;
    (void)!read(go[0], &c, 1);  // keep the device until the parent has its own
    if (nic) LiveNic::release(nic);
    _exit(nic ? 0 : 1);
  }
  char child_ip[64] = {};
  ASSERT_EQ(read(up[0], child_ip, sizeof child_ip), static_cast<ssize_t>(sizeof child_ip));
  ASSERT_NE(child_ip[0], 0) << "child could not open the device";
  int err = 0;
  LiveNic* nic = LiveNic::acquire({}, err);
  ASSERT_NE(nic, nullptr);
  EXPECT_NE(nic->ip_string(), child_ip);
  // Both are listed by `vrnic stats` while they run.
  EXPECT_EQ(read_all_counters(child).size(), 1u);
  EXPECT_EQ(read_all_counters(getpid()).size(), 1u);
  (void)!write(go[1], "x", 1);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_TRUE(read_all_counters(child).empty());  // the child removed its file
  LiveNic::release(nic);
}

TEST_F(LiveNicTest, acquire__vrnic_ip_is_used) {
  setenv("VRNIC_IP", "127.0.0.249", 1);
  int err = 0;
  LiveNic* nic = LiveNic::acquire({}, err);
  ASSERT_NE(nic, nullptr) << std::strerror(err);
  EXPECT_EQ(nic->ip_string(), "127.0.0.249");
  EXPECT_EQ(nic->gid().raw[15], 249);
  LiveNic::release(nic);
}

TEST_F(LiveNicTest, acquire__bad_vrnic_ip_fails_with_einval) {
  setenv("VRNIC_IP", "not.an.address", 1);
  int err = 0;
  EXPECT_EQ(LiveNic::acquire({}, err), nullptr);
  EXPECT_EQ(err, EINVAL);
}

TEST_F(LiveNicTest, acquire__bad_vrnic_faults_fails_with_einval) {
  setenv("VRNIC_FAULTS", "loss=7", 1);
  int err = 0;
  EXPECT_EQ(LiveNic::acquire({}, err), nullptr);
  EXPECT_EQ(err, EINVAL);
}

TEST_F(LiveNicTest, exit__without_release_removes_the_counters_file) {
  int up[2];
  ASSERT_EQ(pipe(up), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int err = 0;
    LiveNic* nic = LiveNic::acquire({}, err);
    char path[128] = {};
    if (nic) std::snprintf(path, sizeof path, "%s", nic->counters_path().c_str());
    (void)!write(up[1], path, sizeof path);
    std::exit(0);  // programs often exit with the device open
  }
  char path[128] = {};
  ASSERT_EQ(read(up[0], path, sizeof path), static_cast<ssize_t>(sizeof path));
  ASSERT_NE(path[0], 0);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);  // no hang, no crash
  EXPECT_NE(access(path, F_OK), 0);
}

// Two RC QPs of one device, connected to each other through the device's own GID: every
// packet goes out through the UDP socket and comes back in.
struct LoopbackPair {
  engine::Pd* pd = nullptr;
  engine::Cq* cq = nullptr;
  engine::Qp* a = nullptr;
  engine::Qp* b = nullptr;
  engine::MrInfo src_mr, dst_mr;
};

void connect(engine::Device& d, engine::Qp* qp, uint32_t dest_qpn, const engine::Gid& gid) {
  using namespace engine;
  QpAttr attr;
  attr.qp_state = QpState::kInit;
  attr.qp_access_flags = kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic;
  ASSERT_EQ(d.modify_qp(qp, attr, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags), 0);
  attr.qp_state = QpState::kRtr;
  attr.ah.dgid = gid;
  attr.path_mtu = 5;
  attr.dest_qp_num = dest_qpn;
  attr.rq_psn = 100;
  attr.max_dest_rd_atomic = 4;
  attr.min_rnr_timer = 1;
  ASSERT_EQ(d.modify_qp(qp, attr, kAttrState | kAttrAv | kAttrPathMtu | kAttrDestQpn |
                                      kAttrRqPsn | kAttrMaxDestRdAtomic | kAttrMinRnrTimer),
            0);
  attr.qp_state = QpState::kRts;
  attr.sq_psn = 100;
  attr.timeout = 14;
  attr.retry_cnt = 7;
  attr.rnr_retry = 7;
  attr.max_rd_atomic = 4;
  ASSERT_EQ(d.modify_qp(qp, attr, kAttrState | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry |
                                      kAttrSqPsn | kAttrMaxQpRdAtomic),
            0);
}

void setup_pair(LiveNic* nic, LoopbackPair& p, std::vector<uint8_t>& src,
                std::vector<uint8_t>& dst) {
  using namespace engine;
  nic->locked([&](Device& d) {
    p.pd = d.alloc_pd();
    ASSERT_NE(p.pd, nullptr);
    ASSERT_EQ(d.reg_mr(p.pd, src.data(), src.size(), (uint64_t)src.data(), kLocalWrite, p.src_mr), 0);
    ASSERT_EQ(d.reg_mr(p.pd, dst.data(), dst.size(), (uint64_t)dst.data(),
                       kLocalWrite | kRemoteWrite, p.dst_mr), 0);
    uint32_t cqe = 64;
    p.cq = d.create_cq(cqe, nullptr);
    ASSERT_NE(p.cq, nullptr);
    QpInitAttr init;
    init.pd = p.pd;
    init.send_cq = init.recv_cq = p.cq;
    init.cap = {16, 16, 1, 1, 0};
    Errno err = 0;
    p.a = d.create_qp(init, err);
    ASSERT_NE(p.a, nullptr) << err;
    p.b = d.create_qp(init, err);
    ASSERT_NE(p.b, nullptr) << err;
    connect(d, p.a, d.qp_num(p.b), nic->gid());
    connect(d, p.b, d.qp_num(p.a), nic->gid());
  });
}

void post_write(LiveNic* nic, LoopbackPair& p, std::vector<uint8_t>& src,
                std::vector<uint8_t>& dst) {
  using namespace engine;
  Sge sge{(uint64_t)src.data(), (uint32_t)src.size(), p.src_mr.lkey};
  SendWr wr;
  wr.wr_id = 7;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.send_flags = kSendSignaled;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.remote_addr = (uint64_t)dst.data();
  wr.rkey = p.dst_mr.rkey;
  size_t bad = 0;
  ASSERT_EQ(nic->locked([&](Device& d) { return d.post_send(p.a, &wr, 1, &bad); }), 0);
}

// LiveNic::poll_cq (which drains the socket itself) until one completion, for 10 s at most.
int busy_poll_one(LiveNic* nic, engine::Cq* cq, engine::WorkCompletion& wc) {
  int got = 0;
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
       got == 0 && std::chrono::steady_clock::now() < until;)
    got = nic->poll_cq(cq, &wc, 1);
  return got;
}

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>((i * 2654435761u + seed) >> 13);
  return v;
}

TEST_F(LiveNicTest, poll_cq__busy_polling_moves_a_loopback_rdma_write) {
  int err = 0;
  LiveNic* nic = LiveNic::acquire({}, err);
  ASSERT_NE(nic, nullptr);
  std::vector<uint8_t> src = pattern(300000, 1), dst(300000, 0);
  LoopbackPair p;
  setup_pair(nic, p, src, dst);
  post_write(nic, p, src, dst);
  engine::WorkCompletion wc;
  int got = busy_poll_one(nic, p.cq, wc);
  ASSERT_EQ(got, 1);
  EXPECT_EQ(wc.status, engine::WcStatus::kSuccess);
  EXPECT_EQ(wc.wr_id, 7u);
  EXPECT_EQ(wc.opcode, engine::WcOpcode::kRdmaWrite);
  EXPECT_EQ(dst, src);
  // The packets went through the socket both ways and were counted in the shared file.
  EXPECT_GE(nic->counters().tx_packets, 300000u / 4096);
  EXPECT_EQ(nic->counters().tx_packets, nic->counters().rx_packets);
  CountersSnapshot snap;
  ASSERT_TRUE(read_counters_file(nic->counters_path(), snap));
  EXPECT_EQ(snap.counters.front().first, "tx_packets");
  EXPECT_EQ(snap.counters.front().second, nic->counters().tx_packets);
  LiveNic::release(nic);
}

TEST_F(LiveNicTest, progress_thread__completes_a_write_without_poll_cq_draining) {
  int err = 0;
  LiveNic* nic = LiveNic::acquire({}, err);
  ASSERT_NE(nic, nullptr);
  std::vector<uint8_t> src = pattern(100000, 2), dst(100000, 0);
  LoopbackPair p;
  setup_pair(nic, p, src, dst);
  post_write(nic, p, src, dst);
  // engine poll_cq under locked() never touches the socket: only the thread can progress.
  engine::WorkCompletion wc;
  int got = 0;
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
       got == 0 && std::chrono::steady_clock::now() < until;) {
    got = nic->locked([&](engine::Device& d) { return d.poll_cq(p.cq, &wc, 1); });
    if (got == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(got, 1);
  EXPECT_EQ(wc.status, engine::WcStatus::kSuccess);
  EXPECT_EQ(dst, src);
  LiveNic::release(nic);
}

// Threads of this process named `name`.
int threads_named(const char* name) {
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  while (dirent* e = d ? readdir(d) : nullptr) {
    if (e->d_name[0] == '.') continue;
    const std::string path = std::string("/proc/self/task/") + e->d_name + "/comm";
    FILE* f = std::fopen(path.c_str(), "r");
    if (!f) continue;
    char comm[32] = {};
    if (std::fgets(comm, sizeof comm, f) && std::strncmp(comm, name, std::strlen(name)) == 0) ++n;
    std::fclose(f);
  }
  if (d) closedir(d);
  return n;
}

TEST_F(LiveNicTest, rx_queues__writes_of_many_qps_land_through_the_queues_threads) {
  // Eight QP pairs, their flows spread by the kernel over four receive queues: the queue
  // threads receive without the device lock and hand over in order, so every write lands
  // whole, with the program never polling the socket (as the progress-thread test above),
  // then again with the program busy-polling (its polls read the extra queues in turn).
  setenv("VRNIC_RX_QUEUES", "4", 1);
  int err = 0;
  LiveNic* nic = LiveNic::acquire({}, err);
  ASSERT_NE(nic, nullptr) << std::strerror(err);
  EXPECT_EQ(threads_named("vrnic-rxq"), 3);
  for (const bool busy_poll : {false, true}) {
    constexpr int kPairs = 8;
    std::vector<std::vector<uint8_t>> src, dst;
    std::vector<LoopbackPair> pairs(kPairs);
    for (int i = 0; i < kPairs; ++i) {
      src.push_back(pattern(200000, 10 + i + (busy_poll ? 100 : 0)));
      dst.emplace_back(200000, 0);
    }
    for (int i = 0; i < kPairs; ++i) setup_pair(nic, pairs[i], src[i], dst[i]);
    for (int i = 0; i < kPairs; ++i) post_write(nic, pairs[i], src[i], dst[i]);
    for (int i = 0; i < kPairs; ++i) {
      engine::WorkCompletion wc;
      int got = 0;
      for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
           got == 0 && std::chrono::steady_clock::now() < until;) {
        if (busy_poll) {
          got = nic->poll_cq(pairs[i].cq, &wc, 1);
        } else {
          got = nic->locked([&](engine::Device& d) { return d.poll_cq(pairs[i].cq, &wc, 1); });
          if (got == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      }
      ASSERT_EQ(got, 1) << "pair " << i;
      EXPECT_EQ(wc.status, engine::WcStatus::kSuccess);
      EXPECT_EQ(dst[i], src[i]) << "pair " << i;
    }
  }
  EXPECT_EQ(nic->counters().tx_packets, nic->counters().rx_packets);
  EXPECT_EQ(nic->counters().rx_out_of_sequence, 0u);  // no queue handed packets over out of order
  EXPECT_EQ(nic->counters().retransmitted_packets, 0u);
  LiveNic::release(nic);
  EXPECT_EQ(threads_named("vrnic-rxq"), 0);
}

TEST_F(LiveNicTest, acquire__bad_vrnic_rx_queues_fails_with_einval) {
  for (const char* bad : {"0", "65", "two", "3x"}) {
    setenv("VRNIC_RX_QUEUES", bad, 1);
    int err = 0;
    EXPECT_EQ(LiveNic::acquire({}, err), nullptr) << bad;
    EXPECT_EQ(err, EINVAL) << bad;
  }
}

TEST_F(LiveNicTest, ipv6__loopback_write_over_ipv6) {
  setenv("VRNIC_IP", "::1", 1);
  int err = 0;
  LiveNic* nic = LiveNic::acquire({}, err);
  if (!nic && err == EADDRNOTAVAIL) GTEST_SKIP() << "no IPv6 loopback";
  ASSERT_NE(nic, nullptr) << std::strerror(err);
  EXPECT_TRUE(nic->is_ipv6());
  EXPECT_FALSE(nic->gid().is_ipv4_mapped());
  EXPECT_EQ(nic->gid().raw[15], 1);
  std::vector<uint8_t> src = pattern(20000, 4), dst(20000, 0);
  LoopbackPair p;
  setup_pair(nic, p, src, dst);
  post_write(nic, p, src, dst);
  engine::WorkCompletion wc;
  int got = busy_poll_one(nic, p.cq, wc);
  ASSERT_EQ(got, 1);
  EXPECT_EQ(wc.status, engine::WcStatus::kSuccess);
  EXPECT_EQ(dst, src);
  EXPECT_EQ(nic->counters().rx_icrc_errors, 0u);
  LiveNic::release(nic);
}

TEST_F(LiveNicTest, pcap__loopback_write_is_captured_both_ways) {
  std::string path = "/tmp/vrnic_live_test_" + std::to_string(getpid()) + ".pcap";
  setenv("VRNIC_PCAP", path.c_str(), 1);
  int err = 0;
  LiveNic* nic = LiveNic::acquire({}, err);
  ASSERT_NE(nic, nullptr);
  std::vector<uint8_t> src = pattern(5000, 3), dst(5000, 0);
  LoopbackPair p;
  setup_pair(nic, p, src, dst);
  post_write(nic, p, src, dst);
  engine::WorkCompletion wc;
  int got = busy_poll_one(nic, p.cq, wc);
  ASSERT_EQ(got, 1);
  uint64_t packets = nic->counters().tx_packets + nic->counters().rx_packets;
  LiveNic::release(nic);  // flushes and closes the capture

  FILE* f = std::fopen(path.c_str(), "rb");
  ASSERT_NE(f, nullptr);
  uint8_t header[24];
  ASSERT_EQ(std::fread(header, 1, 24, f), 24u);
  uint64_t frames = 0;
  uint32_t rec[4];
  std::vector<uint8_t> frame;
  while (std::fread(rec, 4, 4, f) == 4) {
    frame.resize(rec[2]);
    ASSERT_EQ(std::fread(frame.data(), 1, rec[2], f), rec[2]);
    wire::IpUdpInfo ip;
    auto payload = wire::parse_frame(frame, ip);
    ASSERT_FALSE(payload.empty());
    EXPECT_EQ(ip.dst_port, 4791);
    // Every captured frame carries a correct ICRC (sent ones by construction, received
    // ones because the sender was this device).
    EXPECT_NE(wire::verify_icrc(ip, payload), wire::IcrcVerdict::kBad);
    ++frames;
  }
  std::fclose(f);
  std::remove(path.c_str());
  EXPECT_EQ(frames, packets);
}

}  // namespace
}  // namespace vrnic::live

namespace vrnic::live {
namespace {

// UD multicast across processes: a child's UD QP attached to a group receives what the
// parent sends to the group (the child's UDP port joined the IP group on loopback).
TEST_F(LiveNicTest, multicast__a_datagram_to_a_group_reaches_another_process) {
  using namespace engine;
  constexpr uint32_t kQkey = 0x1234;
  Gid group;
  group.raw = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 0, 77, 9};
  auto bring_up = [](Device& d, Qp* qp) {
    QpAttr a;
    a.qp_state = QpState::kInit;
    a.qkey = kQkey;
    Errno e = d.modify_qp(qp, a, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrQkey);
    a.qp_state = QpState::kRtr;
    e = e ? e : d.modify_qp(qp, a, kAttrState);
    a.qp_state = QpState::kRts;
    return e ? e : d.modify_qp(qp, a, kAttrState | kAttrSqPsn);
  };
  auto make_ud = [](Device& d, Pd* pd, Cq* cq) {
    QpInitAttr init;
    init.type = QpType::kUd;
    init.pd = pd;
    init.send_cq = init.recv_cq = cq;
    init.cap = {4, 4, 1, 1, 0};
    Errno err = 0;
    return d.create_qp(init, err);
  };
  int up[2];
  ASSERT_EQ(pipe(up), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int err = 0;
    LiveNic* nic = LiveNic::acquire({}, err);
    if (nic == nullptr) _exit(2);
    std::vector<uint8_t> buf(1024, 0);
    Cq* cq = nullptr;
    Errno e = nic->locked([&](Device& d) -> Errno {
      Pd* pd = d.alloc_pd();
      MrInfo mr;
      if (Errno r = d.reg_mr(pd, buf.data(), buf.size(), (uint64_t)buf.data(), kLocalWrite, mr))
        return r;
      uint32_t cqe = 16;
      cq = d.create_cq(cqe, nullptr);
      Qp* qp = make_ud(d, pd, cq);
      if (qp == nullptr) return EINVAL;
      if (Errno r = bring_up(d, qp)) return r;
      if (Errno r = d.attach_mcast(qp, group, 0)) return r;
      Sge sge{(uint64_t)buf.data(), (uint32_t)buf.size(), mr.lkey};
      RecvWr wr;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      return d.post_recv(qp, &wr, 1, nullptr);
    });
    char ready = e == 0 ? 1 : 0;
    (void)!write(up[1], &ready, 1);
    WorkCompletion wc;
    int got = e == 0 ? busy_poll_one(nic, cq, wc) : 0;
    bool good = got == 1 && wc.status == WcStatus::kSuccess && wc.byte_len == 40 + 64 &&
                (wc.wc_flags & kWcGrh) && buf[40] == 0x5a && buf[40 + 63] == 0x5a;
    LiveNic::release(nic);
    _exit(good ? 0 : 1);
  }
  char ready = 0;
  ASSERT_EQ(read(up[0], &ready, 1), 1);
  ASSERT_EQ(ready, 1) << "child could not set up its UD QP";
  int err = 0;
  LiveNic* nic = LiveNic::acquire({}, err);
  ASSERT_NE(nic, nullptr);
  std::vector<uint8_t> src(64, 0x5a);
  Cq* cq = nullptr;
  Errno e = nic->locked([&](Device& d) -> Errno {
    Pd* pd = d.alloc_pd();
    MrInfo mr;
    if (Errno r = d.reg_mr(pd, src.data(), src.size(), (uint64_t)src.data(), 0, mr)) return r;
    uint32_t cqe = 16;
    cq = d.create_cq(cqe, nullptr);
    Qp* qp = make_ud(d, pd, cq);
    if (qp == nullptr) return EINVAL;
    if (Errno r = bring_up(d, qp)) return r;
    AddressVector av;
    av.dgid = group;
    Errno r = 0;
    Ah* ah = d.create_ah(pd, av, r);
    if (ah == nullptr) return r;
    Sge sge{(uint64_t)src.data(), 64, mr.lkey};
    SendWr wr;
    wr.opcode = WrOpcode::kSend;
    wr.send_flags = kSendSignaled;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.ah = ah;
    wr.remote_qpn = 0xffffff;
    wr.remote_qkey = kQkey;
    return d.post_send(qp, &wr, 1, nullptr);
  });
  ASSERT_EQ(e, 0);
  WorkCompletion wc;
  ASSERT_EQ(busy_poll_one(nic, cq, wc), 1);
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child got no datagram";
  LiveNic::release(nic);
}

}  // namespace
}  // namespace vrnic::live
