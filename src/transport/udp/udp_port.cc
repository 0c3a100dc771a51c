// UdpPort: socket setup, the source-port pool, batched send (sendmmsg) and receive (recvmmsg).
#include "transport/udp/udp_port.h"

#include <fcntl.h>
#include <netinet/ip.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "transport/udp/fault_injector.h"
#include "transport/udp/log.h"
#include "transport/udp/pcap_writer.h"

namespace vrnic::transport {
namespace {

constexpr size_t kCmsgBytes = 128;  // room for PKTINFO + TOS/TCLASS
constexpr uint16_t kIpFlagDf = 0x4000;

uint32_t mix32(uint32_t x) {  // a 32-bit finaliser: every QPN bit moves every port bit
  x ^= x >> 16;
  x *= 0x7feb352d;
  x ^= x >> 15;
  x *= 0x846ca68b;
  x ^= x >> 16;
  return x;
}

int set_int(int fd, int level, int name, int value) {
  return setsockopt(fd, level, name, &value, sizeof value);
}

int get_int(int fd, int level, int name) {
  int v = 0;
  socklen_t len = sizeof v;
  getsockopt(fd, level, name, &v, &len);
  return v;
}

// Asks for `bytes` of socket buffer: the privileged *FORCE variant first (works as root),
// then the ordinary one, which the kernel caps at net.core.{r,w}mem_max.
void grow_buffer(int fd, int force_name, int name, int bytes) {
  if (set_int(fd, SOL_SOCKET, force_name, bytes) != 0) set_int(fd, SOL_SOCKET, name, bytes);
}

}  // namespace

uint16_t preferred_source_port(uint32_t qpn) {
  return static_cast<uint16_t>(0xC000 | (mix32(qpn & 0xFFFFFF) & 0x3FFF));
}

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
  }
}

RecvBatch::~RecvBatch() = default;

// ---- UdpPort: setup -----------------------------------------------------------------------

int UdpPort::open_socket(uint16_t port, int& err) {
  const bool v6 = options_.address.ipv6;
  int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    err = errno;
    return -1;
  }
  // No SO_REUSEADDR: the exclusive bind of (address, 4791) is what keeps two processes from
  // taking one device address.
  if (v6) {
    set_int(fd, IPPROTO_IPV6, IPV6_V6ONLY, 1);
    // DF: never fragment; RoCE packets must arrive whole (IBA A17.4: no IP fragmentation).
    set_int(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, IPV6_PMTUDISC_DO);
  } else {
    // DF set. Linux then sends unconnected UDP with IP ID 0, the value the ICRC was built on.
    set_int(fd, IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO);
  }
  sockaddr_storage sa;
  socklen_t len = options_.address.to_sockaddr(port, sa);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), len) != 0) {
    err = errno;
    close(fd);
    return -1;
  }
  err = 0;
  return fd;
}

std::unique_ptr<UdpPort> UdpPort::open(const UdpPortOptions& options, int& err) {
  std::unique_ptr<UdpPort> p(new UdpPort(options));
  int fd = p->open_socket(options.port, err);
  if (fd < 0) return nullptr;
  p->rx_fd_ = fd;
  if (options.port == 0) {  // an ephemeral port (tests): learn which one the kernel gave
    sockaddr_storage sa;
    socklen_t len = sizeof sa;
    getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
    IpAddress ignored;
    IpAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&sa), ignored, &p->options_.port);
  }
  if (options.address.ipv6) {
    set_int(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, 1);
    set_int(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, 1);
  } else {
    set_int(fd, IPPROTO_IP, IP_PKTINFO, 1);
    set_int(fd, IPPROTO_IP, IP_RECVTOS, 1);
  }
  grow_buffer(fd, SO_RCVBUFFORCE, SO_RCVBUF, options.buffer_bytes);
  grow_buffer(fd, SO_SNDBUFFORCE, SO_SNDBUF, options.buffer_bytes);
  p->granted_rcvbuf_ = get_int(fd, SOL_SOCKET, SO_RCVBUF);
  debug_log("udp %s:%u: SO_RCVBUF asked %d granted %d, SO_SNDBUF granted %d",
            options.address.to_string().c_str(), p->options_.port, options.buffer_bytes,
            p->granted_rcvbuf_, get_int(fd, SOL_SOCKET, SO_SNDBUF));
  p->pool_.resize(options.source_ports == 0 ? 1 : options.source_ports);
  return p;
}

