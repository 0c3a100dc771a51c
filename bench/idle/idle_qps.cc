// An idle process holding many connected RC QPs: the idle-cost figure of bench/run.py.
//
//   vrnic run -- vrnic_idle_qps N SECONDS
//
// Opens the device, creates N pairs of RC QPs (each with its own CQ, as perftest -q does),
// connects each pair to itself through the device, moves 64 bytes over every connection
// with an RDMA WRITE (so every QP has really carried traffic), prints "ready", then stays
// idle for SECONDS. The caller reads the process's CPU time and resident memory meanwhile.
// Linked against rdma-core's libibverbs like any verbs program.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "integrity/rc_endpoint.h"

using vrnic_test::Device;
using vrnic_test::RcEndpoint;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s PAIRS SECONDS\n", argv[0]);
    return 2;
  }
  const int pairs = std::atoi(argv[1]);
  const int seconds = std::atoi(argv[2]);
  Device dev = Device::open();
  std::vector<char> src(64, 'v'), dst(size_t(pairs) * 64);
  ibv_mr* smr = dev.reg(src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* dmr = dev.reg(dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  std::vector<std::unique_ptr<RcEndpoint>> a, b;
  for (int i = 0; i < pairs; ++i) {
    a.push_back(std::make_unique<RcEndpoint>(dev));
    b.push_back(std::make_unique<RcEndpoint>(dev));
    a.back()->connect(b.back()->local_info());
    b.back()->connect(a.back()->local_info());
  }
  for (int i = 0; i < pairs; ++i) {
    ibv_sge sge{reinterpret_cast<uint64_t>(src.data()), 64, smr->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(dst.data()) + uint64_t(i) * 64;
    wr.wr.rdma.rkey = dmr->rkey;
    CHECK_OR_DIE(ibv_post_send(a[size_t(i)]->qp(), &wr, &bad) == 0, "ibv_post_send");
    ibv_wc wc = a[size_t(i)]->wait_one();
    CHECK_OR_DIE(wc.status == IBV_WC_SUCCESS, "RDMA WRITE failed");
  }
  for (int i = 0; i < pairs; ++i)
    CHECK_OR_DIE(std::memcmp(dst.data() + size_t(i) * 64, src.data(), 64) == 0, "data check");
  std::printf("ready: %d connected QP pairs (%d QPs)\n", pairs, 2 * pairs);
  std::fflush(stdout);
  sleep(unsigned(seconds));
  a.clear();
  b.clear();
  ibv_dereg_mr(smr);
  ibv_dereg_mr(dmr);
  return 0;
}
