// Tests of datagram rsockets in one process (sockets on the device's address, distinct
// ports): addressing, message boundaries, truncation, sizes, readiness and errors.
#include <fcntl.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "rdmacm/test_rsocket_peer.h"

namespace {

sockaddr_in device_addr() { return vrnic::rdmacm::rs::test::device_addr(0); }

sockaddr* sa(sockaddr_in& a) { return reinterpret_cast<sockaddr*>(&a); }

class RsocketDgram : public ::testing::Test {
 protected:
  void SetUp() override {
    dev_ = device_addr();
    ASSERT_EQ(dev_.sin_family, AF_INET);
  }
  void TearDown() override {
    for (int fd : fds_) rclose(fd);
  }
  int make() {
    const int fd = rsocket(AF_INET, SOCK_DGRAM, 0);
    if (fd >= 0) fds_.push_back(fd);
    return fd;
  }
  // A socket bound to the device's address at a port of its own; its address in `at`.
  int bound(sockaddr_in& at) {
    const int fd = make();
    at = dev_;
    at.sin_port = htons(static_cast<uint16_t>(next_port_++));
    return fd >= 0 && rbind(fd, sa(at), sizeof at) == 0 ? fd : -1;
  }
  static ssize_t recv_wait(int fd, void* buf, size_t len, sockaddr_in* from = nullptr) {
    pollfd p{fd, POLLIN, 0};
    if (rpoll(&p, 1, 5000) != 1) return -2;
    socklen_t fl = sizeof(sockaddr_in);
    return rrecvfrom(fd, buf, len, 0, from ? sa(*from) : nullptr, from ? &fl : nullptr);
  }

  sockaddr_in dev_{};
  std::vector<int> fds_;
  static inline int next_port_ = 40100;
};

TEST_F(RsocketDgram, rsocket__dgram__type_and_unconnected_errors) {
  const int fd = make();
  ASSERT_GE(fd, 0);
  int type = 0;
  socklen_t len = sizeof type;
  ASSERT_EQ(rgetsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len), 0);
  EXPECT_EQ(type, SOCK_DGRAM);
  EXPECT_EQ(rlisten(fd, 1), -1);
  EXPECT_EQ(errno, EOPNOTSUPP);
  EXPECT_EQ(rsend(fd, "x", 1, 0), -1);
  EXPECT_EQ(errno, EDESTADDRREQ);
  sockaddr_in peer{};
  len = sizeof peer;
  EXPECT_EQ(rgetpeername(fd, sa(peer), &len), -1);
  EXPECT_EQ(errno, ENOTCONN);
  EXPECT_EQ(rsocket(AF_INET, SOCK_DGRAM, IPPROTO_TCP), -1);
  EXPECT_EQ(errno, EPROTONOSUPPORT);
}

TEST_F(RsocketDgram, rsendto__unbound_socket__binds_and_peer_sees_its_address) {
  sockaddr_in a_at;
  const int a = bound(a_at);
  const int b = make();
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  ASSERT_EQ(rsendto(b, "hello", 5, 0, sa(a_at), sizeof a_at), 5);
  sockaddr_in b_at{};
  socklen_t len = sizeof b_at;
  ASSERT_EQ(rgetsockname(b, sa(b_at), &len), 0);
  EXPECT_NE(b_at.sin_port, 0);
  char buf[64] = {};
  sockaddr_in from{};
  ASSERT_EQ(recv_wait(a, buf, sizeof buf, &from), 5);
  EXPECT_EQ(std::string(buf, 5), "hello");
  EXPECT_EQ(from.sin_family, AF_INET);
  EXPECT_EQ(from.sin_addr.s_addr, dev_.sin_addr.s_addr);
  EXPECT_EQ(from.sin_port, b_at.sin_port);
  // The reply goes back to the address the datagram came from.
  ASSERT_EQ(rsendto(a, "world!", 6, 0, sa(from), sizeof from), 6);
  ASSERT_EQ(recv_wait(b, buf, sizeof buf, &from), 6);
  EXPECT_EQ(std::string(buf, 6), "world!");
  EXPECT_EQ(from.sin_port, a_at.sin_port);
}

