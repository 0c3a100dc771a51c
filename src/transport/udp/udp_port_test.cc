// Tests of UdpPort over real loopback sockets: batches, pktinfo, source ports, pcap.
#include "transport/udp/udp_port.h"

#include <arpa/inet.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "wire/headers.h"
#include "wire/icrc.h"

#include "transport/udp/pcap_writer.h"
#include "wire/frame.h"

namespace vrnic::transport {
namespace {

// Addresses high in 127/8 and ephemeral ports, so the tests never meet a running device.
const IpAddress kA = IpAddress::v4(127, 0, 0, 231);
const IpAddress kB = IpAddress::v4(127, 0, 0, 232);

std::unique_ptr<UdpPort> open_port(const IpAddress& a, PcapWriter* pcap = nullptr,
                                   bool offload = true) {
  UdpPortOptions o;
  o.address = a;
  o.port = 0;
  o.pcap = pcap;
  o.offload = offload;
  int err = 0;
  auto p = UdpPort::open(o, err);
  EXPECT_NE(p, nullptr) << std::strerror(err);
  return p;
}

bool wait_readable(int fd, int ms = 2000) {
  pollfd pfd{fd, POLLIN, 0};
  return poll(&pfd, 1, ms) == 1;
}

engine::WirePacket packet_to(const UdpPort& from, const UdpPort& to, uint16_t src_port,
                             const std::vector<uint8_t>& bytes, uint8_t tos = 0) {
  engine::WirePacket p;
  p.ip.ipv6 = from.address().ipv6;
  p.ip.src = from.address().bytes;
  p.ip.dst = to.address().bytes;
  p.ip.src_port = src_port;
  p.ip.dst_port = to.port();
  p.tos = tos;
  p.data = bytes;
  return p;
}

// Receives until n packets arrived (or time runs out); copies them out of the batch.
struct Received {
  engine::WirePacket p;
  std::vector<uint8_t> bytes;
};
std::vector<Received> receive_n(UdpPort& port, size_t n) {
  std::vector<Received> out;
  RecvBatch batch;
  while (out.size() < n && wait_readable(port.fd())) {
    port.receive(batch);
    for (const auto& p : batch.packets())
      out.push_back({p, std::vector<uint8_t>(p.data.begin(), p.data.end())});
  }
  return out;
}

TEST(UdpPort, open__same_address_and_port_twice_is_eaddrinuse) {
  auto a = open_port(kA);
  ASSERT_NE(a, nullptr);
  UdpPortOptions o;
  o.address = kA;
  o.port = a->port();
  int err = 0;
  EXPECT_EQ(UdpPort::open(o, err), nullptr);
  EXPECT_EQ(err, EADDRINUSE);
}

TEST(UdpPort, send__batch_arrives_with_addresses_ports_and_tos) {
  auto a = open_port(kA), b = open_port(kB);
  ASSERT_TRUE(a && b);
  const uint16_t sport = a->source_port_for(0x11);
  std::vector<std::vector<uint8_t>> payloads;
  std::vector<engine::WirePacket> batch;
  for (int i = 0; i < 5; ++i) payloads.push_back(std::vector<uint8_t>(40 + i * 100, uint8_t(i)));
  for (int i = 0; i < 5; ++i)
    batch.push_back(packet_to(*a, *b, sport, payloads[i], i == 2 ? 0x02 /* ECT(0) */ : 0));
  a->send(batch);
  EXPECT_EQ(a->stats().tx_packets, 5u);

  auto got = receive_n(*b, 5);
  ASSERT_EQ(got.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    const auto& p = got[i].p;
    EXPECT_EQ(got[i].bytes, payloads[i]) << i;
    EXPECT_FALSE(p.ip.ipv6);
    EXPECT_EQ(p.ip.src, kA.bytes);
    EXPECT_EQ(p.ip.dst, kB.bytes);  // the address the socket is bound to
    EXPECT_EQ(p.ip.src_port, sport);
    EXPECT_EQ(p.ip.dst_port, b->port());
    EXPECT_EQ(p.ip.ip_id, 0);
    EXPECT_EQ(p.ip.ip_flags_frag, 0x4000);
    EXPECT_EQ(p.tos, i == 2 ? 0x02 : 0x00) << i;
  }
  EXPECT_EQ(b->stats().rx_packets, 5u);
}

// A send socket takes the TOS of the first packet it sends as its own (no control message for
// it from then on); packets with any other TOS, 0 included, still leave with theirs.
TEST(UdpPort, send__socket_takes_its_first_tos_and_others_keep_their_own) {
  auto a = open_port(kA), b = open_port(kB);
  ASSERT_TRUE(a && b);
  const uint16_t sport = a->source_port_for(0x12);
  const uint8_t tos[] = {0x02, 0x02, 0x00, 0xBA /* DSCP 46, ECT(0) */, 0x02, 0x00, 0x03};
  const size_t n = sizeof tos;
  std::vector<std::vector<uint8_t>> payloads;
  // Growing sizes: no two form a segmentation-offload group (whose later ICRCs the port
  // rewrites for their IP IDs), so each arrives as sent.
  for (size_t i = 0; i < n; ++i) payloads.push_back(std::vector<uint8_t>(30 + 10 * i, uint8_t(i)));
  for (size_t round = 0; round < 2; ++round) {  // the second round: the socket's TOS is set
    std::vector<engine::WirePacket> batch;
    for (size_t i = 0; i < n; ++i) batch.push_back(packet_to(*a, *b, sport, payloads[i], tos[i]));
    a->send(batch);
    auto got = receive_n(*b, n);
    ASSERT_EQ(got.size(), n) << round;
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(got[i].p.tos, tos[i]) << round << " " << i;
      EXPECT_EQ(got[i].bytes, payloads[i]);
    }
  }
  // A socket whose first packet had TOS 0 sends a marked packet after it with its marking.
  const uint16_t other = a->source_port_for(0x99);
  ASSERT_NE(other, sport);
  a->send(std::vector<engine::WirePacket>{packet_to(*a, *b, other, payloads[1], 0x00),
                                          packet_to(*a, *b, other, payloads[2], 0x02)});
  auto got = receive_n(*b, 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].p.tos, 0x00);
  EXPECT_EQ(got[1].p.tos, 0x02);
  EXPECT_EQ(a->stats().tx_dropped, 0u);
}

