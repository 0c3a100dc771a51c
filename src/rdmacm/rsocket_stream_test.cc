// Tests of stream rsockets against a peer built by hand from rdma-core v44's rsocket.c
// (test_rsocket_peer.h): every message kind checked byte for byte in both directions (the
// connection data of REQ and REP, data, credit updates with and without a window, I/O map
// entries, riowrite, shutdown and disconnect).
#include <fcntl.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <sys/mman.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>

#include <gtest/gtest.h>

#include "rdmacm/test_rsocket_peer.h"

namespace vrnic::rdmacm::rs::test {
namespace {

constexpr uint32_t kHalf = 16384;  // SO_RCVBUF 16 KiB: a 32 KiB ring, two windows of 16 KiB

sockaddr* sa(sockaddr_in& a) { return reinterpret_cast<sockaddr*>(&a); }

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

std::vector<uint8_t> le_sge(uint64_t addr, uint32_t key, uint32_t len) {
  std::vector<uint8_t> b(16);
  put_le(&b[0], addr, 8);
  put_le(&b[8], key, 4);
  put_le(&b[12], len, 4);
  return b;
}

// vrnic's socket options for these tests: 64 receives, a 32 KiB ring, two I/O map entries.
void set_sizes(int fd) {
  int v = 64;
  rsetsockopt(fd, SOL_RDMA, RDMA_RQSIZE, &v, sizeof v);
  v = 2;
  rsetsockopt(fd, SOL_RDMA, RDMA_IOMAPSIZE, &v, sizeof v);
  v = kHalf;
  rsetsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof v);
}

bool wait_ready(int fd, short events) {
  pollfd p{fd, events, 0};
  return rpoll(&p, 1, 5000) == 1;
}

class RsocketStreamWire : public ::testing::Test {
 protected:
  void TearDown() override {
    if (fd_ >= 0) rclose(fd_);
    if (lfd_ >= 0) rclose(lfd_);
  }

  // vrnic's rsocket connects to the peer, which accepts with `credits` and its 4 KiB window;
  // req_ holds the REQ's connection data. The peer then takes vrnic's first credit update.
  void connect_to_peer(uint16_t credits, uint8_t version = 1, int* connect_errno = nullptr) {
    at_ = device_addr(next_port_++);
    ASSERT_TRUE(peer_.listen(at_));
    fd_ = rsocket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd_, 0);
    set_sizes(fd_);
    auto done = std::async(std::launch::async, [&] {
      const int r = rconnect(fd_, sa(at_), sizeof at_);
      return r == 0 ? 0 : errno;
    });
    auto req = peer_.wait(RDMA_CM_EVENT_CONNECT_REQUEST);
    ASSERT_TRUE(req.has_value());
    ASSERT_GE(req->size(), 40u);
    req_ = fields_of(req->data());
    std::memcpy(raw_req_, req->data(), 40);
    ASSERT_TRUE(peer_.make_qp());
    ASSERT_TRUE(peer_.accept(peer_.my_conn_data(credits, version)));
    const int err = done.get();
    if (connect_errno) {
      *connect_errno = err;
      return;
    }
    ASSERT_EQ(err, 0) << std::strerror(err);
    ASSERT_TRUE(peer_.wait(RDMA_CM_EVENT_ESTABLISHED).has_value());
    ASSERT_EQ(peer_.next_imm(), 0x80000040u);  // RS_OP_SGL | (0 read + 64 credits)
  }

  // The peer writes into vrnic's receive ring at `offset` with a data immediate.
  bool peer_sends(uint32_t offset, const std::vector<uint8_t>& b) {
    return peer_.write(req_.buf_addr + offset, req_.buf_key, b, uint32_t(b.size()));
  }

  StreamPeer peer_;
  sockaddr_in at_{};
  ConnFields req_{};
  uint8_t raw_req_[40]{};
  int fd_ = -1, lfd_ = -1;
  static inline int next_port_ = 40700;
};

