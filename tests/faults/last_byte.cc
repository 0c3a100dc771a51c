// vrnic_last_byte: a receiver spinning on the last byte of a multi-packet RDMA WRITE (as
// ib_write_lat does) must never see it change before every byte before it has landed, and
// never see a corrupted byte: each time the byte changes, the whole buffer is compared.
//   vrnic_last_byte server PORT
//   vrnic_last_byte client HOST PORT [ITERATIONS [SIZE]]
// Iteration k: the client fills its buffer with pattern k (the last byte names k) and WRITEs
// it; the server spins on its last byte, checks the buffer against pattern k when it changes,
// then WRITEs k into the client's flag word, which the client spins on before the next round.
// Run under `vrnic run --faults corrupt=...,loss=...`: corrupted packets must be dropped
// (ICRC) and resent, never placed.
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../integrity/channel.h"
#include "../integrity/rc_endpoint.h"

namespace {

using namespace vrnic_test;
using Clock = std::chrono::steady_clock;

struct Hello {
  QpInfo qp;
  uint64_t addr = 0;
  uint32_t rkey = 0;
  uint32_t size = 0;
  uint32_t iterations = 0;
};

// Never 0 and different from the previous iteration's: the change is the signal.
uint8_t last_of(uint32_t k) { return static_cast<uint8_t>(k % 255 + 1); }

uint8_t pattern(uint32_t k, size_t i, size_t size) {
  if (i == size - 1) return last_of(k);
  return static_cast<uint8_t>(k * 131 + i * 7 + (i >> 10) * 13);
}

// Spins until *p differs from `from` (or the deadline passes); returns the new value.
template <typename T>
bool spin_change(volatile T* p, T from, T& now, int timeout_s) {
  const auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  for (uint32_t n = 0;; ++n) {
    now = *p;
    if (now != from) return true;
    if ((n & 0xfffff) == 0 && Clock::now() > deadline) return false;
  }
}

void write_to(RcEndpoint& ep, ibv_mr* mr, const void* src, uint32_t len, uint64_t raddr,
              uint32_t rkey) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(src), len, mr->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  CHECK_OR_DIE(ibv_post_send(ep.qp(), &wr, &bad) == 0, "ibv_post_send");
  ibv_wc wc = ep.wait_one();
  if (wc.status != IBV_WC_SUCCESS)
    die(std::string("WRITE completed with ") + ibv_wc_status_str(wc.status));
}

// Connects over the TCP side channel; each side learns the other's buffer.
Hello exchange(Channel& ch, RcEndpoint& ep, const Hello& mine) {
  Hello peer;
  CHECK_OR_DIE(ch.send(mine) && ch.recv(peer), "exchange");
  ep.connect(peer.qp);
  char go = 0;
  CHECK_OR_DIE(ch.send(go) && ch.recv(go), "ready");
  return peer;
}