TEST_F(RsocketDgram, rrecv__datagrams__boundaries_kept) {
  sockaddr_in a_at, b_at;
  const int a = bound(a_at), b = bound(b_at);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  for (size_t n : {10u, 1u, 300u}) {
    std::vector<uint8_t> m(n, static_cast<uint8_t>(n));
    ASSERT_EQ(rsendto(b, m.data(), n, 0, sa(a_at), sizeof a_at), ssize_t(n));
  }
  for (size_t n : {10u, 1u, 300u}) {
    std::vector<uint8_t> got(1000, 0);
    ASSERT_EQ(recv_wait(a, got.data(), got.size()), ssize_t(n));
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], static_cast<uint8_t>(n));
  }
}

TEST_F(RsocketDgram, rrecvmsg__short_buffer__cut_with_msg_trunc) {
  sockaddr_in a_at, b_at;
  const int a = bound(a_at), b = bound(b_at);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  std::vector<uint8_t> m(100);
  for (size_t i = 0; i < m.size(); ++i) m[i] = static_cast<uint8_t>(i);
  ASSERT_EQ(rsendto(b, m.data(), 100, 0, sa(a_at), sizeof a_at), 100);
  ASSERT_EQ(rsendto(b, m.data(), 100, 0, sa(a_at), sizeof a_at), 100);
  uint8_t buf[40] = {};
  iovec v{buf, sizeof buf};
  sockaddr_in from{};
  msghdr msg{};
  msg.msg_name = &from;
  msg.msg_namelen = sizeof from;
  msg.msg_iov = &v;
  msg.msg_iovlen = 1;
  pollfd p{a, POLLIN, 0};
  ASSERT_EQ(rpoll(&p, 1, 5000), 1);
  ASSERT_EQ(rrecvmsg(a, &msg, 0), 40);
  EXPECT_TRUE(msg.msg_flags & MSG_TRUNC);
  EXPECT_EQ(std::memcmp(buf, m.data(), 40), 0);
  EXPECT_EQ(from.sin_port, b_at.sin_port);
  // The rest of the first datagram is gone; MSG_TRUNC in flags reports the real length.
  ASSERT_EQ(rpoll(&p, 1, 5000), 1);
  EXPECT_EQ(rrecv(a, buf, sizeof buf, MSG_TRUNC), 100);
  EXPECT_EQ(rrecv(a, buf, sizeof buf, MSG_DONTWAIT), -1);
  EXPECT_EQ(errno, EAGAIN);
}

// A datagram is at most 2048 bytes with its header (rdma-core's receive size), or the path
// MTU if smaller.
TEST_F(RsocketDgram, rsendto__over_2048_or_mtu__emsgsize_and_largest_arrives_whole) {
  sockaddr_in a_at, b_at;
  const int a = bound(a_at), b = bound(b_at);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  std::vector<uint8_t> big(70000);
  EXPECT_EQ(rsendto(b, big.data(), big.size(), 0, sa(a_at), sizeof a_at), -1);
  EXPECT_EQ(errno, EMSGSIZE);
  // The largest that fits: one below the first size refused.
  size_t hi = 4096;
  while (rsendto(b, big.data(), hi, MSG_DONTWAIT, sa(a_at), sizeof a_at) < 0) {
    ASSERT_EQ(errno, EMSGSIZE);
    --hi;
  }
  std::vector<uint8_t> got(8192);
  ASSERT_EQ(recv_wait(a, got.data(), got.size()), ssize_t(hi));
  for (size_t i = 0; i < hi; ++i) big[i] = static_cast<uint8_t>(i * 7);
  ASSERT_EQ(rsendto(b, big.data(), hi, 0, sa(a_at), sizeof a_at), ssize_t(hi));
  ASSERT_EQ(recv_wait(a, got.data(), got.size()), ssize_t(hi));
  EXPECT_EQ(std::memcmp(got.data(), big.data(), hi), 0);
  EXPECT_LE(hi, 2040u);
  EXPECT_GE(hi, 1016u);  // a 1 KiB path MTU at least
}