TEST_F(RsocketStreamWire, rconnect__req_holds_rs_conn_data_first_update_gives_second_half) {
  ASSERT_NO_FATAL_FAILURE(connect_to_peer(8));
  EXPECT_EQ(raw_req_[0], 1);     // version
  EXPECT_EQ(raw_req_[1], 0x02);  // RS_CONN_FLAG_IOMAP, little-endian host
  EXPECT_EQ(req_.credits, 64);   // RDMA_RQSIZE
  EXPECT_TRUE(req_.reserved_zero);
  EXPECT_EQ(req_.iomap, 2);      // RDMA_IOMAPSIZE
  EXPECT_EQ(req_.sgl_len, 2u);   // two target SGL entries
  EXPECT_NE(req_.sgl_addr, 0u);
  EXPECT_EQ(req_.buf_len, kHalf);
  // The update connect_to_peer took wrote vrnic's second half into the peer's entry 1.
  const uint8_t* e = peer_.mem().table + 16;
  EXPECT_EQ(get_le(e, 8), req_.buf_addr + kHalf);
  EXPECT_EQ(get_le(e + 8, 4), req_.buf_key);
  EXPECT_EQ(get_le(e + 12, 4), kHalf);
  EXPECT_EQ(get_le(peer_.mem().table, 16), 0u);  // entry 0 untouched
}

// The peer may write as soon as it has accepted: a credit update and data that come before
// vrnic has taken the REP are neither lost nor mistaken.
TEST_F(RsocketStreamWire, rconnect__peer_writes_at_once_after_accept__nothing_lost) {
  at_ = device_addr(next_port_++);
  ASSERT_TRUE(peer_.listen(at_));
  fd_ = rsocket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd_, 0);
  set_sizes(fd_);
  auto done = std::async(std::launch::async, [&] { return rconnect(fd_, sa(at_), sizeof at_); });
  auto req = peer_.wait(RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_TRUE(req.has_value());
  req_ = fields_of(req->data());
  ASSERT_TRUE(peer_.make_qp());
  ASSERT_TRUE(peer_.accept(peer_.my_conn_data(1)));
  ASSERT_TRUE(peer_.write(0, 0, {}, 0x80000003u));  // limit 3 for the 1 credit the REP gave
  ASSERT_TRUE(peer_sends(0, bytes("early")));
  ASSERT_EQ(done.get(), 0);
  char buf[8];
  ASSERT_EQ(rrecv(fd_, buf, 5, MSG_WAITALL), 5);
  EXPECT_EQ(std::string(buf, 5), "early");
  ASSERT_EQ(rfcntl(fd_, F_SETFL, O_NONBLOCK), 0);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(rsend(fd_, "x", 1, 0), 1) << i;
  EXPECT_EQ(rsend(fd_, "x", 1, 0), -1);
  EXPECT_EQ(errno, EAGAIN);
}

TEST_F(RsocketStreamWire, rsend__write_with_length_immediate_into_peer_window) {
  ASSERT_NO_FATAL_FAILURE(connect_to_peer(8));
  ASSERT_EQ(rsend(fd_, "hello", 5, 0), 5);
  ibv_wc wc{};
  ASSERT_EQ(peer_.next_imm(&wc), 5u);  // RS_OP_DATA | 5
  EXPECT_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(peer_.mem().rbuf), 5), "hello");
  ASSERT_EQ(rsend(fd_, "world!", 6, 0), 6);
  ASSERT_EQ(peer_.next_imm(), 6u);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(peer_.mem().rbuf), 11), "helloworld!");
}