int run_server(uint16_t port) {
  Device dev = Device::open();
  RcEndpoint ep(dev);
  int lfd = Channel::listen_on(port);
  CHECK_OR_DIE(lfd >= 0, "listen");
  Channel ch = Channel::accept_from(lfd);
  CHECK_OR_DIE(ch.ok(), "accept");
  Hello peer;
  CHECK_OR_DIE(ch.recv(peer), "hello");
  const size_t size = peer.size;
  std::vector<uint8_t> mem(size, 0);
  uint64_t word = 0;
  ibv_mr* mr = dev.reg(mem.data(), size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ibv_mr* wmr = dev.reg(&word, sizeof word, IBV_ACCESS_LOCAL_WRITE);
  Hello mine{ep.local_info(), reinterpret_cast<uintptr_t>(mem.data()), mr->rkey, peer.size,
             peer.iterations};
  CHECK_OR_DIE(ch.send(mine), "hello");
  ep.connect(peer.qp);
  char go = 0;
  CHECK_OR_DIE(ch.send(go) && ch.recv(go), "ready");
  volatile uint8_t* last = mem.data() + size - 1;
  uint64_t bad_bytes = 0, bad_rounds = 0;
  uint8_t seen = 0;
  for (uint32_t k = 1; k <= peer.iterations; ++k) {
    uint8_t now = 0;
    if (!spin_change(last, seen, now, 60)) die("the last byte did not change within 60 s");
    seen = now;
    // The buffer as it is at the moment the byte changed: nothing may be missing or wrong.
    uint64_t wrong = 0;
    size_t first = size;
    for (size_t i = 0; i < size; ++i) {
      if (mem[i] != pattern(k, i, size)) {
        if (first == size) first = i;
        ++wrong;
      }
    }
    if (now != last_of(k) || wrong) {
      ++bad_rounds;
      bad_bytes += wrong;
      fprintf(stderr, "server: FAIL round %u: last byte %u (want %u), %" PRIu64
              " bytes differ, first at %zu\n", k, now, last_of(k), wrong, first);
    }
    word = k;
    write_to(ep, wmr, &word, sizeof word, peer.addr, peer.rkey);
  }
  // Either side's last WRITE may still wait for its ACK when the other sees its data (the
  // injector drops ACKs too): each side stays until the other says its WRITE completed, or
  // the WRITE would be resent to a process that has exited (RETRY_EXC_ERR after 8 tries).
  CHECK_OR_DIE(ch.send(go) && ch.recv(go), "done");
  printf("server: %u rounds of %zu B, %" PRIu64 " rounds wrong, %" PRIu64 " bytes wrong\n",
         peer.iterations, size, bad_rounds, bad_bytes);
  printf("server last_byte: %s\n", bad_rounds == 0 ? "PASS" : "FAIL");
  return bad_rounds == 0 ? 0 : 1;
}

int run_client(const std::string& host, uint16_t port, uint32_t iterations, uint32_t size) {
  Device dev = Device::open();
  RcEndpoint ep(dev);
  std::vector<uint8_t> mem(size);
  uint64_t flag = 0;
  ibv_mr* mr = dev.reg(mem.data(), size, IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* fmr = dev.reg(&flag, sizeof flag, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  Channel ch = Channel::connect_to(host, port);
  CHECK_OR_DIE(ch.ok(), "connect");
  Hello mine{ep.local_info(), reinterpret_cast<uintptr_t>(&flag), fmr->rkey, size, iterations};
  const Hello peer = exchange(ch, ep, mine);
  const auto t0 = Clock::now();
  for (uint32_t k = 1; k <= iterations; ++k) {
    for (size_t i = 0; i < size; ++i) mem[i] = pattern(k, i, size);
    write_to(ep, mr, mem.data(), size, peer.addr, peer.rkey);
    uint64_t now = 0;
    if (!spin_change(static_cast<volatile uint64_t*>(&flag), uint64_t{k - 1}, now, 60))
      die("no answer from the server within 60 s");
    CHECK_OR_DIE(now == k, "the server answered another round");
  }
  char done = 0;
  CHECK_OR_DIE(ch.recv(done), "done");  // the server's last WRITE has completed
  CHECK_OR_DIE(ch.send(done), "done");  // and so has ours (write_to waited for it)
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  printf("client: %u WRITEs of %u B in %.2f s\n", iterations, size, s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  std::string role = argc > 1 ? argv[1] : "";
  if (role == "server" && argc == 3) return run_server(static_cast<uint16_t>(atoi(argv[2])));
  if (role == "client" && argc >= 4)
    return run_client(argv[2], static_cast<uint16_t>(atoi(argv[3])),
                      argc > 4 ? static_cast<uint32_t>(atoi(argv[4])) : 300,
                      argc > 5 ? static_cast<uint32_t>(atoi(argv[5])) : 256 * 1024);
  fprintf(stderr, "usage: %s server PORT | client HOST PORT [ITERATIONS [SIZE]]\n", argv[0]);
  return 2;
}
