// The kernel's floor under ib_send_lat: a busy-polled UDP ping-pong between two processes on
// loopback, in the shapes a RoCEv2 SEND answered by a SEND can take, each measured in turn:
//   single      one 20-byte datagram each way (what a UDP ping-pong, sockperf, sends)
//   pktinfo     the same, the receive socket asking for IP_PKTINFO as well as IP_RECVTOS
//   pair        the answer and the ACK of the peer's request as one UDP_SEGMENT send of two
//               20-byte datagrams, received as one UDP_GRO buffer: what vrnic sends
//   pair_conn   the same from a connected send socket (no route lookup per send; Linux then
//               numbers the IPv4 IDs from a random start, which the ICRC covers: not usable)
//   full_ack    a 4 KiB SEND's one full packet (4112 bytes) and the ACK as one UDP_SEGMENT send
//               of two datagrams: a message that fills its packets, its ACK in the same group
//   tail_ack    a 4200-byte SEND (a full packet and a 120-byte last one) as one UDP_SEGMENT
//               send and the ACK as a second message of the same sendmmsg: a short last
//               packet ends the group, so the receiver takes two datagrams
// Every receive socket has IP_RECVTOS and UDP_GRO, as vrnic's; sends come from a socket of
// their own bound to a source port, receives are recvmmsg without blocking, asking for one.
// Prints the median and the average of half the round trip, in us, per shape and round.
// Usage: pingpong_benchmark [--rounds N] [--iters N]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

enum class Shape { kSingle, kPktinfo, kPair, kPairConnected, kFullAck, kTailAck };
constexpr const char* kNames[] = {"single", "pktinfo", "pair", "pair_conn", "full_ack", "tail_ack"};
constexpr uint16_t kRxPort = 24791, kTxPort = 24792;
constexpr size_t kPacket = 20;  // BTH + 4 bytes + ICRC: a 2-byte SEND or an ACK
constexpr size_t kFull = 4112;  // BTH + 4096 bytes + ICRC: a full packet at a 4 KiB MTU
constexpr size_t kTail = 120;   // BTH + 104 bytes + ICRC: the last packet of a 4200-byte SEND

// The messages of one sendmmsg: each `len` bytes, cut into datagrams of `seg` (0: one).
struct Message {
  size_t seg, len;
};
struct Round {
  Message msgs[2];
  size_t count;
  size_t bytes() const { return msgs[0].len + (count > 1 ? msgs[1].len : 0); }
};
Round round_of(Shape s) {
  switch (s) {
    case Shape::kPair:
    case Shape::kPairConnected: return {{{kPacket, 2 * kPacket}}, 1};
    case Shape::kFullAck: return {{{kFull, kFull + kPacket}}, 1};
    case Shape::kTailAck: return {{{kFull, kFull + kTail}, {0, kPacket}}, 2};
    default: return {{{0, kPacket}}, 1};
  }
}

uint64_t now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000ull + static_cast<uint64_t>(t.tv_nsec);
}

sockaddr_in addr(const char* ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip, &a.sin_addr);
  return a;
}

int bound_socket(const char* ip, uint16_t port) {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
  int df = IP_PMTUDISC_DO;
  setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &df, sizeof df);
  sockaddr_in a = addr(ip, port);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    std::perror("bind");
    std::exit(1);
  }
  return fd;
}

// One end: `me` sends to `peer`; the client sends first and times each round trip.
struct End {
  Shape shape;
  int rx, tx;
  sockaddr_in to;
  uint8_t bytes[kFull + kTail] = {};
  uint8_t buf[65536];
  uint8_t control[128];