TEST_F(RsocketStreamWire, rsend__peer_window_and_credits_limit_updates_reopen) {
  ASSERT_NO_FATAL_FAILURE(connect_to_peer(2));
  ASSERT_EQ(rfcntl(fd_, F_SETFL, O_NONBLOCK), 0);
  std::vector<uint8_t> big(5000, 0x5a);
  ASSERT_EQ(rsend(fd_, big.data(), 3000, 0), 3000);
  ASSERT_EQ(peer_.next_imm(), 3000u);
  ASSERT_EQ(rsend(fd_, big.data(), 2000, 0), 1096);  // the rest of the 4 KiB window
  ASSERT_EQ(peer_.next_imm(), 1096u);
  EXPECT_EQ(rsend(fd_, "x", 1, 0), -1);  // no window, no credit
  EXPECT_EQ(errno, EAGAIN);
  // A new window into vrnic's SGL entry 1, and the sequence limit 3: one more message.
  const auto sge = le_sge(uintptr_t(peer_.mem().rbuf) + 4096, peer_.mem().rbuf_mr->rkey, 4096);
  ASSERT_TRUE(peer_.write(req_.sgl_addr + 16, req_.sgl_key, sge, 0x80000003u));
  ASSERT_TRUE(wait_ready(fd_, POLLOUT));
  ASSERT_EQ(rsend(fd_, "abc", 3, 0), 3);
  ASSERT_EQ(peer_.next_imm(), 3u);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(peer_.mem().rbuf) + 4096, 3), "abc");
  EXPECT_EQ(rsend(fd_, "x", 1, 0), -1);  // the window has room, the credits are used
  EXPECT_EQ(errno, EAGAIN);
  ASSERT_TRUE(peer_.write(0, 0, {}, 0x8000000au));  // a bare update: limit 10
  ASSERT_TRUE(wait_ready(fd_, POLLOUT));
  ASSERT_EQ(rsend(fd_, "de", 2, 0), 2);
  ASSERT_EQ(peer_.next_imm(), 2u);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(peer_.mem().rbuf) + 4099, 2), "de");
}

TEST_F(RsocketStreamWire, rrecv__peer_data_in_order_then_window_handed_back) {
  ASSERT_NO_FATAL_FAILURE(connect_to_peer(8));
  ASSERT_TRUE(peer_sends(0, bytes("abc")));
  ASSERT_TRUE(peer_sends(3, bytes("defg")));
  char buf[8] = {};
  ASSERT_EQ(rrecv(fd_, buf, 7, MSG_WAITALL), 7);
  EXPECT_EQ(std::string(buf, 7), "abcdefg");
  // The rest of the first window in four messages, then read: the window goes back to the
  // peer's entry 0 with the sequence limit 6 read + 64.
  std::vector<uint8_t> fill(kHalf - 7);
  for (size_t i = 0; i < fill.size(); ++i) fill[i] = uint8_t(i * 13);
  for (uint32_t at = 0; at < fill.size(); at += 4096) {
    const size_t n = std::min<size_t>(4096, fill.size() - at);
    ASSERT_TRUE(peer_sends(7 + at, {fill.begin() + at, fill.begin() + at + n}));
  }
  std::vector<uint8_t> got(fill.size());
  ASSERT_EQ(rrecv(fd_, got.data(), got.size(), MSG_WAITALL), ssize_t(got.size()));
  EXPECT_EQ(got, fill);
  ibv_wc wc{};
  ASSERT_EQ(peer_.next_imm(&wc), 0x80000046u);
  EXPECT_EQ(wc.byte_len, 16u);
  const uint8_t* e = peer_.mem().table;
  EXPECT_EQ(get_le(e, 8), req_.buf_addr);
  EXPECT_EQ(get_le(e + 8, 4), req_.buf_key);
  EXPECT_EQ(get_le(e + 12, 4), kHalf);
}

