// io_uring against recvmmsg/sendmmsg for RoCEv2-sized UDP datagrams on loopback: the three
// paths UdpPort could move to io_uring, each measured both ways in one run.
//   rx    a sender thread floods (UDP_SEGMENT sends); the receiver drains with recvmmsg (64
//         per call, poll when empty) or with a multishot recvmsg on a provided-buffer ring,
//         with UDP_GRO (64 KiB buffers) when --gro 1: datagrams/s and the receiving
//         thread's CPU per datagram.
//   tx    64 datagrams per call as sendmmsg, as one UDP_SEGMENT sendmsg, as 64 io_uring
//         sendmsg SQEs per submit, and as one io_uring SEND_ZC with UDP_SEGMENT: the sending
//         thread's CPU per datagram.
//   pp    a busy-polled ping-pong of one small datagram each way: send + non-blocking
//         recvmmsg until it arrives, against io_uring (send SQE, multishot receive, the
//         completion ring read without a system call): half the round trip, system calls.
// Usage: uring_benchmark [--size BYTES] [--seconds S] [--rounds N] [--gro 0|1]
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

namespace {

constexpr int kBatch = 64;
constexpr size_t kSlot = 9000;  // a receive buffer: the largest datagram at MTU 9000
size_t gso_count(size_t size) { return std::min<size_t>(kBatch, 65000 / size); }
constexpr uint64_t kRecvTag = 1;  // user_data of the multishot receive (sends carry 0)

struct Options {
  size_t size = 1024 + 28 + 4;  // BTH + RETH + a 1 KiB payload + ICRC, about
  double seconds = 2.0;
  int rounds = 20000;
  bool gro = false;
  size_t slot() const { return gro ? 65536 : kSlot; }  // a receive buffer
};

double now_s(clockid_t clock = CLOCK_MONOTONIC) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}
double thread_cpu_s() { return now_s(CLOCK_THREAD_CPUTIME_ID); }

void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu % std::max(1u, std::thread::hardware_concurrency()), &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

void die(const char* what) {
  std::fprintf(stderr, "uring_benchmark: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

// A loopback UDP socket on an ephemeral port, with 8 MiB buffers.
int udp_socket(sockaddr_in& bound) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) die("socket");
  int buf = 8 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  bound = {};
  bound.sin_family = AF_INET;
  bound.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&bound), sizeof bound) != 0) die("bind");
  socklen_t len = sizeof bound;
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  return fd;
}

void connect_to(int fd, const sockaddr_in& to) {
  if (connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0) die("connect");
}

msghdr one_iov(iovec* iov) {
  msghdr m{};
  m.msg_iov = iov;
  m.msg_iovlen = 1;
  return m;
}

// kBatch receive buffers of `slot` bytes for recvmmsg.
struct MmsgSlots {
  std::vector<uint8_t> mem;
  iovec iov[kBatch];
  mmsghdr msgs[kBatch]{};
  explicit MmsgSlots(size_t slot = kSlot) : mem(kBatch * slot) {
    for (int i = 0; i < kBatch; ++i) {
      iov[i] = {mem.data() + i * slot, slot};
      msgs[i].msg_hdr = one_iov(&iov[i]);
    }
  }
  int receive(int fd) { return recvmmsg(fd, msgs, kBatch, MSG_DONTWAIT, nullptr); }
  // Datagrams in the n buffers the last receive filled (a GRO buffer holds several).
  size_t datagrams(int n, size_t size) const {
    size_t d = 0;
    for (int i = 0; i < n; ++i) d += (msgs[i].msg_len + size - 1) / size;
    return d;
  }
};

void wait_readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  poll(&p, 1, 10);
}

io_uring make_ring(unsigned entries, unsigned flags = 0) {
  io_uring ring{};
  int rc = io_uring_queue_init(entries, &ring, flags);
  if (rc < 0) {
    errno = -rc;
    die("io_uring_queue_init");
  }
  return ring;
}

// A provided-buffer ring (group 0) of `count` buffers of `size` bytes, registered on ring.
struct BufRing {
  io_uring_buf_ring* br = nullptr;
  std::vector<uint8_t> mem;
  unsigned count = 0, mask = 0;
  size_t size = 0;