TEST_F(RsocketDgram, rpoll__readable_only_with_a_datagram_nonblocking_eagain) {
  sockaddr_in a_at, b_at;
  const int a = bound(a_at), b = bound(b_at);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  ASSERT_EQ(rfcntl(a, F_SETFL, O_NONBLOCK), 0);
  char buf[16];
  EXPECT_EQ(rrecv(a, buf, sizeof buf, 0), -1);
  EXPECT_EQ(errno, EAGAIN);
  pollfd p{a, POLLIN | POLLOUT, 0};
  ASSERT_EQ(rpoll(&p, 1, 0), 1);
  EXPECT_EQ(p.revents, POLLOUT);
  ASSERT_EQ(rsendto(b, "abc", 3, 0, sa(a_at), sizeof a_at), 3);
  p.events = POLLIN;
  ASSERT_EQ(rpoll(&p, 1, 5000), 1);
  EXPECT_EQ(p.revents, POLLIN);
  EXPECT_EQ(rrecv(a, buf, sizeof buf, 0), 3);
}

TEST_F(RsocketDgram, rconnect__other_sources_filtered_rsend_goes_to_peer) {
  sockaddr_in a_at, b_at, c_at;
  const int a = bound(a_at), b = bound(b_at), c = bound(c_at);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  ASSERT_GE(c, 0);
  ASSERT_EQ(rconnect(a, sa(b_at), sizeof b_at), 0);
  sockaddr_in peer{};
  socklen_t len = sizeof peer;
  ASSERT_EQ(rgetpeername(a, sa(peer), &len), 0);
  EXPECT_EQ(peer.sin_port, b_at.sin_port);
  ASSERT_EQ(rsendto(c, "from-c", 6, 0, sa(a_at), sizeof a_at), 6);
  ASSERT_EQ(rsendto(b, "from-b", 6, 0, sa(a_at), sizeof a_at), 6);
  char buf[16] = {};
  ASSERT_EQ(recv_wait(a, buf, sizeof buf), 6);
  EXPECT_EQ(std::string(buf, 6), "from-b");
  ASSERT_EQ(rsend(a, "to-b", 4, 0), 4);
  ASSERT_EQ(recv_wait(b, buf, sizeof buf), 4);
  EXPECT_EQ(std::string(buf, 4), "to-b");
}

// As UDP: a datagram to a port nobody holds is sent and lost; on a connected socket the
// ICMP error that comes back fails a later send with ECONNREFUSED.
TEST_F(RsocketDgram, rsend__nobody_at_port__lost_then_econnrefused_when_connected) {
  const int b = make();
  ASSERT_GE(b, 0);
  sockaddr_in nobody = dev_;
  nobody.sin_port = htons(39999);
  EXPECT_EQ(rsendto(b, "x", 1, 0, sa(nobody), sizeof nobody), 1);
  ASSERT_EQ(rconnect(b, sa(nobody), sizeof nobody), 0);
  ssize_t r = 0;
  for (int i = 0; i < 100 && r >= 0; ++i) {
    r = rsend(b, "x", 1, 0);
    if (r >= 0) usleep(10000);
  }
  EXPECT_EQ(r, -1);
  EXPECT_EQ(errno, ECONNREFUSED);
}

TEST_F(RsocketDgram, rbind__port_taken__eaddrinuse_then_another_port_binds) {
  sockaddr_in a_at;
  ASSERT_GE(bound(a_at), 0);
  const int b = make();
  ASSERT_GE(b, 0);
  EXPECT_EQ(rbind(b, sa(a_at), sizeof a_at), -1);
  EXPECT_EQ(errno, EADDRINUSE);
  sockaddr_in other = a_at;
  other.sin_port = htons(static_cast<uint16_t>(ntohs(a_at.sin_port) + 1000));
  EXPECT_EQ(rbind(b, sa(other), sizeof other), 0);
}

}  // namespace