// rdma-core's rsockets take their completions inside the calls; so do vrnic's: a program
// that keeps calling gets its data from its own polls, and the CQ raises no event (no wake-up
// of the rsocket thread) per message. Only a thread about to sleep arms it.
TEST_F(RsocketStreamWire, rrecv__nonblocking_calls_poll_the_cq__no_event_per_message) {
  ASSERT_NO_FATAL_FAILURE(connect_to_peer(64));
  // The rsocket thread's wake-ups (it sleeps in poll between events).
  const auto wakeups = [] {
    for (const auto& t : std::filesystem::directory_iterator("/proc/self/task")) {
      std::ifstream comm(t.path() / "comm");
      std::string name;
      std::getline(comm, name);
      if (name != "vrnic-rsocket") continue;
      std::ifstream st(t.path() / "status");
      for (std::string line; std::getline(st, line);) {
        if (line.rfind("voluntary_ctxt_switches:", 0) == 0) return std::stol(line.substr(24));
      }
    }
    return -1L;
  };
  char c = 0;
  const auto next = [&] {  // spins on rrecv(MSG_DONTWAIT) as rstream does; false: 2 s passed
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    ssize_t n;
    while ((n = rrecv(fd_, &c, 1, MSG_DONTWAIT)) < 0 && errno == EAGAIN &&
           std::chrono::steady_clock::now() < until) {
    }
    return n == 1;
  };
  // The CQ armed when the connection was set up raises one event at most.
  ASSERT_TRUE(peer_sends(0, {uint8_t('a')}));
  ASSERT_TRUE(next());
  usleep(50000);
  const long woken = wakeups();
  ASSERT_GE(woken, 0);
  for (uint32_t i = 1; i < 40; ++i) {
    ASSERT_TRUE(peer_sends(i, {uint8_t('a' + i % 26)}));
    ASSERT_TRUE(next()) << "message " << i;
    EXPECT_EQ(c, char('a' + i % 26));
  }
  usleep(50000);
  EXPECT_LE(wakeups() - woken, 3);  // not one per message
  // A blocking call that has to wait arms the CQ: the peer's next message wakes it.
  auto got = std::async(std::launch::async, [&] { return rrecv(fd_, &c, 1, 0); });
  usleep(20000);
  ASSERT_TRUE(peer_sends(40, {uint8_t('z')}));
  ASSERT_EQ(got.get(), 1);
  EXPECT_EQ(c, 'z');
  EXPECT_GE(wakeups() - woken, 1);
}

TEST_F(RsocketStreamWire, rrecv__half_the_credits_read__bare_update) {
  ASSERT_NO_FATAL_FAILURE(connect_to_peer(8));
  for (uint32_t i = 0; i < 32; ++i) ASSERT_TRUE(peer_sends(i, {uint8_t('a' + i % 26)}));
  char buf[32];
  ASSERT_EQ(rrecv(fd_, buf, 31, MSG_WAITALL), 31);
  EXPECT_FALSE(peer_.next_imm(nullptr, 300).has_value());  // 31 of 32 read: nothing due
  ASSERT_EQ(rrecv(fd_, buf, 1, 0), 1);
  ibv_wc wc{};
  ASSERT_EQ(peer_.next_imm(&wc), 0x80000060u);  // RS_OP_SGL | (32 + 64), no window
  EXPECT_EQ(wc.byte_len, 0u);
}

TEST_F(RsocketStreamWire, rshutdown__shut_wr_sends_shutdown_rclose_disconnect) {
  ASSERT_NO_FATAL_FAILURE(connect_to_peer(8));
  ASSERT_EQ(rshutdown(fd_, SHUT_WR), 0);
  ibv_wc wc{};
  ASSERT_EQ(peer_.next_imm(&wc), 0xe0000002u);  // RS_OP_CTRL | RS_CTRL_SHUTDOWN
  EXPECT_EQ(wc.byte_len, 0u);
  EXPECT_EQ(rsend(fd_, "x", 1, 0), -1);
  EXPECT_EQ(errno, EPIPE);
  ASSERT_EQ(rclose(fd_), 0);
  fd_ = -1;
  ASSERT_EQ(peer_.next_imm(), 0xe0000000u);  // RS_OP_CTRL | RS_CTRL_DISCONNECT
  EXPECT_TRUE(peer_.wait(RDMA_CM_EVENT_DISCONNECTED).has_value());
}