  void setup(io_uring& ring, unsigned n, size_t bytes) {
    count = n;
    mask = n - 1;
    size = bytes;
    size_t ring_bytes = n * sizeof(io_uring_buf);
    void* p = mmap(nullptr, ring_bytes, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
    if (p == MAP_FAILED) die("mmap");
    br = static_cast<io_uring_buf_ring*>(p);
    io_uring_buf_reg reg{};
    reg.ring_addr = reinterpret_cast<uint64_t>(br);
    reg.ring_entries = n;
    reg.bgid = 0;
    int rc = io_uring_register_buf_ring(&ring, &reg, 0);
    if (rc < 0) {
      errno = -rc;
      die("io_uring_register_buf_ring");
    }
    io_uring_buf_ring_init(br);
    mem.resize(n * bytes);
    for (unsigned i = 0; i < n; ++i) give_back(i, i);
    io_uring_buf_ring_advance(br, n);
  }
  uint8_t* buf(unsigned id) { return mem.data() + size_t(id) * size; }
  void give_back(unsigned id, int offset) {
    io_uring_buf_ring_add(br, buf(id), unsigned(size), uint16_t(id), mask, offset);
  }
};

void arm_multishot(io_uring& ring, int fd, msghdr& shape) {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring);
  io_uring_prep_recvmsg_multishot(sqe, fd, &shape, 0);
  io_uring_sqe_set_data64(sqe, kRecvTag);
  sqe->flags |= IOSQE_BUFFER_SELECT;
  sqe->buf_group = 0;
  io_uring_submit(&ring);
}

// Takes every completion waiting on a multishot receive ring; re-arms it when the kernel
// ended it. Returns the datagrams seen.
size_t reap_multishot(io_uring& ring, BufRing& bufs, int fd, msghdr& shape, uint64_t& calls,
                      size_t size) {
  size_t got = 0;
  unsigned head, seen = 0;
  io_uring_cqe* cqe;
  bool rearm = false;
  io_uring_for_each_cqe(&ring, head, cqe) {
    ++seen;
    if (cqe->user_data != kRecvTag) continue;  // a send's completion
    if (cqe->res >= 0 && (cqe->flags & IORING_CQE_F_BUFFER)) {
      unsigned id = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
      if (io_uring_recvmsg_out* out = io_uring_recvmsg_validate(bufs.buf(id), cqe->res, &shape))
        got += (io_uring_recvmsg_payload_length(out, cqe->res, &shape) + size - 1) / size;
      bufs.give_back(id, 0);
      io_uring_buf_ring_advance(bufs.br, 1);
    }
    if (!(cqe->flags & IORING_CQE_F_MORE)) rearm = true;
  }
  io_uring_cq_advance(&ring, seen);
  if (rearm) {
    arm_multishot(ring, fd, shape);
    ++calls;
  }
  return got;
}

// ---- rx: receive throughput ----

size_t tx_gso(int fd, std::vector<uint8_t>& payload, size_t size);

// Sends as UdpPort does (UDP_SEGMENT) until stopped.
struct Flood {
  std::atomic<bool> stop{false};
  std::thread thread;
  void start(int fd, size_t size) {
    thread = std::thread([this, fd, size] {
      pin(0);
      std::vector<uint8_t> payload(size * kBatch, 0x5a);
      while (!stop.load(std::memory_order_relaxed)) tx_gso(fd, payload, size);
    });
  }
  void finish() {
    stop = true;
    thread.join();
  }
};

struct RxResult {
  double per_s = 0, cpu_ns_per_datagram = 0;
};

RxResult rx_recvmmsg(int fd, const Options& o) {
  MmsgSlots slots(o.slot());
  size_t got = 0;
  double t0 = now_s(), c0 = thread_cpu_s();
  while (now_s() - t0 < o.seconds) {
    int n = slots.receive(fd);
    if (n > 0) got += slots.datagrams(n, o.size);
    else wait_readable(fd);
  }
  double wall = now_s() - t0, cpu = thread_cpu_s() - c0;
  return {double(got) / wall, cpu * 1e9 / double(std::max<size_t>(got, 1))};
}

