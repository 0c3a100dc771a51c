// vrnic-guard: outlives a vrnic process and sends the DREQs of its connections if it dies.
//
// Started by the process's CM (src/rdmacm/guard_link.cc) on its first established connection,
// with one end of a stream socket pair: `vrnic-guard --fd N`, already detached (an orphan,
// so the program never waits on it), it reads the process's keep/drop records
// until the stream ends, which is when the process has exited, exec'd or been killed, and
// then sends the DREQ of every connection still kept, from the process's address, as the
// kernel's CM does for a killed process (each three times: guard/farewells.h). A process that
// ends normally has dropped them all: nothing is sent.
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "guard/farewells.h"
#include "transport/udp/ip_address.h"
#include "wire/cm_mad.h"

namespace {

using vrnic::cm::Endpoint;
using vrnic::cm::GuardRecord;
using vrnic::transport::IpAddress;

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

IpAddress address_of(const Endpoint& e) {
  IpAddress a;
  a.ipv6 = e.ipv6;
  a.bytes = e.ip;
  return a;
}

// Reads records until the stream ends. False on a read error or a record this build cannot
// read.
bool read_records(int fd, vrnic::guard::Farewells& f) {
  GuardRecord::Bytes buf;
  size_t have = 0;
  for (;;) {
    const ssize_t n = read(fd, buf.data() + have, buf.size() - have);
    if (n == 0) return have == 0;
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    have += size_t(n);
    if (have < buf.size()) continue;
    have = 0;
    GuardRecord r;
    if (!r.decode(buf)) return false;
    f.apply(r);
  }
}

// A socket on the process's address, on an ephemeral port: port 4791 there stays free for
// the next program that takes the address (a restarted server).
int open_socket(const Endpoint& from, uint16_t& port) {
  const IpAddress a = address_of(from);
  const int fd = socket(a.ipv6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_storage sa;
  socklen_t len = a.to_sockaddr(0, sa);
  IpAddress bound;
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), len) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &(len = sizeof sa)) != 0 ||
      !IpAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&sa), bound, &port)) {
    close(fd);
    return -1;
  }
  return fd;
}

struct Sender {
  int fd = -1;
  uint16_t port = 0;
  uint32_t psn = 0;

  // One DREQ as a GSI datagram (wire/cm_mad.h), its ICRC over this socket's real port.
  void send(const GuardRecord& r) {
    vrnic::wire::IpUdpInfo ip;
    ip.ipv6 = r.from.ipv6;
    ip.src = r.from.ip;
    ip.dst = r.to.ip;
    ip.src_port = port;
    uint8_t pkt[vrnic::wire::cm::kGsiPacketSize];
    vrnic::wire::cm::build_gsi_packet(ip, psn++ & 0xffffff, r.mad.data(), pkt);
    sockaddr_storage sa;
    const socklen_t len = address_of(r.to).to_sockaddr(4791, sa);
    (void)!sendto(fd, pkt, sizeof pkt, 0, reinterpret_cast<sockaddr*>(&sa), len);
  }
};

// Sends what is owed on the policy's schedule. One socket per address of the process (a
// device has one).
void farewell(vrnic::guard::Farewells& f) {
  std::map<std::array<uint8_t, 16>, Sender> senders;
  f.start(now_ns());
  while (!f.done()) {
    for (const GuardRecord* r : f.due(now_ns())) {
      Sender& s = senders[r->from.ip];
      if (s.fd < 0 && (s.fd = open_socket(r->from, s.port)) < 0) continue;
      s.send(*r);
    }
    const uint64_t next = f.next(), now = now_ns();
    if (next != UINT64_MAX && next > now) usleep(useconds_t((next - now) / 1000));
  }
  for (auto& [ip, s] : senders) close(s.fd);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || std::strcmp(argv[1], "--fd") != 0) {
    std::fprintf(stderr, "usage: vrnic-guard --fd N (started by vrnic's librdmacm)\n");
    return 2;
  }
  const int fd = std::atoi(argv[2]);
  // Started detached (an orphan: librdmacm's guard_link.cc), with every signal blocked; a
  // session of its own, so that signals meant for the program's process group (^C) leave the
  // guard to do its part.
  setsid();
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  vrnic::guard::Farewells f;
  const bool clean = read_records(fd, f);
  close(fd);
  if (!clean) return 1;
  if (f.kept() > 0) farewell(f);
  return 0;
}
