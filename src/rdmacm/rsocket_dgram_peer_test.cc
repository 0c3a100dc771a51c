// Tests of datagram rsockets against a peer built by hand from rdma-core v44's rsocket.c: a
// kernel UDP socket (the resolution datagrams, struct ds_udp_header) and a UD QP (the
// datagrams, struct ds_header), every message kind checked byte for byte both ways.
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "rdmacm/test_rsocket_peer.h"

namespace vrnic::rdmacm::rs::test {
namespace {

using Bytes = std::vector<uint8_t>;
constexpr uint32_t kQkey = 0x01234567;  // RDMA_UDP_QKEY
constexpr size_t kSlot = 40 + 2048;     // GRH, then rdma-core's 2048-byte receive

sockaddr* sa(sockaddr_in& a) { return reinterpret_cast<sockaddr*>(&a); }

Bytes ip_of(const sockaddr_in& a) {
  const auto* p = reinterpret_cast<const uint8_t*>(&a.sin_addr);
  return {p, p + 4};
}

Bytes port_of(const sockaddr_in& a) {
  const auto* p = reinterpret_cast<const uint8_t*>(&a.sin_port);
  return {p, p + 2};
}

Bytes cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

Bytes text(const char* s) { return {s, s + std::strlen(s)}; }

// struct ds_udp_header for IPv4: tag, version 4, op, length 16, reserved, QPN, address.
Bytes udp_header(uint8_t op, uint32_t qpn, const sockaddr_in& self) {
  Bytes h = {0x55, 0x55, 0x55, 0x55, 4, op, 16, 0};
  h.resize(12);
  put_be(&h[8], qpn & 0xffffff, 4);
  return cat({h, ip_of(self)});
}

// struct ds_header for IPv4: version 4, length 8, port, address.
Bytes ds_header(const sockaddr_in& from) { return cat({{4, 8}, port_of(from), ip_of(from)}); }

// The peer: a kernel UDP socket and a UD QP on the device's address.
class DgramPeer {
 public:
  explicit DgramPeer(const sockaddr_in& at) : at_(at) {
    udp_ = socket(AF_INET, SOCK_DGRAM, 0);
    ok_ = udp_ >= 0 && bind(udp_, reinterpret_cast<sockaddr*>(&at_), sizeof at_) == 0 && open_qp();
  }
  ~DgramPeer() {
    if (ah_) ibv_destroy_ah(ah_);
    if (qp_) ibv_destroy_qp(qp_);
    if (cq_) ibv_destroy_cq(cq_);
    if (mr_) ibv_dereg_mr(mr_);
    if (pd_) ibv_dealloc_pd(pd_);
    if (ctx_) ibv_close_device(ctx_);
    free(buf_);
    if (udp_ >= 0) close(udp_);
  }
  bool ok() const { return ok_; }
  uint32_t qpn() const { return qp_->qp_num; }