RxResult rx_uring(int fd, const Options& o) {
  io_uring ring = make_ring(256);
  BufRing bufs;
  bufs.setup(ring, o.gro ? 64 : 512, o.slot());
  msghdr shape{};  // no name, no control: only the payload
  arm_multishot(ring, fd, shape);
  size_t got = 0;
  double t0 = now_s(), c0 = thread_cpu_s();
  while (now_s() - t0 < o.seconds) {
    uint64_t calls = 0;
    size_t n = reap_multishot(ring, bufs, fd, shape, calls, o.size);
    got += n;
    if (n == 0) {
      io_uring_cqe* cqe;
      __kernel_timespec ts{0, 10'000'000};
      io_uring_wait_cqe_timeout(&ring, &cqe, &ts);
    }
  }
  double wall = now_s() - t0, cpu = thread_cpu_s() - c0;
  io_uring_queue_exit(&ring);
  return {double(got) / wall, cpu * 1e9 / double(std::max<size_t>(got, 1))};
}

template <typename Receive>
RxResult run_rx(const Options& o, Receive receive) {
  sockaddr_in rx_addr{}, tx_addr{};
  int rx = udp_socket(rx_addr), tx = udp_socket(tx_addr);
  connect_to(tx, rx_addr);
  int on = 1;
  if (o.gro && setsockopt(rx, SOL_UDP, UDP_GRO, &on, sizeof on) != 0) die("UDP_GRO");
  Flood flood;
  RxResult r;
  std::thread receiver([&] {
    pin(1);
    r = receive(rx, o);
  });
  flood.start(tx, o.size);
  receiver.join();
  flood.finish();
  close(rx);
  close(tx);
  return r;
}

// ---- tx: send cost ----

struct TxResult {
  double per_s = 0, cpu_ns_per_datagram = 0;
};

// A thread that drains a socket so that the sender never meets a full buffer.
struct Drain {
  std::atomic<bool> stop{false};
  std::thread thread;
  void start(int fd) {
    thread = std::thread([this, fd] {
      pin(1);
      MmsgSlots slots;
      while (!stop.load(std::memory_order_relaxed)) {
        if (slots.receive(fd) <= 0) wait_readable(fd);
      }
    });
  }
  void finish() {
    stop = true;
    thread.join();
  }
};

// Sends 64 datagrams per call with `send_batch(fd, payload)` for o.seconds.
template <typename SendBatch>
TxResult run_tx(const Options& o, SendBatch send_batch) {
  sockaddr_in rx_addr{}, tx_addr{};
  int rx = udp_socket(rx_addr), tx = udp_socket(tx_addr);
  connect_to(tx, rx_addr);
  Drain drain;
  drain.start(rx);
  pin(0);
  std::vector<uint8_t> payload(o.size * kBatch, 0x5a);
  size_t sent = 0;
  double t0 = now_s(), c0 = thread_cpu_s();
  while (now_s() - t0 < o.seconds) sent += send_batch(tx, payload, o.size);
  double wall = now_s() - t0, cpu = thread_cpu_s() - c0;
  drain.finish();
  close(rx);
  close(tx);
  return {double(sent) / wall, cpu * 1e9 / double(std::max<size_t>(sent, 1))};
}

size_t tx_sendmmsg(int fd, std::vector<uint8_t>& payload, size_t size) {
  iovec iov[kBatch];
  mmsghdr msgs[kBatch]{};
  for (int i = 0; i < kBatch; ++i) {
    iov[i] = {payload.data() + i * size, size};
    msgs[i].msg_hdr = one_iov(&iov[i]);
  }
  int n = sendmmsg(fd, msgs, kBatch, 0);
  return n > 0 ? size_t(n) : 0;
}

// One sendmsg of 64 datagrams with UDP_SEGMENT (what UdpPort does when the kernel lets it).
msghdr gso_msg(iovec& iov, std::vector<uint8_t>& payload, size_t size, char (&cbuf)[64]) {
  iov = {payload.data(), size * gso_count(size)};
  msghdr m = one_iov(&iov);
  m.msg_control = cbuf;
  m.msg_controllen = CMSG_SPACE(sizeof(uint16_t));
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_UDP;
  c->cmsg_type = UDP_SEGMENT;
  c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
  uint16_t seg = uint16_t(size);
  std::memcpy(CMSG_DATA(c), &seg, sizeof seg);
  return m;
}