TEST_F(RsocketStreamWire, rrecv__peer_shutdown__end_of_stream_half_close_then_disconnect) {
  ASSERT_NO_FATAL_FAILURE(connect_to_peer(8));
  ASSERT_TRUE(peer_sends(0, bytes("xyz")));
  ASSERT_TRUE(peer_.write(0, 0, {}, 0xe0000002u));  // SHUTDOWN: a write of nothing, no key
  char buf[8];
  ASSERT_EQ(rrecv(fd_, buf, 3, MSG_WAITALL), 3);
  EXPECT_EQ(rrecv(fd_, buf, sizeof buf, 0), 0);  // end of stream
  pollfd p{fd_, POLLIN | POLLOUT, 0};
  ASSERT_EQ(rpoll(&p, 1, 1000), 1);
  EXPECT_EQ(p.revents & (POLLIN | POLLOUT | POLLHUP), POLLIN | POLLOUT);  // half closed
  ASSERT_EQ(rsend(fd_, "still", 5, 0), 5);       // writing goes on
  ASSERT_EQ(peer_.next_imm(), 5u);
  ASSERT_EQ(rshutdown(fd_, SHUT_WR), 0);
  ASSERT_EQ(peer_.next_imm(), 0xe0000000u);  // reading ended too: DISCONNECT, as rdma-core
}

TEST_F(RsocketStreamWire, rpoll__peer_disconnect_after_data__pollhup_once_the_data_is_read) {
  ASSERT_NO_FATAL_FAILURE(connect_to_peer(8));
  ASSERT_TRUE(peer_sends(0, bytes("last")));
  ASSERT_TRUE(peer_.write(0, 0, {}, 0xe0000000u));  // DISCONNECT right behind the data
  pollfd p{fd_, POLLIN, 0};
  ASSERT_EQ(rpoll(&p, 1, 1000), 1);
  EXPECT_EQ(p.revents & (POLLIN | POLLHUP), POLLIN);  // the data first
  char buf[8];
  ASSERT_EQ(rrecv(fd_, buf, sizeof buf, MSG_WAITALL), 4);
  p.revents = 0;
  ASSERT_EQ(rpoll(&p, 1, 1000), 1);
  EXPECT_EQ(p.revents & (POLLIN | POLLHUP), POLLIN | POLLHUP);  // then the hang-up
  EXPECT_EQ(rrecv(fd_, buf, sizeof buf, 0), 0);
}

TEST_F(RsocketStreamWire, rsend__after_peer_disconnect__econnreset_nothing_more_sent) {
  ASSERT_NO_FATAL_FAILURE(connect_to_peer(8));
  ASSERT_TRUE(peer_.write(0, 0, {}, 0xe0000000u));
  pollfd p{fd_, POLLIN, 0};
  ASSERT_EQ(rpoll(&p, 1, 1000), 1);
  EXPECT_EQ(p.revents & (POLLIN | POLLHUP), POLLIN | POLLHUP);  // rdma-core: rs_disconnected
  char buf[4];
  EXPECT_EQ(rrecv(fd_, buf, sizeof buf, 0), 0);
  EXPECT_EQ(rsend(fd_, "x", 1, 0), -1);
  EXPECT_EQ(errno, ECONNRESET);  // rdma-core's rsend once rs_writable is gone
  ASSERT_EQ(rclose(fd_), 0);
  fd_ = -1;
  EXPECT_TRUE(peer_.wait(RDMA_CM_EVENT_DISCONNECTED).has_value());
  EXPECT_FALSE(peer_.next_imm(nullptr, 300).has_value());
}