  std::optional<Bytes> udp_recv(sockaddr_in* from = nullptr, int ms = 3000) {
    pollfd p{udp_, POLLIN, 0};
    if (poll(&p, 1, ms) != 1) return std::nullopt;
    uint8_t b[4096];
    sockaddr_in f{};
    socklen_t fl = sizeof f;
    const ssize_t n = recvfrom(udp_, b, sizeof b, 0, reinterpret_cast<sockaddr*>(&f), &fl);
    if (n < 0) return std::nullopt;
    if (from) *from = f;
    return Bytes(b, b + n);
  }
  bool udp_send(const sockaddr_in& to, const Bytes& b) {
    return sendto(udp_, b.data(), b.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof to) ==
           ssize_t(b.size());
  }
  // A UD datagram received: its payload after the GRH and the sender's QPN.
  std::optional<Bytes> ud_recv(uint32_t* src_qp = nullptr, int ms = 3000) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    ibv_wc wc{};
    while (std::chrono::steady_clock::now() < end) {
      if (ibv_poll_cq(cq_, 1, &wc) != 1) {
        std::this_thread::yield();
        continue;
      }
      if (!(wc.opcode & IBV_WC_RECV)) continue;
      const uint8_t* at = buf_ + wc.wr_id * kSlot + 40;
      Bytes out(at, at + wc.byte_len - 40);
      if (src_qp) *src_qp = wc.src_qp;
      post_recv(uint32_t(wc.wr_id));
      return out;
    }
    return std::nullopt;
  }
  bool ud_send(const sockaddr_in& to, uint32_t qpn, const Bytes& b) {
    if (!ah_) {
      ibv_ah_attr a{};
      a.is_global = 1;
      a.port_num = 1;
      a.grh.hop_limit = 64;
      a.grh.dgid.raw[10] = a.grh.dgid.raw[11] = 0xff;  // ::ffff:a.b.c.d
      std::memcpy(&a.grh.dgid.raw[12], &to.sin_addr, 4);
      ah_ = ibv_create_ah(pd_, &a);
      if (!ah_) return false;
    }
    uint8_t* out = buf_ + kRecvs * kSlot;
    std::memcpy(out, b.data(), b.size());
    ibv_sge sge{uintptr_t(out), uint32_t(b.size()), mr_->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = 1000;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.ud.ah = ah_;
    wr.wr.ud.remote_qpn = qpn;
    wr.wr.ud.remote_qkey = kQkey;
    return ibv_post_send(qp_, &wr, &bad) == 0;
  }

 private:
  static constexpr uint32_t kRecvs = 16;

  void post_recv(uint32_t i) {
    ibv_sge sge{uintptr_t(buf_ + i * kSlot), uint32_t(kSlot), mr_->lkey};
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = i;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_post_recv(qp_, &wr, &bad);
  }
  bool open_qp() {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (!list || n < 1) return false;
    ctx_ = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    if (!ctx_ || !(pd_ = ibv_alloc_pd(ctx_))) return false;
    if (!(cq_ = ibv_create_cq(ctx_, 64, nullptr, nullptr, 0))) return false;
    if (posix_memalign(reinterpret_cast<void**>(&buf_), 4096, (kRecvs + 1) * kSlot)) return false;
    mr_ = ibv_reg_mr(pd_, buf_, (kRecvs + 1) * kSlot, IBV_ACCESS_LOCAL_WRITE);
    ibv_qp_init_attr qa{};
    qa.send_cq = qa.recv_cq = cq_;
    qa.qp_type = IBV_QPT_UD;
    qa.cap.max_send_wr = 16;
    qa.cap.max_recv_wr = kRecvs;
    qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
    if (!mr_ || !(qp_ = ibv_create_qp(pd_, &qa))) return false;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qkey = kQkey;
    if (ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
      return false;
    a = {};
    a.qp_state = IBV_QPS_RTR;
    if (ibv_modify_qp(qp_, &a, IBV_QP_STATE)) return false;
    a.qp_state = IBV_QPS_RTS;
    if (ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_SQ_PSN)) return false;
    for (uint32_t i = 0; i < kRecvs; ++i) post_recv(i);
    return true;
  }

  sockaddr_in at_;
  int udp_ = -1;
  bool ok_ = false;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  ibv_mr* mr_ = nullptr;
  ibv_ah* ah_ = nullptr;
  uint8_t* buf_ = nullptr;
};

class RsocketDgramWire : public ::testing::Test {
 protected:
  void SetUp() override {
    a_at_ = device_addr(uint16_t(next_port_++));
    p_at_ = device_addr(uint16_t(next_port_++));
    peer_ = std::make_unique<DgramPeer>(p_at_);
    ASSERT_TRUE(peer_->ok());
    a_ = rsocket(AF_INET, SOCK_DGRAM, 0);
    ASSERT_GE(a_, 0);
    ASSERT_EQ(rbind(a_, sa(a_at_), sizeof a_at_), 0);
  }
  void TearDown() override {
    if (a_ >= 0) rclose(a_);
  }
  ssize_t recv_from(char* buf, size_t len, sockaddr_in& from) {
    pollfd p{a_, POLLIN, 0};
    if (rpoll(&p, 1, 3000) != 1) return -2;
    socklen_t fl = sizeof from;
    return rrecvfrom(a_, buf, len, 0, sa(from), &fl);
  }