size_t tx_gso(int fd, std::vector<uint8_t>& payload, size_t size) {
  iovec iov;
  char cbuf[64] = {};
  msghdr m = gso_msg(iov, payload, size, cbuf);
  return sendmsg(fd, &m, 0) > 0 ? gso_count(size) : 0;
}

struct UringTx {
  io_uring ring = make_ring(256);
  ~UringTx() { io_uring_queue_exit(&ring); }

  // Waits for `n` plain completions; counts those that sent.
  size_t complete(unsigned n) {
    size_t ok = 0;
    for (; n > 0; --n) {
      io_uring_cqe* cqe;
      if (io_uring_wait_cqe(&ring, &cqe) != 0) break;
      if (cqe->res > 0) ++ok;
      io_uring_cqe_seen(&ring, cqe);
    }
    return ok;
  }

  size_t sendmsg_sqes(int fd, std::vector<uint8_t>& payload, size_t size) {
    iovec iov[kBatch];
    msghdr msgs[kBatch];
    for (int i = 0; i < kBatch; ++i) {
      iov[i] = {payload.data() + i * size, size};
      msgs[i] = one_iov(&iov[i]);
      io_uring_prep_sendmsg(io_uring_get_sqe(&ring), fd, &msgs[i], 0);
    }
    io_uring_submit_and_wait(&ring, kBatch);
    return complete(kBatch);
  }

  size_t gso_zc(int fd, std::vector<uint8_t>& payload, size_t size) {
    iovec iov;
    char cbuf[64] = {};
    msghdr m = gso_msg(iov, payload, size, cbuf);
    io_uring_prep_sendmsg_zc(io_uring_get_sqe(&ring), fd, &m, 0);
    io_uring_submit(&ring);
    return complete_zc() ? gso_count(size) : 0;
  }

  // A zero-copy send posts its result (F_MORE set while a notification is to come) and
  // then the notification that the kernel let go of the buffer.
  bool complete_zc() {
    bool ok = false, pending = true;
    while (pending) {
      io_uring_cqe* cqe;
      if (io_uring_wait_cqe(&ring, &cqe) != 0) return false;
      if (cqe->flags & IORING_CQE_F_NOTIF) {
        pending = false;
      } else {
        ok = cqe->res > 0;
        pending = cqe->flags & IORING_CQE_F_MORE;
      }
      io_uring_cqe_seen(&ring, cqe);
    }
    return ok;
  }
};

// ---- pp: busy-polled ping-pong ----

struct PpResult {
  double half_rtt_us = 0, syscalls_per_round = 0;
};

// Echo side for both variants: busy-polls with recv, answers with send.
void echo(int fd, int rounds, size_t size) {
  pin(1);
  std::vector<uint8_t> buf(kSlot);
  for (int i = 0; i < rounds;) {
    ssize_t n = recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n <= 0) continue;
    send(fd, buf.data(), size, 0);
    ++i;
  }
}

template <typename Client>
PpResult run_pp(const Options& o, size_t size, Client client) {
  sockaddr_in a_addr{}, b_addr{};
  int a = udp_socket(a_addr), b = udp_socket(b_addr);
  connect_to(a, b_addr);
  connect_to(b, a_addr);
  std::thread server(echo, b, o.rounds, size);
  pin(0);
  uint64_t syscalls = 0;
  double t0 = now_s();
  client(a, o.rounds, size, syscalls);
  double wall = now_s() - t0;
  server.join();
  close(a);
  close(b);
  return {wall * 1e6 / o.rounds / 2, double(syscalls) / o.rounds};
}

void pp_syscalls(int fd, int rounds, size_t size, uint64_t& calls) {
  std::vector<uint8_t> buf(kSlot, 1);
  for (int i = 0; i < rounds; ++i) {
    send(fd, buf.data(), size, 0);
    ++calls;
    while (++calls, recv(fd, buf.data(), buf.size(), MSG_DONTWAIT) <= 0) {
    }
  }
}