TEST(UdpPort, receive__pktinfo_reports_the_header_destination) {
  // A socket bound to 0.0.0.0 still reports the address the packet was sent to.
  UdpPortOptions o;
  o.address = IpAddress::v4(0, 0, 0, 0);
  o.port = 0;
  int err = 0;
  auto any = UdpPort::open(o, err);
  ASSERT_NE(any, nullptr);
  auto a = open_port(kA);
  std::vector<uint8_t> bytes(16, 7);
  engine::WirePacket p = packet_to(*a, *any, a->source_port_for(3), bytes);
  p.ip.dst = IpAddress::v4(127, 0, 0, 233).bytes;
  a->send({&p, 1});
  auto got = receive_n(*any, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].p.ip.dst, IpAddress::v4(127, 0, 0, 233).bytes);
}

TEST(UdpPort, receive__nothing_waiting_returns_zero) {
  auto a = open_port(kA);
  RecvBatch batch;
  EXPECT_EQ(a->receive(batch), 0u);
  EXPECT_TRUE(batch.packets().empty());
}

TEST(UdpPort, receive__more_than_a_batch_comes_in_batches) {
  // Without offload each datagram takes one slot of the batch.
  auto a = open_port(kA, nullptr, false), b = open_port(kB, nullptr, false);
  std::vector<uint8_t> bytes(32, 1);
  std::vector<engine::WirePacket> batch(100, packet_to(*a, *b, a->source_port_for(9), bytes));
  a->send(batch);
  RecvBatch rb(64);
  ASSERT_TRUE(wait_readable(b->fd()));
  EXPECT_EQ(b->receive(rb), 64u);
  EXPECT_EQ(b->receive(rb), 36u);
  EXPECT_EQ(b->receive(rb), 0u);
}

