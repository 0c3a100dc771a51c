// UdpPort's receive side: the batch storage, recvmmsg on each receive queue, GRO buffers cut
// back into RoCE packets.
#include "transport/udp/udp_port.h"

#include <netinet/in.h>
#include <netinet/udp.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "transport/udp/fault_injector.h"
#include "transport/udp/kernel_socket.h"
#include "transport/udp/pcap_writer.h"

namespace vrnic::transport {
namespace {

constexpr uint16_t kIpFlagDf = 0x4000;

// Adds n to a counter only one thread writes at a time (the one receiving on its queue);
// others may read it at any time.
void bump(std::atomic<uint64_t>& c, uint64_t n) {
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

}  // namespace

// ---- RecvBatch ----------------------------------------------------------------------------

struct RecvBatch::Slots {
  explicit Slots(size_t n)
      : data(n * kSlotBytes), names(n), control(n * kCmsgBytes), iov(n), msgs(n) {}
  std::vector<uint8_t> data;
  std::vector<sockaddr_storage> names;
  std::vector<uint8_t> control;
  std::vector<iovec> iov;
  std::vector<mmsghdr> msgs;
};

RecvBatch::RecvBatch(size_t capacity)
    : capacity_(capacity == 0 ? 1 : capacity), slots_(std::make_unique<Slots>(capacity_)) {
  packets_.reserve(capacity_ * 2);  // room for injected duplicates
  Slots& s = *slots_;
  std::memset(s.msgs.data(), 0, sizeof(mmsghdr) * capacity_);
  for (size_t k = 0; k < capacity_; ++k) {
    msghdr& h = s.msgs[k].msg_hdr;
    s.iov[k].iov_base = &s.data[k * kSlotBytes];
    s.iov[k].iov_len = kSlotBytes;
    h.msg_iov = &s.iov[k];
    h.msg_iovlen = 1;
    h.msg_name = &s.names[k];
    h.msg_control = &s.control[k * kCmsgBytes];
    h.msg_namelen = sizeof(sockaddr_storage);
    h.msg_controllen = kCmsgBytes;
  }
}

RecvBatch::~RecvBatch() = default;

// ---- receive ------------------------------------------------------------------------------

size_t UdpPort::receive(RecvBatch& batch) { return receive(batch, 0); }

// recvmmsg on the queue's socket (queue 0: then the multicast group sockets, starting after
// the one read last time so that none starves the others). Returns what recvmmsg returned.
int UdpPort::recv_datagrams(RecvBatch& batch, size_t queue) {
  RecvBatch::Slots& s = *batch.slots_;
  RxQueue& q = rxq_[queue];
  // recvmmsg overwrites only these, and only in the messages it fills: reset those of the
  // last call (the rest are as the constructor left them; the buffers stay wired).
  for (size_t k = 0; k < std::min(batch.capacity_, batch.filled_); ++k) {
    msghdr& h = s.msgs[k].msg_hdr;
    h.msg_namelen = sizeof(sockaddr_storage);
    h.msg_controllen = RecvBatch::kCmsgBytes;
    h.msg_flags = 0;
  }
  batch.packets_.clear();
  batch.datagrams_ = 0;
  batch.filled_ = 0;
  const ErrnoKept keep_errno;
  int r = -1;
  const size_t nfds = queue == 0 ? 1 + groups_.size() : 1;
  const size_t ask = std::min(batch.capacity_, q.ask);
  batch.asked_ = ask;
  const size_t turn = queue == 0 ? rx_turn_ : 0;  // rx_turn_ is queue 0's alone
  for (size_t t = 0; t < nfds; ++t) {
    const size_t i = (turn + t) % nfds;
    const int fd = i == 0 ? q.fd : groups_[i - 1].fd;
    do {
      r = kernel_recvmmsg(fd, s.msgs.data(), static_cast<unsigned>(ask), MSG_DONTWAIT);
    } while (r < 0 && errno == EINTR);
    if (r > 0) {
      if (queue == 0) rx_turn_ = (i + 1) % nfds;
      break;
    }
  }
  // How many datagrams to ask for next time. recvmmsg tries one more message than it finds
  // (a header copied in, a failed dequeue: about half an empty receive), so a lone datagram
  // after a quiet socket (a ping-pong, each side busy-polling) makes the next call ask for
  // one; a receive that finds more than one, or follows another that found some, asks for
  // a whole batch again.
  const bool got = r > 0;
  q.ask = got && r == 1 && !q.prev_got ? 1 : (got ? RecvBatch::kMaxBatch : q.ask);
  q.prev_got = got;
  return r;
}

// The datagram's addresses and TOS from its name and control messages; its GRO segment size
// (0: a lone datagram). False if the name is not an IP address.
bool UdpPort::read_header(const msghdr& h, engine::WirePacket& p, size_t& gro_size) const {
  IpAddress src;
  uint16_t src_port = 0;
  if (!IpAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(h.msg_name), src, &src_port))
    return false;
  p.ip.ipv6 = src.ipv6;
  p.ip.src = src.bytes;
  p.ip.src_port = src_port;
  p.ip.dst_port = options_.port;
  p.ip.dst = options_.address.bytes;  // unless PKTINFO says otherwise
  // The socket does not reveal the IPv4 ID; assume what a Linux sender with DF uses.
  // wire::verify_icrc recovers any other ID (see its comment).
  p.ip.ip_id = 0;
  p.ip.ip_flags_frag = kIpFlagDf;
  gro_size = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(const_cast<msghdr*>(&h), c)) {
    if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
      in_pktinfo pi;
      std::memcpy(&pi, CMSG_DATA(c), sizeof pi);
      std::memcpy(p.ip.dst.data(), &pi.ipi_addr, 4);
    } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) {
      p.tos = *CMSG_DATA(c);
    } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
      in6_pktinfo pi;
      std::memcpy(&pi, CMSG_DATA(c), sizeof pi);
      std::memcpy(p.ip.dst.data(), &pi.ipi6_addr, 16);
    } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS) {
      int tclass = 0;
      std::memcpy(&tclass, CMSG_DATA(c), sizeof tclass);
      p.tos = static_cast<uint8_t>(tclass);
    } else if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
      int size = 0;
      std::memcpy(&size, CMSG_DATA(c), sizeof size);
      gro_size = size > 0 ? static_cast<size_t>(size) : 0;
    }
  }
  return true;
}