UdpPort::~UdpPort() {
  for (auto& s : pool_)
    if (s.fd >= 0) close(s.fd);
  for (auto& s : extra_)
    if (s.fd >= 0) close(s.fd);
  if (rx_fd_ >= 0) close(rx_fd_);
}

// ---- source ports -------------------------------------------------------------------------

uint16_t UdpPort::source_port_for(uint32_t qpn) {
  const uint16_t preferred = preferred_source_port(qpn);
  SendSocket& s = pool_[mix32(qpn & 0xFFFFFF) % pool_.size()];
  if (s.fd >= 0) return s.port;
  // Walk 0xC000..0xFFFF from the preferred port until a bind succeeds (another program on
  // this address may hold a port).
  for (uint32_t i = 0; i < 0x4000; ++i) {
    uint16_t port = static_cast<uint16_t>(0xC000 | ((preferred + i) & 0x3FFF));
    bool in_use = port == options_.port;
    for (const auto& o : pool_) in_use |= o.fd >= 0 && o.port == port;
    if (in_use) continue;
    int err = 0;
    int fd = open_socket(port, err);
    if (fd >= 0) {
      grow_buffer(fd, SO_SNDBUFFORCE, SO_SNDBUF, options_.buffer_bytes);
      s.fd = fd;
      s.port = port;
      return port;
    }
    if (err != EADDRINUSE) break;
  }
  // No port to be had: send from the receive socket, whose port the engine then uses.
  debug_log("udp: no free source port for qpn %u, using %u", qpn, options_.port);
  return options_.port;
}

int UdpPort::send_fd_for(uint16_t src_port) {
  if (src_port == options_.port) return rx_fd_;
  for (const auto& s : pool_)
    if (s.fd >= 0 && s.port == src_port) return s.fd;
  for (const auto& s : extra_)
    if (s.port == src_port) return s.fd;
  // A port the engine chose itself: bind one for it (or remember that it cannot be had).
  int err = 0;
  SendSocket s{src_port, open_socket(src_port, err)};
  extra_.push_back(s);
  return s.fd;
}

// ---- send ---------------------------------------------------------------------------------

void UdpPort::send(std::span<const engine::WirePacket> batch) {
  size_t i = 0;
  while (i < batch.size()) {
    // A run of packets leaving from the same source port goes out in one sendmmsg.
    size_t j = i + 1;
    while (j < batch.size() && j - i < RecvBatch::kMaxBatch &&
           batch[j].ip.src_port == batch[i].ip.src_port)
      ++j;
    int fd = send_fd_for(batch[i].ip.src_port);
    if (fd < 0) {
      stats_.tx_dropped += j - i;
    } else {
      send_run(fd, batch.subspan(i, j - i));
    }
    i = j;
  }
}