// A port with `queues` receive queues on a fixed port of `a` (queues share only fixed ports).
std::unique_ptr<UdpPort> open_queues(const IpAddress& a, uint16_t port, size_t queues, int& err) {
  UdpPortOptions o;
  o.address = a;
  o.port = port;
  o.rx_queues = queues;
  return UdpPort::open(o, err);
}

// A UDP port free on `a` right now.
uint16_t free_port(const IpAddress& a) {
  auto probe = open_port(a);
  return probe ? probe->port() : 0;
}

TEST(UdpPort, open__several_queues_hold_the_address_against_any_other_device) {
  const uint16_t port = free_port(kA);
  int err = 0;
  auto four = open_queues(kA, port, 4, err);
  ASSERT_NE(four, nullptr) << std::strerror(err);
  EXPECT_EQ(four->rx_queues(), 4u);
  EXPECT_EQ(open_queues(kA, port, 4, err), nullptr);  // would join the group: the lock says no
  EXPECT_EQ(err, EADDRINUSE);
  EXPECT_EQ(open_queues(kA, port, 1, err), nullptr);  // an exclusive bind
  EXPECT_EQ(err, EADDRINUSE);
  four.reset();
  auto one = open_queues(kA, port, 1, err);  // free again
  ASSERT_NE(one, nullptr) << std::strerror(err);
  EXPECT_EQ(open_queues(kA, port, 4, err), nullptr);
  EXPECT_EQ(err, EADDRINUSE);
}

TEST(UdpPort, open__several_queues_need_a_fixed_port) {
  int err = 0;
  EXPECT_EQ(open_queues(kA, 0, 2, err), nullptr);
  EXPECT_EQ(err, EINVAL);
}

TEST(UdpPort, receive__flows_spread_over_queues_each_in_order_on_one) {
  // 16 flows (source ports) of 8 numbered datagrams each into a port with 4 queues: every
  // datagram arrives once, each flow on one queue and in order, and the flows use more than
  // one queue.
  int err = 0;
  auto b = open_queues(kB, free_port(kB), 4, err);
  ASSERT_NE(b, nullptr) << std::strerror(err);
  auto a = open_port(kA, nullptr, false);
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<engine::WirePacket> batch;
  for (uint32_t qpn = 0; qpn < 16; ++qpn)
    for (uint8_t seq = 0; seq < 8; ++seq) bytes.push_back({uint8_t(qpn), seq, 0, 0});
  for (size_t k = 0; k < bytes.size(); ++k)
    batch.push_back(packet_to(*a, *b, a->source_port_for(bytes[k][0] * 0x1001u), bytes[k]));
  a->send(batch);
  // (Several QPNs may hash to one source port: the order is checked per sender's sequence,
  // the queue per source port.)
  std::map<uint16_t, size_t> queue_of;  // source port -> queue
  std::map<uint8_t, int> last_seq;      // sequence -> last number seen
  std::set<size_t> used;
  size_t got = 0;
  RecvBatch rb;
  for (int spins = 0; got < bytes.size() && spins < 1000; ++spins) {
    for (size_t q = 0; q < b->rx_queues(); ++q) {
      b->receive(rb, q);
      for (const auto& p : rb.packets()) {
        auto [it, fresh] = queue_of.try_emplace(p.ip.src_port, q);
        EXPECT_EQ(it->second, q) << "flow " << p.ip.src_port << " moved queues";
        auto [seq, first] = last_seq.try_emplace(p.data[0], -1);
        EXPECT_EQ(p.data[1], seq->second + 1) << "sequence " << int(p.data[0]);
        seq->second = p.data[1];
        used.insert(q);
        ++got;
      }
    }
    if (got < bytes.size()) wait_readable(b->queue_fd(spins % 4), 10);
  }
  EXPECT_EQ(got, bytes.size());
  EXPECT_EQ(b->stats().rx_packets, bytes.size());
  EXPECT_GT(used.size(), 1u);
}