// rdma-core's keepalive: a bare RDMA WRITE of no data, address and key 0. vrnic's NIC takes
// it without checking the key (C9-88), its program sees nothing, the stream goes on.
TEST_F(RsocketStreamWire, peer_keepalive__acknowledged_unseen_stream_goes_on) {
  ASSERT_NO_FATAL_FAILURE(connect_to_peer(8));
  ASSERT_TRUE(peer_.write(0, 0, {}, std::nullopt));
  ASSERT_TRUE(peer_.write(0, 0, {}, std::nullopt));
  char buf[4];
  EXPECT_EQ(rrecv(fd_, buf, sizeof buf, MSG_DONTWAIT), -1);
  EXPECT_EQ(errno, EAGAIN);
  ASSERT_TRUE(peer_sends(0, bytes("ok")));
  ASSERT_EQ(rrecv(fd_, buf, 2, MSG_WAITALL), 2);
  ASSERT_EQ(rsend(fd_, "ok", 2, 0), 2);
  EXPECT_EQ(peer_.next_imm(), 2u);
}

TEST_F(RsocketStreamWire, riomap__entries_into_peer_table_peer_writes_through_them) {
  ASSERT_NO_FATAL_FAILURE(connect_to_peer(8));
  std::vector<uint8_t> a(4096), b(1000);
  ASSERT_EQ(riomap(fd_, a.data(), a.size(), PROT_WRITE, 0, 0), 0);
  ibv_wc wc{};
  ASSERT_EQ(peer_.next_imm(&wc), 0xc0000000u);  // RS_OP_IOMAP_SGL | index 0
  EXPECT_EQ(wc.byte_len, 24u);
  const uint8_t* e = peer_.mem().table + 32;  // after the peer's two SGL entries
  EXPECT_EQ(get_le(e, 8), 0u);                // offset
  EXPECT_EQ(get_le(e + 8, 8), uintptr_t(a.data()));
  EXPECT_EQ(get_le(e + 20, 4), 4096u);
  const auto key = uint32_t(get_le(e + 16, 4));
  ASSERT_EQ(riomap(fd_, b.data(), b.size(), PROT_WRITE, 0, -1), 4096);  // after the first
  ASSERT_EQ(peer_.next_imm(), 0xc0000001u);
  EXPECT_EQ(get_le(e + 24, 8), 4096u);
  EXPECT_EQ(get_le(e + 32, 8), uintptr_t(b.data()));
  std::vector<uint8_t> c(10);
  EXPECT_EQ(riomap(fd_, c.data(), c.size(), PROT_WRITE, 0, -1), -1);  // the peer has two
  EXPECT_EQ(errno, ENOMEM);
  ASSERT_TRUE(peer_.write(uintptr_t(a.data()) + 10, key, bytes("peer"), std::nullopt));
  EXPECT_EQ(std::string(reinterpret_cast<char*>(a.data()) + 10, 4), "peer");
  EXPECT_EQ(riounmap(fd_, a.data(), a.size()), 0);
  EXPECT_EQ(riounmap(fd_, a.data(), a.size()), -1);
  EXPECT_EQ(errno, EINVAL);
}

TEST_F(RsocketStreamWire, riowrite__rdma_write_into_window_the_peer_mapped) {
  ASSERT_NO_FATAL_FAILURE(connect_to_peer(8));
  const auto entry = [&] {
    std::vector<uint8_t> e(24);
    put_le(&e[0], 8192, 8);
    put_le(&e[8], uintptr_t(peer_.mem().window), 8);
    put_le(&e[16], peer_.mem().window_mr->rkey, 4);
    put_le(&e[20], 4096, 4);
    return e;
  }();
  EXPECT_EQ(riowrite(fd_, "x", 1, 8192, 0), size_t(-1));  // not mapped yet
  EXPECT_EQ(errno, EINVAL);
  ASSERT_TRUE(peer_.write(req_.sgl_addr + 32, req_.sgl_key, entry, 0xc0000000u));
  std::vector<uint8_t> data(100);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i + 1);
  size_t n = size_t(-1);
  for (int i = 0; i < 200 && n == size_t(-1); ++i) {  // once vrnic has seen the notice
    n = riowrite(fd_, data.data(), data.size(), 8192 + 50, 0);
    if (n == size_t(-1)) usleep(10000);
  }
  ASSERT_EQ(n, data.size());
  ASSERT_EQ(rsend(fd_, "m", 1, 0), 1);
  ASSERT_EQ(peer_.next_imm(), 1u);  // the data message: the riowrite raised no completion
  EXPECT_EQ(std::vector<uint8_t>(peer_.mem().window + 50, peer_.mem().window + 150), data);
  EXPECT_EQ(riowrite(fd_, "x", 1, 8192 + 4096, 0), size_t(-1));  // past the window
  EXPECT_EQ(errno, EINVAL);
}

