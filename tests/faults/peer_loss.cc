// vrnic_peer_loss: an ordinary verbs program that loses its peer mid-transfer and checks the
// error path: RETRY_EXC_ERR on the oldest WR, WR_FLUSH_ERR on every later one, QP_FATAL.
//   vrnic_peer_loss server PORT
//   vrnic_peer_loss client HOST PORT [RUN_MS [write|read|atomic]]
// The server sends its pid; the client writes to it for RUN_MS, then SIGKILLs it (the peer
// vanishes without a word, as a crashed host would) and measures how long the QP takes to
// give up. READs and atomics exercise the other timer path: their answers, not ACKs, are
// what the requester waits for. With timeout 14 (67 ms) and retry_cnt 7 the spec allows 8 tries (C9-140 /
// o9-35), so the bound asserted is 10 s.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../integrity/channel.h"
#include "../integrity/rc_endpoint.h"

namespace {

using namespace vrnic_test;
using Clock = std::chrono::steady_clock;

constexpr size_t kBuf = 1 << 20;
constexpr uint32_t kMsg = 65536;
constexpr int kDepth = 100;           // outstanding WRs kept posted (the QP holds 128)
constexpr double kBoundS = 10.0;      // 8 x 67 ms plus generous slack for a loaded machine

struct Hello {
  QpInfo qp;
  uint64_t addr = 0;
  uint32_t rkey = 0;
  int32_t pid = 0;
};

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The server is on this machine: gone once /proc has no entry or shows a zombie.
bool peer_gone(int pid) {
  char path[64], buf[256] = {};
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  int fd = open(path, O_RDONLY);
  if (fd < 0) return true;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  const char* rp = n > 0 ? strrchr(buf, ')') : nullptr;
  return rp == nullptr || (rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X'));
}

int run_server(uint16_t port) {
  Device dev = Device::open();
  RcEndpoint ep(dev);
  std::vector<uint8_t> mem(kBuf);
  ibv_mr* mr = dev.reg(mem.data(), mem.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                                   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
  int lfd = Channel::listen_on(port);
  CHECK_OR_DIE(lfd >= 0, "listen");
  Channel ch = Channel::accept_from(lfd);
  CHECK_OR_DIE(ch.ok(), "accept");
  Hello mine{ep.local_info(), reinterpret_cast<uintptr_t>(mem.data()), mr->rkey,
             static_cast<int32_t>(getpid())};
  Hello peer;
  CHECK_OR_DIE(ch.send(mine) && ch.recv(peer), "exchange");
  ep.connect(peer.qp);
  char go = 0;
  CHECK_OR_DIE(ch.send(go), "ready");
  printf("server: connected, waiting to be killed\n");
  fflush(stdout);
  for (;;) pause();
}

int run_client(const std::string& host, uint16_t port, int run_ms, const std::string& op) {
  const ibv_wr_opcode opcode = op == "read"     ? IBV_WR_RDMA_READ
                               : op == "atomic" ? IBV_WR_ATOMIC_FETCH_AND_ADD
                                                : IBV_WR_RDMA_WRITE;
  const uint32_t msg = opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ? 8 : kMsg;
  Device dev = Device::open();
  RcEndpoint ep(dev);
  std::vector<uint8_t> mem(kBuf, 0x5a);
  ibv_mr* mr = dev.reg(mem.data(), mem.size(), IBV_ACCESS_LOCAL_WRITE);
  Channel ch = Channel::connect_to(host, port);
  CHECK_OR_DIE(ch.ok(), "connect");
  Hello mine{ep.local_info(), 0, 0, static_cast<int32_t>(getpid())};
  Hello peer;
  CHECK_OR_DIE(ch.send(mine) && ch.recv(peer), "exchange");
  ep.connect(peer.qp);
  char go = 0;
  CHECK_OR_DIE(ch.recv(go), "ready");

  uint64_t next_id = 0, ok = 0, retry_exc = 0, flushed = 0, other = 0, bad_order = 0;
  uint64_t first_err_id = UINT64_MAX;
  int outstanding = 0;
  auto post = [&]() {
    const uint64_t off = (next_id % 16) * kMsg;
    ibv_sge sge{reinterpret_cast<uintptr_t>(mem.data() + off), msg, mr->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = next_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = opcode;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
      wr.wr.atomic.remote_addr = peer.addr + off;
      wr.wr.atomic.compare_add = 1;
      wr.wr.atomic.rkey = peer.rkey;
    } else {
      wr.wr.rdma.remote_addr = peer.addr + off;
      wr.wr.rdma.rkey = peer.rkey;
    }
    int rc = ibv_post_send(ep.qp(), &wr, &bad);
    if (rc != 0) die("ibv_post_send: " + std::string(strerror(rc)));
    ++next_id;
    ++outstanding;
  };
  Clock::time_point killed_at{}, error_at{};
  bool killed = false;
  auto start = Clock::now();
  uint64_t expect_id = 0;
  while (!killed || outstanding > 0) {
    if (!killed && since(start) * 1000 >= run_ms) {
      CHECK_OR_DIE(kill(peer.pid, SIGKILL) == 0, "kill server");
      killed_at = Clock::now();
      killed = true;
      // SIGKILL takes effect asynchronously: until the server is really gone it may still
      // answer. Wait for that, then fill the send queue, so that many WRs are outstanding
      // on a dead peer (the ones posted before may still have completed successfully).
      while (!peer_gone(peer.pid) && since(killed_at) < 5) std::this_thread::yield();
      printf("client: server %s %.3f s after SIGKILL\n", peer_gone(peer.pid) ? "gone" : "STILL THERE",
             since(killed_at));
      while (outstanding < kDepth) post();
      printf("client: SIGKILL server pid %d after %d ms, %" PRIu64 " WRs done, %d outstanding\n",
             peer.pid, run_ms, ok, outstanding);
      fflush(stdout);
    }
    while (!killed && outstanding < kDepth) post();
    ibv_wc wc[32];
    int n = ibv_poll_cq(ep.cq(), 32, wc);
    CHECK_OR_DIE(n >= 0, "ibv_poll_cq");
    for (int i = 0; i < n; ++i) {
      --outstanding;
      if (wc[i].wr_id != expect_id) ++bad_order;  // RC completes send WRs in order (C10-1)
      expect_id = wc[i].wr_id + 1;
      switch (wc[i].status) {
        case IBV_WC_SUCCESS:
          if (retry_exc || flushed) ++bad_order;  // nothing succeeds after the error
          else ++ok;
          break;
        case IBV_WC_RETRY_EXC_ERR:
          if (retry_exc || flushed) ++bad_order;  // exactly one, and before the flushes
          if (!retry_exc) {
            error_at = Clock::now();
            first_err_id = wc[i].wr_id;
          }
          ++retry_exc;
          break;
        case IBV_WC_WR_FLUSH_ERR:
          if (!retry_exc) ++bad_order;
          ++flushed;
          break;
        default:
          ++other;
          fprintf(stderr, "client: wr %" PRIu64 ": unexpected %s (%d)\n", wc[i].wr_id,
                  ibv_wc_status_str(wc[i].status), wc[i].status);
      }
    }
    if (killed && since(killed_at) > 3 * kBoundS) {
      fprintf(stderr, "client: FAIL %d WRs still outstanding %.1f s after the kill\n",
              outstanding, since(killed_at));
      return 1;
    }
  }
  double give_up = retry_exc ? std::chrono::duration<double>(error_at - killed_at).count() : -1;
  printf("client: %" PRIu64 " posted, %" PRIu64 " success, %" PRIu64 " RETRY_EXC_ERR (wr %" PRIu64
         ", %.2f s after the kill), %" PRIu64 " WR_FLUSH_ERR, %" PRIu64 " other, %" PRIu64
         " out of order\n",
         next_id, ok, retry_exc, first_err_id, give_up, flushed, other, bad_order);

  // The QP went to ERR: the async event says so (o11-17: QP_FATAL on a transport error).
  int failures = 0;
  pollfd p{dev.ctx->async_fd, POLLIN, 0};
  int flags = fcntl(dev.ctx->async_fd, F_GETFL);
  fcntl(dev.ctx->async_fd, F_SETFL, flags | O_NONBLOCK);
  bool fatal = false;
  auto ev_deadline = Clock::now() + std::chrono::seconds(5);
  while (!fatal && Clock::now() < ev_deadline) {
    if (poll(&p, 1, 500) <= 0) continue;
    ibv_async_event ev;
    if (ibv_get_async_event(dev.ctx, &ev) != 0) continue;
    printf("client: async event %s (%d)%s\n", ibv_event_type_str(ev.event_type), ev.event_type,
           ev.element.qp == ep.qp() ? " on our QP" : "");
    if (ev.event_type == IBV_EVENT_QP_FATAL && ev.element.qp == ep.qp()) fatal = true;
    ibv_ack_async_event(&ev);
  }
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  int qrc = ibv_query_qp(ep.qp(), &attr, IBV_QP_STATE, &init);
  printf("client: QP state after the error: %d (ERR is %d)\n", qrc ? -1 : attr.qp_state,
         IBV_QPS_ERR);

  auto fail = [&](const char* why) {
    fprintf(stderr, "client: FAIL %s\n", why);
    ++failures;
  };
  if (ok == 0) fail("no WR succeeded before the kill");
  if (retry_exc != 1) fail("want exactly one IBV_WC_RETRY_EXC_ERR");
  if (flushed == 0) fail("no IBV_WC_WR_FLUSH_ERR after the retry error");
  if (other != 0) fail("unexpected completion status");
  if (bad_order != 0) fail("completions out of order or a success after the error");
  if (ok + retry_exc + flushed + other != next_id) fail("a WR never completed");
  if (give_up < 0 || give_up > kBoundS) fail("the QP did not give up within 10 s");
  if (!fatal) fail("no IBV_EVENT_QP_FATAL for the QP");
  if (qrc != 0 || attr.qp_state != IBV_QPS_ERR) fail("QP is not in ERR");
  printf("client peer_loss %s: %s\n", op.c_str(), failures == 0 ? "PASS" : "FAIL");
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  std::string role = argc > 1 ? argv[1] : "";
  if (role == "server" && argc == 3) return run_server(static_cast<uint16_t>(atoi(argv[2])));
  std::string op = argc > 5 ? argv[5] : "write";
  if (role == "client" && argc >= 4 && (op == "write" || op == "read" || op == "atomic"))
    return run_client(argv[2], static_cast<uint16_t>(atoi(argv[3])), argc > 4 ? atoi(argv[4]) : 1000,
                      op);
  fprintf(stderr, "usage: %s server PORT | client HOST PORT [RUN_MS [write|read|atomic]]\n",
          argv[0]);
  return 2;
}