// With COOP_TASKRUN the kernel does not interrupt the thread to run the receive's task
// work; TASKRUN_FLAG tells it there is some, and io_uring_get_events runs it.
template <unsigned kFlags>
void pp_uring(int fd, int rounds, size_t size, uint64_t& calls) {
  io_uring ring = make_ring(64, kFlags);
  BufRing bufs;
  bufs.setup(ring, 64, kSlot);
  msghdr shape{};
  arm_multishot(ring, fd, shape);
  std::vector<uint8_t> buf(kSlot, 1);
  for (int i = 0; i < rounds; ++i) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    io_uring_prep_send(sqe, fd, buf.data(), size, 0);
    io_uring_sqe_set_data64(sqe, 0);
    io_uring_submit(&ring);
    ++calls;
    // The send's completion and the answer land in the ring; polling it is a memory read.
    while (reap_multishot(ring, bufs, fd, shape, calls, size) == 0) {
      if ((kFlags & IORING_SETUP_TASKRUN_FLAG) &&
          (IO_URING_READ_ONCE(*ring.sq.kflags) & IORING_SQ_TASKRUN)) {
        io_uring_get_events(&ring);
        ++calls;
      }
    }
  }
  io_uring_queue_exit(&ring);
}

}  // namespace

namespace {

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--size") o.size = std::strtoul(argv[i + 1], nullptr, 10);
    else if (k == "--seconds") o.seconds = std::strtod(argv[i + 1], nullptr);
    else if (k == "--rounds") o.rounds = int(std::strtol(argv[i + 1], nullptr, 10));
    else if (k == "--gro") o.gro = std::strtol(argv[i + 1], nullptr, 10) != 0;
    else {
      std::fprintf(stderr, "usage: uring_benchmark [--size B] [--seconds S] [--rounds N] [--gro 0|1]\n");
      std::exit(2);
    }
  }
  if (o.size == 0 || o.size > kSlot) {
    std::fprintf(stderr, "uring_benchmark: --size must be 1..%zu\n", kSlot);
    std::exit(2);
  }
  return o;
}

void print_rx(const char* name, const RxResult& r) {
  std::printf("rx  %-34s %8.3f M datagrams/s  %7.0f ns CPU/datagram\n", name, r.per_s / 1e6,
              r.cpu_ns_per_datagram);
}
void print_tx(const char* name, const TxResult& r) {
  std::printf("tx  %-34s %8.3f M datagrams/s  %7.0f ns CPU/datagram\n", name, r.per_s / 1e6,
              r.cpu_ns_per_datagram);
}
void print_pp(const char* name, const PpResult& r) {
  std::printf("pp  %-34s %8.2f us half round trip  %6.1f calls/round\n", name, r.half_rtt_us,
              r.syscalls_per_round);
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  setvbuf(stdout, nullptr, _IOLBF, 0);
  std::printf("datagrams of %zu bytes on loopback, %.1f s per figure, %d ping-pong rounds, "
              "UDP_GRO %s\n", o.size, o.seconds, o.rounds, o.gro ? "on" : "off");
  print_rx("recvmmsg x64 (poll when empty)", run_rx(o, rx_recvmmsg));
  print_rx("io_uring multishot recvmsg, buf ring", run_rx(o, rx_uring));
  print_tx("sendmmsg x64", run_tx(o, tx_sendmmsg));
  print_tx("sendmsg UDP_SEGMENT ", run_tx(o, tx_gso));
  {
    UringTx u;
    print_tx("io_uring 64 sendmsg SQEs per submit",
             run_tx(o, [&](int fd, auto& p, size_t s) { return u.sendmsg_sqes(fd, p, s); }));
  }
  {
    UringTx u;
    print_tx("io_uring sendmsg_zc UDP_SEGMENT",
             run_tx(o, [&](int fd, auto& p, size_t s) { return u.gso_zc(fd, p, s); }));
  }
  print_pp("send + recv(MSG_DONTWAIT) polling", run_pp(o, 64, pp_syscalls));
  print_pp("io_uring send + multishot, ring polled", run_pp(o, 64, pp_uring<0>));
  print_pp("the same, COOP_TASKRUN + TASKRUN_FLAG",
           run_pp(o, 64, pp_uring<IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG>));
  return 0;
}