TEST(UdpPort, receive__lone_datagram_after_quiet_socket_asks_for_one_then_for_a_batch) {
  // A ping-pong receives one datagram after empty polls: the next receive asks for one
  // (recvmmsg would otherwise try a second message and fail); datagrams that keep coming
  // are taken a batch at a time again.
  auto a = open_port(kA, nullptr, false), b = open_port(kB, nullptr, false);
  std::vector<uint8_t> bytes(32, 1);
  const engine::WirePacket p = packet_to(*a, *b, a->source_port_for(9), bytes);
  RecvBatch rb(64);
  EXPECT_EQ(b->receive(rb), 0u);
  a->send({&p, 1});
  ASSERT_TRUE(wait_readable(b->fd()));
  EXPECT_EQ(b->receive(rb), 1u);
  EXPECT_FALSE(rb.full());  // asked for a batch, got one
  EXPECT_EQ(b->receive(rb), 0u);
  std::vector<engine::WirePacket> five(5, p);
  a->send(five);
  ASSERT_TRUE(wait_readable(b->fd()));
  EXPECT_EQ(b->receive(rb), 1u);
  EXPECT_TRUE(rb.full());  // asked for one: more may wait
  EXPECT_EQ(b->receive(rb), 1u);  // still one: a lone datagram again, as far as it knew
  EXPECT_TRUE(rb.full());
  EXPECT_EQ(b->receive(rb), 3u);  // two receives in a row found some: a batch
  EXPECT_FALSE(rb.full());
  EXPECT_EQ(b->receive(rb), 0u);
}

TEST(UdpPort, receive__reused_batch_keeps_control_room_for_later_gro_buffers) {
  // recvmmsg shrinks a filled header's control length to what it wrote (no UDP_GRO message
  // for a lone datagram); the port restores it before the next call, or the control messages
  // of a later GRO buffer in that slot would be cut off (the kernel writes UDP_GRO first,
  // then PKTINFO, then the TOS, which is lost).
  auto a = open_port(kA), b = open_port(kB);
  ASSERT_TRUE(a && b);
  const uint16_t sport = a->source_port_for(5);
  RecvBatch rb;
  std::vector<std::vector<uint8_t>> lone = {std::vector<uint8_t>(20, 1),
                                            std::vector<uint8_t>(30, 2),
                                            std::vector<uint8_t>(40, 3)};
  std::vector<engine::WirePacket> first;
  for (const auto& l : lone) first.push_back(packet_to(*a, *b, sport, l));
  a->send(first);  // growing sizes: three lone datagrams, slots 0-2
  ASSERT_TRUE(wait_readable(b->fd()));
  ASSERT_EQ(b->receive(rb), 3u);
  std::vector<uint8_t> small(60, 4), big(100, 5);
  std::vector<engine::WirePacket> groups;
  for (int i = 0; i < 4; ++i) groups.push_back(packet_to(*a, *b, sport, small, 0x02));
  for (int i = 0; i < 4; ++i) groups.push_back(packet_to(*a, *b, sport, big, 0x02));
  a->send(groups);  // two offload groups: GRO buffers in slots 0 and 1
  ASSERT_TRUE(wait_readable(b->fd()));
  ASSERT_EQ(b->receive(rb), 8u);
  for (size_t i = 0; i < 8; ++i) {  // the last 4 bytes are the ICRC slot, rewritten per IP ID
    const auto& want = i < 4 ? small : big;
    const auto got = rb.packets()[i].data;
    ASSERT_EQ(got.size(), want.size()) << i;
    EXPECT_TRUE(std::equal(want.begin(), want.end() - 4, got.begin())) << i;
    EXPECT_EQ(rb.packets()[i].tos, 0x02) << i;  // ECT(0), the last control message
  }
}

