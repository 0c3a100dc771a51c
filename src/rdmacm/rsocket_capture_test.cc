// What a stream rsocket puts on the wire, read from a capture (VRNIC_PCAP) and decoded by hand
// from the IBA packet formats: its credit update, data, keepalives (a bare RDMA WRITE of no
// data, which the peer's verbs never see) and disconnect, as rdma-core v44's rsocket.c sends
// them. The rsocket and its peer run in a child process, which flushes the capture at exit.
#include <fcntl.h>
#include <netinet/tcp.h>
#include <rdma/rsocket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <future>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "rdmacm/test_rsocket_peer.h"

namespace vrnic::rdmacm::rs::test {
namespace {

// What the child tells the parent: the peer's QP and memory, as the packets must name them.
struct PeerFacts {
  uint32_t qpn = 0, table_rkey = 0, rbuf_rkey = 0, half = 0;
  uint64_t table = 0, rbuf = 0;
  bool ok = false;
};

// The child: vrnic's rsocket, keepalive every second, connects to the peer, sends "hello",
// waits 2.5 s, closes.
void run_child(const std::string& pcap, int out) {
  setenv("VRNIC_PCAP", pcap.c_str(), 1);
  PeerFacts f;
  StreamPeer peer;
  sockaddr_in at = device_addr(41100);
  const int fd = rsocket(AF_INET, SOCK_STREAM, 0);
  int one = 1, rcvbuf = 0;
  socklen_t len = sizeof rcvbuf;
  rsetsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  rsetsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &one, sizeof one);
  rgetsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &len);
  f.half = uint32_t(rcvbuf) / 2;
  if (peer.listen(at)) {
    auto done = std::async(std::launch::async, [&] {
      return rconnect(fd, reinterpret_cast<sockaddr*>(&at), sizeof at);
    });
    const bool req = peer.wait(RDMA_CM_EVENT_CONNECT_REQUEST).has_value();
    f.ok = req && peer.make_qp() && peer.accept(peer.my_conn_data(8)) && done.get() == 0 &&
           peer.next_imm().has_value() && rsend(fd, "hello", 5, 0) == 5 &&
           peer.next_imm() == 5u;
    if (f.ok) {
      f.qpn = peer.id()->qp->qp_num;
      f.table = uintptr_t(peer.mem().table);
      f.table_rkey = peer.mem().table_mr->rkey;
      f.rbuf = uintptr_t(peer.mem().rbuf);
      f.rbuf_rkey = peer.mem().rbuf_mr->rkey;
      usleep(2500 * 1000);
      rclose(fd);
      f.ok = peer.next_imm() == 0xe0000000u;
    }
  }
  (void)!write(out, &f, sizeof f);
}

struct RoceWrite {
  uint8_t opcode;
  uint32_t psn;
  uint64_t va;
  uint32_t rkey, len, imm;
  std::vector<uint8_t> payload;
};

// The RDMA WRITE Only packets (with or without immediate) to `qpn` in the capture, once each
// (a packet sent and received in one process is recorded twice).
std::vector<RoceWrite> writes_to(const std::string& path, uint32_t qpn) {
  std::vector<RoceWrite> out;
  FILE* f = fopen(path.c_str(), "rb");
  if (!f) return out;
  uint8_t gh[24], rh[16];
  std::map<uint32_t, bool> seen;
  if (fread(gh, 1, 24, f) == 24) {
    while (fread(rh, 1, 16, f) == 16) {
      const auto incl = uint32_t(get_le(rh + 8, 4));
      std::vector<uint8_t> fr(incl);
      if (fread(fr.data(), 1, incl, f) != incl) break;
      const size_t ip = 14, udp = ip + (fr[ip] & 0xf) * 4u, bth = udp + 8;
      if (fr.size() < bth + 12 || get_be(&fr[udp + 2], 2) != 4791) continue;
      const uint8_t op = fr[bth];
      if ((op != 0x0a && op != 0x0b) || get_be(&fr[bth + 5], 3) != qpn) continue;
      RoceWrite w{op, uint32_t(get_be(&fr[bth + 9], 3)), get_be(&fr[bth + 12], 8),
                  uint32_t(get_be(&fr[bth + 20], 4)), uint32_t(get_be(&fr[bth + 24], 4)), 0, {}};
      size_t at = bth + 28;
      if (op == 0x0b) w.imm = uint32_t(get_be(&fr[at], 4)), at += 4;
      const size_t pad = (fr[bth + 1] >> 4) & 3;
      w.payload.assign(fr.begin() + long(at), fr.end() - long(pad + 4));  // pad, ICRC
      if (!seen[w.psn]) out.push_back(w);
      seen[w.psn] = true;
    }
  }
  fclose(f);
  return out;
}

TEST(RsocketCapture, stream__update_data_keepalives_disconnect_on_the_wire) {
  char dir[] = "/tmp/vrnic-rscap-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string pcap = std::string(dir) + "/rs.pcap";
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(p[0]);
    run_child(pcap, p[1]);
    exit(0);  // flushes the capture
  }
  close(p[1]);
  PeerFacts f;
  ASSERT_EQ(read(p[0], &f, sizeof f), ssize_t(sizeof f));
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(f.ok);
  const auto w = writes_to(pcap, f.qpn);
  unlink(pcap.c_str());
  rmdir(dir);
  ASSERT_GE(w.size(), 5u);
  // The first credit update: the second half of vrnic's ring into the peer's SGL entry 1.
  EXPECT_EQ(w[0].opcode, 0x0b);  // RDMA WRITE Only with Immediate
  EXPECT_EQ(w[0].va, f.table + 16);
  EXPECT_EQ(w[0].rkey, f.table_rkey);
  EXPECT_EQ(w[0].len, 16u);
  EXPECT_EQ(w[0].imm, 0x80000180u);  // RS_OP_SGL | 384 credits
  EXPECT_EQ(w[0].payload.size(), 16u);
  EXPECT_EQ(get_le(&w[0].payload[12], 4), f.half);  // half of the ring (SO_RCVBUF)
  // The data message.
  EXPECT_EQ(w[1].opcode, 0x0b);
  EXPECT_EQ(w[1].va, f.rbuf);
  EXPECT_EQ(w[1].rkey, f.rbuf_rkey);
  EXPECT_EQ(w[1].imm, 5u);
  EXPECT_EQ(std::string(w[1].payload.begin(), w[1].payload.end()), "hello");
  // Keepalives: RDMA WRITE Only of no data, no address, no key; then DISCONNECT last.
  size_t keepalives = 0;
  for (size_t i = 2; i + 1 < w.size(); ++i) {
    EXPECT_EQ(w[i].opcode, 0x0a);
    EXPECT_EQ(w[i].va, 0u);
    EXPECT_EQ(w[i].rkey, 0u);
    EXPECT_EQ(w[i].len, 0u);
    EXPECT_TRUE(w[i].payload.empty());
    keepalives += w[i].opcode == 0x0a;
  }
  EXPECT_GE(keepalives, 2u);
  EXPECT_LE(keepalives, 3u);
  EXPECT_EQ(w.back().opcode, 0x0b);
  EXPECT_EQ(w.back().len, 0u);
  EXPECT_EQ(w.back().imm, 0xe0000000u);  // RS_OP_CTRL | RS_CTRL_DISCONNECT
}

}  // namespace
}  // namespace vrnic::rdmacm::rs::test