  End(Shape s, const char* me, const char* peer) : shape(s) {
    rx = bound_socket(me, kRxPort);
    tx = bound_socket(me, kTxPort);
    const int one = 1;
    setsockopt(rx, IPPROTO_IP, IP_RECVTOS, &one, sizeof one);
    setsockopt(rx, SOL_UDP, UDP_GRO, &one, sizeof one);
    if (s == Shape::kPktinfo) setsockopt(rx, IPPROTO_IP, IP_PKTINFO, &one, sizeof one);
    to = addr(peer, kRxPort);
    if (s == Shape::kPairConnected &&
        connect(tx, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
      std::perror("connect");
      std::exit(1);
    }
  }
  ~End() {
    close(rx);
    close(tx);
  }

  void send() {
    const Round r = round_of(shape);
    iovec iov[2];
    alignas(cmsghdr) uint8_t c[2][CMSG_SPACE(sizeof(uint16_t))] = {};
    mmsghdr m[2] = {};
    for (size_t i = 0; i < r.count; ++i) {
      msghdr& h = m[i].msg_hdr;
      iov[i] = {bytes, r.msgs[i].len};
      if (shape != Shape::kPairConnected) {
        h.msg_name = &to;
        h.msg_namelen = sizeof to;
      }
      h.msg_iov = &iov[i];
      h.msg_iovlen = 1;
      if (r.msgs[i].seg == 0) continue;
      h.msg_control = c[i];
      h.msg_controllen = sizeof c[i];
      cmsghdr* ch = CMSG_FIRSTHDR(&h);
      ch->cmsg_level = SOL_UDP;
      ch->cmsg_type = UDP_SEGMENT;
      ch->cmsg_len = CMSG_LEN(sizeof(uint16_t));
      const uint16_t seg = static_cast<uint16_t>(r.msgs[i].seg);
      std::memcpy(CMSG_DATA(ch), &seg, sizeof seg);
    }
    if (syscall(SYS_sendmmsg, tx, m, r.count, MSG_DONTWAIT) != static_cast<long>(r.count))
      std::perror("sendmmsg");
  }

  // Takes datagrams, one a call, until the round's bytes have come.
  void receive() {
    for (size_t got = 0, want = round_of(shape).bytes(); got < want;) {
      iovec iov{buf, sizeof buf};
      sockaddr_in from;
      mmsghdr m{};
      m.msg_hdr.msg_name = &from;
      m.msg_hdr.msg_namelen = sizeof from;
      m.msg_hdr.msg_iov = &iov;
      m.msg_hdr.msg_iovlen = 1;
      m.msg_hdr.msg_control = control;
      m.msg_hdr.msg_controllen = sizeof control;
      if (syscall(SYS_recvmmsg, rx, &m, 1, MSG_DONTWAIT, nullptr) == 1) got += m.msg_len;
    }
  }
};

// Half round trips of `iters` rounds, in ns (the client's side); the server returns none.
std::vector<uint64_t> run(Shape shape, bool client, int iters) {
  End e(shape, client ? "127.0.0.1" : "127.0.0.2", client ? "127.0.0.2" : "127.0.0.1");
  std::vector<uint64_t> half;
  usleep(200000);  // both ends bound
  half.reserve(client ? static_cast<size_t>(iters) : 0);
  for (int i = 0; i < iters; ++i) {
    const uint64_t t = now_ns();
    if (client) {
      e.send();
      e.receive();
      half.push_back((now_ns() - t) / 2);
    } else {
      e.receive();
      e.send();
    }
  }
  return half;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 3, iters = 200000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--iters") == 0) iters = std::atoi(argv[i + 1]);
  }
  std::printf("%-10s %5s %10s %10s   (half round trip, us; %d rounds of %d)\n", "shape",
              "round", "median", "average", rounds, iters);
  for (int r = 0; r < rounds; ++r) {
    for (Shape s : {Shape::kSingle, Shape::kPktinfo, Shape::kPair, Shape::kPairConnected,
                    Shape::kFullAck, Shape::kTailAck}) {
      const pid_t server = fork();
      if (server == 0) {
        run(s, false, iters);
        _exit(0);
      }
      std::vector<uint64_t> half = run(s, true, iters);
      waitpid(server, nullptr, 0);
      std::sort(half.begin(), half.end());
      double sum = 0;
      for (uint64_t h : half) sum += static_cast<double>(h);
      std::printf("%-10s %5d %10.2f %10.2f\n", kNames[static_cast<int>(s)], r,
                  static_cast<double>(half[half.size() / 2]) / 1000, sum / half.size() / 1000);
    }
  }
  return 0;
}