// The packets of one multi-packet message: a longer first one, equal middle ones, a shorter
// last one, then a lone packet to the same peer.
std::vector<std::vector<uint8_t>> message_payloads() {
  std::vector<std::vector<uint8_t>> out;
  out.push_back(std::vector<uint8_t>(4128, 0xF0));
  for (int i = 0; i < 20; ++i) out.push_back(std::vector<uint8_t>(4112, uint8_t(i)));
  out.push_back(std::vector<uint8_t>(700, 0xAA));
  out.push_back(std::vector<uint8_t>(4112, 0x55));
  return out;
}

// IPv4 segment k of a UDP_SEGMENT group leaves with IP ID k and its ICRC recomputed for
// that ID; everything before the ICRC is as the engine built it. Returns the k that explains
// `got`, or -1 if none (k < 64, the largest group).
int segment_id_of(const std::vector<uint8_t>& sent, const std::vector<uint8_t>& got) {
  if (sent.size() != got.size() || sent.size() < wire::kIcrcSize) return -1;
  const size_t body = sent.size() - wire::kIcrcSize;
  if (!std::equal(sent.begin(), sent.begin() + body, got.begin())) return -1;
  for (uint16_t k = 0; k < 64; ++k) {
    if (wire::icrc_with_ip_id_change(wire::stored_icrc(sent), body, k) == wire::stored_icrc(got))
      return k;
  }
  return -1;
}

// Segment IDs count 0, 1, 2, ... within each group, as the kernel numbers them.
void expect_segment_ids(const std::vector<std::vector<uint8_t>>& sent,
                        const std::vector<Received>& got, bool ids_reported) {
  ASSERT_EQ(got.size(), sent.size());
  int prev = -1;
  for (size_t i = 0; i < sent.size(); ++i) {
    const int k = segment_id_of(sent[i], got[i].bytes);
    EXPECT_GE(k, 0) << i;
    EXPECT_TRUE(k == 0 || k == prev + 1) << i << ": id " << k << " after " << prev;
    if (ids_reported) EXPECT_EQ(got[i].p.ip.ip_id, k) << i;
    prev = k;
  }
}

void expect_same_packets(bool sender_offload, bool receiver_offload) {
  auto a = open_port(kA, nullptr, sender_offload), b = open_port(kB, nullptr, receiver_offload);
  ASSERT_TRUE(a && b);
  const uint16_t sport = a->source_port_for(0x21);
  auto payloads = message_payloads();
  std::vector<engine::WirePacket> batch;
  for (const auto& pl : payloads) batch.push_back(packet_to(*a, *b, sport, pl));
  a->send(batch);
  EXPECT_EQ(a->stats().tx_packets, payloads.size());
  EXPECT_EQ(a->stats().tx_dropped, 0u);
  auto got = receive_n(*b, payloads.size());
  ASSERT_EQ(got.size(), payloads.size());
  expect_segment_ids(payloads, got, receiver_offload);
  for (size_t i = 0; i < payloads.size(); ++i) {
    EXPECT_EQ(got[i].p.ip.src_port, sport) << i;
    EXPECT_EQ(got[i].p.ip.src, kA.bytes) << i;
    EXPECT_EQ(got[i].p.ip.dst, kB.bytes) << i;
  }
}

TEST(UdpPort, send__segmentation_offload_to_gro_receiver_keeps_every_packet) {
  expect_same_packets(true, true);
}

TEST(UdpPort, send__segmentation_offload_to_plain_receiver_keeps_every_packet) {
  expect_same_packets(true, false);
}