void UdpPort::send_run(int fd, std::span<const engine::WirePacket> run) {
  const size_t n = run.size();
  sockaddr_storage names[RecvBatch::kMaxBatch];
  iovec iov[RecvBatch::kMaxBatch];
  mmsghdr msgs[RecvBatch::kMaxBatch];
  alignas(cmsghdr) uint8_t control[RecvBatch::kMaxBatch][CMSG_SPACE(sizeof(int))];
  std::memset(msgs, 0, sizeof(mmsghdr) * n);
  size_t m = 0;
  for (size_t k = 0; k < n; ++k) {
    const engine::WirePacket& p = run[k];
    if (p.ip.ipv6 != options_.address.ipv6) {  // no route between address families
      ++stats_.tx_dropped;
      continue;
    }
    IpAddress dst;
    dst.ipv6 = p.ip.ipv6;
    dst.bytes = p.ip.dst;
    msghdr& h = msgs[m].msg_hdr;
    h.msg_namelen = dst.to_sockaddr(p.ip.dst_port, names[m]);
    h.msg_name = &names[m];
    iov[m].iov_base = const_cast<uint8_t*>(p.data.data());
    iov[m].iov_len = p.data.size();
    h.msg_iov = &iov[m];
    h.msg_iovlen = 1;
    if (p.tos != 0) {  // DSCP/ECN per packet (ECT marks for congestion control)
      h.msg_control = control[m];
      h.msg_controllen = CMSG_SPACE(sizeof(int));
      cmsghdr* c = CMSG_FIRSTHDR(&h);
      c->cmsg_level = p.ip.ipv6 ? IPPROTO_IPV6 : IPPROTO_IP;
      c->cmsg_type = p.ip.ipv6 ? IPV6_TCLASS : IP_TOS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      int tos = p.tos;
      std::memcpy(CMSG_DATA(c), &tos, sizeof tos);
    }
    if (options_.pcap) options_.pcap->write_packet(p.ip, p.tos, p.data);
    ++m;
  }
  size_t done = 0;
  int retries = 0;
  while (done < m) {
    int r = sendmmsg(fd, msgs + done, static_cast<unsigned>(m - done), MSG_DONTWAIT);
    if (r > 0) {
      done += static_cast<size_t>(r);
      stats_.tx_packets += static_cast<uint64_t>(r);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == ENOBUFS) && retries++ < 3) {
      // Send buffer full: wait briefly (bounded) rather than drop and force a Go-Back-N.
      pollfd pfd{fd, POLLOUT, 0};
      poll(&pfd, 1, 1);
      continue;
    }
    // This message cannot go (EMSGSIZE, unreachable...): drop it, as a wire would.
    debug_log("udp: send failed: %s", std::strerror(errno));
    ++stats_.tx_dropped;
    ++done;
  }
}

// ---- receive ------------------------------------------------------------------------------

size_t UdpPort::receive(RecvBatch& batch) {
  RecvBatch::Slots& s = *batch.slots_;
  const size_t n = batch.capacity_;
  // recvmmsg overwrites only these: reset them, the buffers stay wired from the constructor.
  for (size_t k = 0; k < n; ++k) {
    msghdr& h = s.msgs[k].msg_hdr;
    h.msg_namelen = sizeof(sockaddr_storage);
    h.msg_controllen = kCmsgBytes;
    h.msg_flags = 0;
  }
  batch.packets_.clear();
  batch.datagrams_ = 0;
  int r;
  do {
    r = recvmmsg(rx_fd_, s.msgs.data(), static_cast<unsigned>(n), MSG_DONTWAIT, nullptr);
  } while (r < 0 && errno == EINTR);
  if (r <= 0) return 0;
  batch.datagrams_ = static_cast<size_t>(r);

  for (int k = 0; k < r; ++k) {
    msghdr& h = s.msgs[k].msg_hdr;
    if (h.msg_flags & MSG_TRUNC) {  // longer than any packet vrnic sends or accepts
      ++stats_.rx_truncated;
      continue;
    }
    engine::WirePacket p;
    IpAddress src;
    uint16_t src_port = 0;
    if (!IpAddress::from_sockaddr(reinterpret_cast<sockaddr*>(h.msg_name), src, &src_port))
      continue;
    p.ip.ipv6 = src.ipv6;
    p.ip.src = src.bytes;
    p.ip.src_port = src_port;
    p.ip.dst_port = options_.port;
    p.ip.dst = options_.address.bytes;  // unless PKTINFO says otherwise
    // The socket does not reveal the IPv4 ID; assume what a Linux sender with DF uses.
    // wire::verify_icrc recovers any other ID (see its comment).
    p.ip.ip_id = 0;
    p.ip.ip_flags_frag = kIpFlagDf;
    for (cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c)) {
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
      }
    }
    p.data = std::span<const uint8_t>(&s.data[k * RecvBatch::kSlotBytes], s.msgs[k].msg_len);
    if (options_.pcap) options_.pcap->write_packet(p.ip, p.tos, p.data);
    batch.packets_.push_back(p);
  }
  stats_.rx_packets += batch.packets_.size();
  if (options_.faults) {
    size_t before = batch.packets_.size();
    options_.faults->apply(batch.packets_);
    if (batch.packets_.size() < before) stats_.rx_fault_dropped += before - batch.packets_.size();
  }
  return batch.packets_.size();
}

}  // namespace vrnic::transport