  std::unique_ptr<DgramPeer> peer_;
  sockaddr_in a_at_{}, p_at_{};
  int a_ = -1;
  static inline int next_port_ = 40900;
};

TEST_F(RsocketDgramWire, rsendto__new_destination__udp_header_then_ud_after_reply) {
  ASSERT_EQ(rsendto(a_, "ping", 4, 0, sa(p_at_), sizeof p_at_), 4);
  sockaddr_in from{};
  auto first = peer_->udp_recv(&from);
  ASSERT_TRUE(first.has_value());
  ASSERT_EQ(first->size(), 20u);
  EXPECT_EQ(from.sin_port, a_at_.sin_port);  // from the socket's own address and port
  EXPECT_EQ(from.sin_addr.s_addr, a_at_.sin_addr.s_addr);
  const uint32_t qpn = uint32_t(get_be(&(*first)[8], 4));
  EXPECT_EQ(qpn >> 24, 0u);
  EXPECT_NE(qpn, 0u);
  EXPECT_EQ(*first, cat({udp_header(0, qpn, a_at_), text("ping")}));  // op RS_OP_DATA
  // The reply names the peer's QP: from then on datagrams are UD SENDs to it.
  ASSERT_TRUE(peer_->udp_send(a_at_, udp_header(7, peer_->qpn(), p_at_)));  // op RS_OP_CTRL
  std::optional<Bytes> got;
  uint32_t src_qp = 0;
  for (int i = 0; i < 100 && !got; ++i) {
    ASSERT_EQ(rsendto(a_, "second", 6, 0, sa(p_at_), sizeof p_at_), 6);
    got = peer_->ud_recv(&src_qp, 20);
    peer_->udp_recv(nullptr, 0);  // one that left before the reply was taken
  }
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, cat({ds_header(a_at_), text("second")}));
  EXPECT_EQ(src_qp, qpn);  // the QP the header named
}

TEST_F(RsocketDgramWire, rrecvfrom__peer_first_datagram_over_udp__delivered_and_answered) {
  const Bytes data_header = udp_header(0, peer_->qpn(), p_at_);
  ASSERT_TRUE(peer_->udp_send(a_at_, cat({data_header, text("hello")})));
  char buf[64] = {};
  sockaddr_in from{};
  ASSERT_EQ(recv_from(buf, sizeof buf, from), 5);
  EXPECT_EQ(std::string(buf, 5), "hello");
  EXPECT_EQ(from.sin_port, p_at_.sin_port);
  EXPECT_EQ(from.sin_addr.s_addr, p_at_.sin_addr.s_addr);
  sockaddr_in rfrom{};
  auto reply = peer_->udp_recv(&rfrom);
  ASSERT_TRUE(reply.has_value());
  ASSERT_EQ(reply->size(), 16u);  // the header alone
  const uint32_t qpn = uint32_t(get_be(&(*reply)[8], 4));
  EXPECT_EQ(*reply, udp_header(7, qpn, a_at_));
  EXPECT_EQ(rfrom.sin_port, a_at_.sin_port);
  // The peer's UD datagrams to that QP; one without a valid header is dropped.
  ASSERT_TRUE(peer_->ud_send(a_at_, qpn, cat({{5, 8}, port_of(p_at_), ip_of(p_at_), text("bad")})));
  ASSERT_TRUE(peer_->ud_send(a_at_, qpn, cat({ds_header(p_at_), text("world")})));
  ASSERT_EQ(recv_from(buf, sizeof buf, from), 5);
  EXPECT_EQ(std::string(buf, 5), "world");
  EXPECT_EQ(from.sin_port, p_at_.sin_port);
  // vrnic learnt the peer's QP from the first datagram: its answer is a UD SEND at once.
  ASSERT_EQ(rsendto(a_, "back", 4, 0, sa(p_at_), sizeof p_at_), 4);
  uint32_t src_qp = 0;
  auto back = peer_->ud_recv(&src_qp);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, cat({ds_header(a_at_), text("back")}));
  EXPECT_EQ(src_qp, qpn);
  EXPECT_FALSE(peer_->udp_recv(nullptr, 100).has_value());  // nothing more over UDP
}

TEST_F(RsocketDgramWire, rrecvfrom__udp_datagram_without_valid_header__ignored) {
  Bytes bad = udp_header(0, peer_->qpn(), p_at_);
  bad[0] = 0x54;  // not the tag
  ASSERT_TRUE(peer_->udp_send(a_at_, cat({bad, text("x")})));
  ASSERT_TRUE(peer_->udp_send(a_at_, cat({udp_header(0, peer_->qpn(), p_at_), text("y")})));
  char buf[8];
  sockaddr_in from{};
  ASSERT_EQ(recv_from(buf, sizeof buf, from), 1);
  EXPECT_EQ(buf[0], 'y');
  auto reply = peer_->udp_recv();
  ASSERT_TRUE(reply.has_value());  // one answer, to the valid one
  EXPECT_FALSE(peer_->udp_recv(nullptr, 100).has_value());
}

}  // namespace
}  // namespace vrnic::rdmacm::rs::test