TEST(UdpPort, receive__gro_buffer_is_cut_into_datagrams) {
  auto a = open_port(kA), b = open_port(kB);
  ASSERT_TRUE(a && b);
  auto payloads = message_payloads();
  std::vector<engine::WirePacket> batch;
  for (const auto& pl : payloads) batch.push_back(packet_to(*a, *b, a->source_port_for(5), pl));
  a->send(batch);
  RecvBatch rb(64);
  ASSERT_TRUE(wait_readable(b->fd()));
  // The 23 packets were sent as a few groups, so they take fewer than 23 receive slots.
  size_t got = 0, slots = 0;
  for (int i = 0; i < 10 && got < payloads.size(); ++i) {
    if (!wait_readable(b->fd(), 200)) break;
    got += b->receive(rb);
    slots += rb.datagrams();
  }
  EXPECT_EQ(got, payloads.size());
  EXPECT_LT(slots, payloads.size());
  EXPECT_EQ(b->stats().rx_packets, payloads.size());
  EXPECT_EQ(b->stats().rx_truncated, 0u);
}

TEST(UdpPort, source_port_for__stable_in_range_and_really_used) {
  auto a = open_port(kA);
  // A plain socket plays the peer, so recvfrom reports what the kernel really sent from.
  int peer = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_storage sa;
  socklen_t len = kB.to_sockaddr(0, sa);
  ASSERT_EQ(bind(peer, reinterpret_cast<sockaddr*>(&sa), len), 0);
  getsockname(peer, reinterpret_cast<sockaddr*>(&sa), &len);
  uint16_t peer_port = ntohs(reinterpret_cast<sockaddr_in*>(&sa)->sin_port);

  for (uint32_t qpn : {1u, 2u, 17u, 0xabcdu, 0xffffffu}) {
    uint16_t sport = a->source_port_for(qpn);
    EXPECT_EQ(a->source_port_for(qpn), sport);
    EXPECT_GE(sport, 0xC000);
    std::vector<uint8_t> bytes(8, uint8_t(qpn));
    engine::WirePacket p;
    p.ip.src = kA.bytes;
    p.ip.dst = kB.bytes;
    p.ip.src_port = sport;
    p.ip.dst_port = peer_port;
    p.data = bytes;
    a->send({&p, 1});
    ASSERT_TRUE(wait_readable(peer));
    sockaddr_in from{};
    socklen_t flen = sizeof from;
    uint8_t buf[64];
    ASSERT_EQ(recvfrom(peer, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &flen), 8);
    EXPECT_EQ(ntohs(from.sin_port), sport) << qpn;
    EXPECT_EQ(std::memcmp(&from.sin_addr, kA.bytes.data(), 4), 0);
  }
  close(peer);
}

TEST(UdpPort, send__interleaved_source_ports_one_sendmmsg_each_in_order_per_port) {
  auto a = open_port(kA, nullptr, false);  // no offload: a message per packet
  auto b = open_port(kB);
  const uint16_t ports[3] = {a->source_port_for(1), a->source_port_for(2), a->source_port_for(3)};
  ASSERT_NE(ports[0], ports[1]);
  ASSERT_NE(ports[1], ports[2]);
  ASSERT_NE(ports[0], ports[2]);
  // Three QPs' packets interleaved, as a batch of ACKs or requests for many QPs comes.
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<engine::WirePacket> batch;
  for (int i = 0; i < 12; ++i) bytes.push_back(std::vector<uint8_t>(16, uint8_t(i)));
  for (int i = 0; i < 12; ++i) batch.push_back(packet_to(*a, *b, ports[i % 3], bytes[i]));
  a->send(batch);
  EXPECT_EQ(a->stats().tx_calls, 3u);  // one per source port, not one per packet
  EXPECT_EQ(a->stats().tx_packets, 12u);
  auto got = receive_n(*b, 12);
  ASSERT_EQ(got.size(), 12u);
  int last[3] = {-1, -1, -1};
  for (const Received& r : got) {
    const int port = int(std::find(ports, ports + 3, r.p.ip.src_port) - ports);
    ASSERT_LT(port, 3);
    const int i = r.bytes[0];
    EXPECT_EQ(i % 3, port);      // it came from its QP's port
    EXPECT_GT(i, last[port]);    // and in its QP's order
    last[port] = i;
  }
}