// vrnic's listener; the peer connects with its own REQ data.
class RsocketStreamAccept : public RsocketStreamWire {
 protected:
  void listen_here() {
    at_ = device_addr(next_port_++);
    lfd_ = rsocket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(lfd_, 0);
    set_sizes(lfd_);  // the accepted socket takes the listener's sizes
    ASSERT_EQ(rbind(lfd_, sa(at_), sizeof at_), 0);
    ASSERT_EQ(rlisten(lfd_, 4), 0);
  }
};

TEST_F(RsocketStreamAccept, raccept__peer_req_taken_rep_holds_rs_conn_data) {
  ASSERT_NO_FATAL_FAILURE(listen_here());
  auto accepted = std::async(std::launch::async, [&] { return raccept(lfd_, nullptr, nullptr); });
  ASSERT_TRUE(peer_.connect(at_, 8));
  const auto rep = peer_.wait(RDMA_CM_EVENT_ESTABLISHED);
  ASSERT_TRUE(rep.has_value());
  fd_ = accepted.get();
  ASSERT_GE(fd_, 0);
  ASSERT_GE(rep->size(), 40u);
  const ConnFields f = fields_of(rep->data());
  EXPECT_EQ(f.version, 1);
  EXPECT_EQ(f.flags, 0x02);
  EXPECT_EQ(f.credits, 64);
  EXPECT_EQ(f.iomap, 2);
  EXPECT_TRUE(f.reserved_zero);
  EXPECT_EQ(f.sgl_len, 2u);
  EXPECT_EQ(f.buf_len, kHalf);
  ASSERT_EQ(peer_.next_imm(), 0x80000040u);
  EXPECT_EQ(get_le(peer_.mem().table + 16, 8), f.buf_addr + kHalf);
  ASSERT_EQ(rsend(fd_, "hi", 2, 0), 2);  // into the window the REQ gave
  ASSERT_EQ(peer_.next_imm(), 2u);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(peer_.mem().rbuf), 2), "hi");
  req_ = f;
  ASSERT_TRUE(peer_sends(0, bytes("back")));
  char buf[4];
  ASSERT_EQ(rrecv(fd_, buf, 4, MSG_WAITALL), 4);
  EXPECT_EQ(std::string(buf, 4), "back");
}

TEST_F(RsocketStreamAccept, raccept__req_of_another_version__rejected) {
  ASSERT_NO_FATAL_FAILURE(listen_here());
  ASSERT_TRUE(peer_.connect(at_, 8, 2));
  EXPECT_TRUE(peer_.wait(RDMA_CM_EVENT_REJECTED).has_value());
  ASSERT_EQ(rfcntl(lfd_, F_SETFL, O_NONBLOCK), 0);
  EXPECT_EQ(raccept(lfd_, nullptr, nullptr), -1);
  EXPECT_EQ(errno, EAGAIN);
}

TEST_F(RsocketStreamWire, rconnect__rep_of_another_version__enotsup) {
  int err = 0;
  ASSERT_NO_FATAL_FAILURE(connect_to_peer(8, 0, &err));
  EXPECT_EQ(err, ENOTSUP);
}

}  // namespace
}  // namespace vrnic::rdmacm::rs::test