size_t UdpPort::receive(RecvBatch& batch, size_t queue) {
  const int r = recv_datagrams(batch, queue);
  if (r <= 0) return 0;
  RxQueue& q = rxq_[queue];
  RecvBatch::Slots& s = *batch.slots_;
  batch.datagrams_ = static_cast<size_t>(r);
  batch.filled_ = static_cast<size_t>(r);
  for (int k = 0; k < r; ++k) {
    const msghdr& h = s.msgs[k].msg_hdr;
    if (h.msg_flags & MSG_TRUNC) {  // longer than any packet vrnic sends or accepts
      bump(q.rx_truncated, 1);
      continue;
    }
    engine::WirePacket p;
    size_t gro_size = 0;
    if (!read_header(h, p, gro_size)) continue;
    // A GRO buffer holds datagrams of gso_size bytes back to back (the last may be
    // shorter): each is one RoCE packet, with the same addresses and TOS.
    const uint8_t* base = &s.data[k * RecvBatch::kSlotBytes];
    size_t len = s.msgs[k].msg_len;
    size_t seg = gro_size ? gro_size : len;
    if (seg == 0) seg = len;
    for (size_t off = 0; off < len || off == 0; off += seg) {
      p.data = std::span<const uint8_t>(base + off, std::min(seg, len - off));
      // Segment i of a GRO buffer left its sender as segment i of one UDP_SEGMENT send,
      // which the kernel numbered with IP ID i (see gso_group_end).
      if (!p.ip.ipv6) p.ip.ip_id = static_cast<uint16_t>(off / seg);
      if (options_.pcap) options_.pcap->write_packet(p.ip, p.tos, p.data);
      batch.packets_.push_back(p);
      if (len == 0) break;
    }
  }
  bump(q.rx_packets, batch.packets_.size());
  if (q.faults) {
    size_t before = batch.packets_.size();
    q.faults->apply(batch.packets_);
    bump(q.rx_fault_dropped, before - batch.packets_.size());
  }
  return batch.packets_.size();
}

UdpPortStats UdpPort::stats() const {
  UdpPortStats s = tx_stats_;
  for (const RxQueue& q : rxq_) {
    s.rx_packets += q.rx_packets.load(std::memory_order_relaxed);
    s.rx_truncated += q.rx_truncated.load(std::memory_order_relaxed);
    s.rx_fault_dropped += q.rx_fault_dropped.load(std::memory_order_relaxed);
  }
  return s;
}

}  // namespace vrnic::transport