TEST(UdpPort, source_port_for__different_qpns_spread_over_ports) {
  auto a = open_port(kA);
  std::vector<uint16_t> ports;
  for (uint32_t qpn = 1; qpn <= 64; ++qpn) ports.push_back(a->source_port_for(qpn));
  std::sort(ports.begin(), ports.end());
  size_t distinct = std::unique(ports.begin(), ports.end()) - ports.begin();
  EXPECT_GE(distinct, 8u);   // 64 QPNs over a pool of 16 sockets
  EXPECT_LE(distinct, 16u);
}

TEST(UdpPort, source_port_for__taken_port_moves_to_the_next_free_one) {
  const uint32_t qpn = 0x42;
  const uint16_t preferred = preferred_source_port(qpn);
  int squatter = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_storage sa;
  socklen_t len = kA.to_sockaddr(preferred, sa);
  if (bind(squatter, reinterpret_cast<sockaddr*>(&sa), len) != 0) GTEST_SKIP() << "port busy";
  auto a = open_port(kA);
  uint16_t sport = a->source_port_for(qpn);
  EXPECT_NE(sport, preferred);
  EXPECT_GE(sport, 0xC000);
  close(squatter);
}

TEST(UdpPort, send__wrong_address_family_is_dropped_and_counted) {
  auto a = open_port(kA), b = open_port(kB);
  std::vector<uint8_t> bytes(8, 0);
  engine::WirePacket p = packet_to(*a, *b, a->source_port_for(1), bytes);
  p.ip.ipv6 = true;
  a->send({&p, 1});
  EXPECT_EQ(a->stats().tx_dropped, 1u);
  EXPECT_EQ(a->stats().tx_packets, 0u);
}

TEST(UdpPort, send__ipv6_loopback) {
  IpAddress v6;
  ASSERT_TRUE(IpAddress::parse("::1", v6));
  UdpPortOptions o;
  o.address = v6;
  o.port = 0;
  int err = 0;
  auto a = UdpPort::open(o, err);
  if (!a) GTEST_SKIP() << "no IPv6 loopback: " << std::strerror(err);
  auto b = UdpPort::open(o, err);
  ASSERT_NE(b, nullptr);
  std::vector<uint8_t> bytes(100, 0x5a);
  const uint16_t sport = a->source_port_for(77);
  a->send(std::vector<engine::WirePacket>{packet_to(*a, *b, sport, bytes, 0x01)});
  auto got = receive_n(*b, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(got[0].p.ip.ipv6);
  EXPECT_EQ(got[0].p.ip.src, v6.bytes);
  EXPECT_EQ(got[0].p.ip.dst, v6.bytes);
  EXPECT_EQ(got[0].p.ip.src_port, sport);
  EXPECT_EQ(got[0].p.tos, 0x01);
  EXPECT_EQ(got[0].bytes, bytes);
  // The socket now has traffic class 0x01 of its own; a packet with 0 still leaves with 0.
  a->send(std::vector<engine::WirePacket>{packet_to(*a, *b, sport, bytes, 0x00),
                                          packet_to(*a, *b, sport, bytes, 0x01)});
  got = receive_n(*b, 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].p.tos, 0x00);
  EXPECT_EQ(got[1].p.tos, 0x01);
}

TEST(PcapWriter, write_packet__sent_and_received_frames_land_in_the_file) {
  char path[] = "/tmp/vrnic_udp_test_XXXXXX";
  int tmp = mkstemp(path);
  ASSERT_GE(tmp, 0);
  close(tmp);
  int err = 0;
  auto pcap = PcapWriter::open(path, err);
  ASSERT_NE(pcap, nullptr);
  auto a = open_port(kA, pcap.get()), b = open_port(kB, pcap.get());
  std::vector<uint8_t> bytes(60, 0x33);
  a->send(std::vector<engine::WirePacket>{packet_to(*a, *b, a->source_port_for(5), bytes)});
  ASSERT_EQ(receive_n(*b, 1).size(), 1u);
  EXPECT_EQ(pcap->frames(), 2u);
  pcap.reset();  // flush and close

  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)), {});
  std::remove(path);
  ASSERT_GE(file.size(), 24u);
  uint32_t magic, linktype;
  std::memcpy(&magic, &file[0], 4);
  std::memcpy(&linktype, &file[20], 4);
  EXPECT_EQ(magic, 0xa1b2c3d4u);
  EXPECT_EQ(linktype, 1u);
  size_t off = 24;
  for (int i = 0; i < 2; ++i) {
    ASSERT_GE(file.size(), off + 16);
    uint32_t incl;
    std::memcpy(&incl, &file[off + 8], 4);
    EXPECT_EQ(incl, 14u + 20u + 8u + bytes.size());
    ASSERT_GE(file.size(), off + 16 + incl);
    wire::IpUdpInfo ip;
    auto payload = wire::parse_frame(std::span<const uint8_t>(&file[off + 16], incl), ip);
    EXPECT_EQ(std::vector<uint8_t>(payload.begin(), payload.end()), bytes);
    EXPECT_EQ(ip.src, kA.bytes);
    EXPECT_EQ(ip.dst, kB.bytes);
    off += 16 + incl;
  }
  EXPECT_EQ(off, file.size());
}

TEST(PcapWriter, expand_pid__replaces_percent_p) {
  EXPECT_EQ(expand_pid("/tmp/x-%p.pcap"), "/tmp/x-" + std::to_string(getpid()) + ".pcap");
  EXPECT_EQ(expand_pid("/tmp/plain.pcap"), "/tmp/plain.pcap");
}

}  // namespace
}  // namespace vrnic::transport

namespace vrnic::transport {
namespace {

// UD multicast: ports that joined a group each get a copy of a packet sent to it (the group
// address as its destination); a port that left gets none.
TEST(UdpPortMulticast, set_multicast__joined_ports_receive_group_packets_until_they_leave) {
  auto a = open_port(IpAddress::v4(127, 0, 0, 233));
  ASSERT_NE(a, nullptr);
  UdpPortOptions o;
  o.port = a->port();  // every device of a group listens on the same UDP port (4791 live)
  int err = 0;
  o.address = IpAddress::v4(127, 0, 0, 234);
  auto b = UdpPort::open(o, err);
  ASSERT_NE(b, nullptr) << std::strerror(err);
  o.address = IpAddress::v4(127, 0, 0, 235);
  auto c = UdpPort::open(o, err);
  ASSERT_NE(c, nullptr) << std::strerror(err);
  const std::array<uint8_t, 16> group{239, 77, 0, 1};
  ASSERT_TRUE(a->set_multicast(group, false, true));
  ASSERT_TRUE(b->set_multicast(group, false, true));
  EXPECT_FALSE(a->set_multicast(std::array<uint8_t, 16>{0xff, 0x0e}, true, true));  // no IPv6

  std::vector<uint8_t> bytes(40, 0x42);
  engine::WirePacket p;
  p.ip.src = c->address().bytes;
  p.ip.dst = group;
  p.ip.src_port = c->source_port_for(3);
  p.ip.dst_port = a->port();
  p.data = bytes;
  c->send({&p, 1});
  for (UdpPort* port : {a.get(), b.get()}) {
    auto got = receive_n(*port, 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].bytes, bytes);
    EXPECT_EQ(got[0].p.ip.dst, group);  // the group, from IP_PKTINFO
    EXPECT_EQ(got[0].p.ip.src, c->address().bytes);
  }
  ASSERT_TRUE(a->set_multicast(group, false, false));
  EXPECT_FALSE(a->set_multicast(group, false, false));  // not a member any more
  c->send({&p, 1});
  EXPECT_EQ(receive_n(*b, 1).size(), 1u);
  RecvBatch batch;
  EXPECT_FALSE(wait_readable(a->fd(), 100));
  EXPECT_EQ(a->receive(batch), 0u);
}

}  // namespace
}  // namespace vrnic::transport
