// UdpPort: socket setup, the source-port pool, batched send (sendmmsg) and receive (recvmmsg).
#include "transport/udp/udp_port.h"

#include <fcntl.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>

#include "transport/udp/fault_injector.h"
#include "transport/udp/kernel_socket.h"
#include "transport/udp/pcap_writer.h"
#include "wire/headers.h"
#include "wire/icrc.h"

namespace vrnic::transport {
namespace {

// TOS/TCLASS + UDP_SEGMENT.
constexpr size_t kSendCmsgBytes = CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(uint16_t));

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

// ---- UdpPort: setup -----------------------------------------------------------------------

UdpPort::UdpPort(const UdpPortOptions& options) : options_(options) {}

int UdpPort::open_socket(uint16_t port, int& err, bool reuse_port) {
  const bool v6 = options_.address.ipv6;
  int fd = kernel_socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    err = errno;
    return -1;
  }
  // No SO_REUSEADDR: the exclusive bind of (address, 4791) is what keeps two processes from
  // taking one device address (a port with several queues shares it among its own sockets
  // and holds an address lock instead, see open_queues).
  if (reuse_port) set_int(fd, SOL_SOCKET, SO_REUSEPORT, 1);
  if (v6) {
    set_int(fd, IPPROTO_IPV6, IPV6_V6ONLY, 1);
    // DF: never fragment; RoCE packets must arrive whole (IBA A17.4: no IP fragmentation).
    set_int(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, IPV6_PMTUDISC_DO);
  } else {
    // DF set. Linux then sends unconnected UDP with IP ID 0, the value the ICRC was built on.
    set_int(fd, IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO);
    // Multicast (UD groups) leaves on the device's interface, not along the default route.
    in_addr ifa;
    std::memcpy(&ifa, options_.address.bytes.data(), 4);
    setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &ifa, sizeof ifa);
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

// What every receive socket asks for: the fields the ICRC covers and the received TOS, GRO.
void UdpPort::set_receive_options(int fd) {
  // The destination address is covered by the ICRC. A socket bound to one unicast address
  // receives only datagrams sent to it (multicast has sockets of its own), so PKTINFO is
  // asked for only on a wildcard bind: on every receive it is a control message the kernel
  // builds and the port parses, on the latency path of each packet.
  const IpAddress& a = options_.address;
  const bool wildcard = std::all_of(a.bytes.begin(), a.bytes.begin() + (a.ipv6 ? 16 : 4),
                                    [](uint8_t b) { return b == 0; });
  if (a.ipv6) {
    if (wildcard) set_int(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, 1);
    set_int(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, 1);
  } else {
    if (wildcard) set_int(fd, IPPROTO_IP, IP_PKTINFO, 1);
    set_int(fd, IPPROTO_IP, IP_RECVTOS, 1);
  }
  // UDP_GRO: a sender's segmentation-offload group arrives as one buffer (one skb, one copy)
  // and is cut back into its datagrams here; without it the kernel segments on receive.
  gro_ = options_.offload && set_int(fd, SOL_UDP, UDP_GRO, 1) == 0;
  grow_buffer(fd, SO_RCVBUFFORCE, SO_RCVBUF, options_.buffer_bytes);
  grow_buffer(fd, SO_SNDBUFFORCE, SO_SNDBUF, options_.buffer_bytes);
}

// Binds the receive queues' sockets; 0 or an errno value (EADDRINUSE: the address is taken).
// Several queues share (address, port) with SO_REUSEPORT, which any socket of the same user
// could join as well: the device's claim on the address is then an abstract Unix socket
// named after it (per network namespace, like the address; gone when the process is), taken
// before the first bind, so a second device never slips into the group.
int UdpPort::open_queues(int& err) {
  const size_t n = std::clamp<size_t>(options_.rx_queues, 1, UdpPortOptions::kMaxRxQueues);
  if (n > 1) {
    if (options_.port == 0) return err = EINVAL;  // an ephemeral port cannot be shared
    lock_fd_ = kernel_socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un un{};
    un.sun_family = AF_UNIX;
    const std::string name =
        "vrnic.udp." + options_.address.to_string() + "." + std::to_string(options_.port);
    const size_t used = std::min(name.size(), sizeof un.sun_path - 1);  // after the NUL
    std::memcpy(un.sun_path + 1, name.data(), used);
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + used);
    // (EADDRINUSE when another device holds the name.)
    if (lock_fd_ < 0 || bind(lock_fd_, reinterpret_cast<sockaddr*>(&un), len) != 0)
      return err = errno;
  }
  rxq_ = std::vector<RxQueue>(n);
  for (size_t i = 0; i < n; ++i) {
    rxq_[i].fd = open_socket(options_.port, err, n > 1);
    if (rxq_[i].fd < 0) return err;
    set_receive_options(rxq_[i].fd);
    if (i == 0) {
      rxq_[0].faults = options_.faults;
    } else if (options_.faults) {  // the same faults, each queue its own seeded stream
      FaultConfig fc = options_.faults->config();
      fc.seed += i;
      rxq_[i].own_faults = std::make_unique<FaultInjector>(fc);
      rxq_[i].faults = rxq_[i].own_faults.get();
    }
  }
  return err = 0;
}

std::unique_ptr<UdpPort> UdpPort::open(const UdpPortOptions& options, int& err) {
  std::unique_ptr<UdpPort> p(new UdpPort(options));
  if (p->open_queues(err) != 0) return nullptr;
  const int fd = p->rxq_[0].fd;
  if (options.port == 0) {  // an ephemeral port (tests): learn which one the kernel gave
    sockaddr_storage sa;
    socklen_t len = sizeof sa;
    getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
    IpAddress ignored;
    IpAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&sa), ignored, &p->options_.port);
  }
  p->rx_sender_ = {p->options_.port, fd};  // the receive socket, for sends from its port
  p->gso_ = options.offload;
  p->granted_rcvbuf_ = get_int(fd, SOL_SOCKET, SO_RCVBUF);
  p->debug("udp %s:%u: %zu receive queue(s), SO_RCVBUF asked %d granted %d, SO_SNDBUF "
            "granted %d", options.address.to_string().c_str(), p->options_.port,
            p->rxq_.size(), options.buffer_bytes, p->granted_rcvbuf_,
            get_int(fd, SOL_SOCKET, SO_SNDBUF));
  p->pool_.resize(options.source_ports == 0 ? 1 : options.source_ports);
  p->epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (p->epoll_fd_ >= 0) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (epoll_ctl(p->epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      close(p->epoll_fd_);
      p->epoll_fd_ = -1;
    }
  }
  return p;
}

bool UdpPort::set_multicast(const std::array<uint8_t, 16>& group, bool ipv6, bool join) {
  if (ipv6 || options_.address.ipv6 || epoll_fd_ < 0) return false;
  auto it = std::find_if(groups_.begin(), groups_.end(),
                         [&](const GroupSocket& g) { return g.group == group; });
  if (!join) {
    if (it == groups_.end()) return false;
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->fd, nullptr);
    close(it->fd);  // closing leaves the group
    groups_.erase(it);
    rx_turn_ = 0;
    return true;
  }
  if (it != groups_.end()) return true;
  int fd = kernel_socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  // Every device on the host that joined binds (group, port): SO_REUSEADDR lets them share
  // it, and each gets a copy of every datagram sent to the group.
  set_int(fd, SOL_SOCKET, SO_REUSEADDR, 1);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(options_.port);
  std::memcpy(&sa.sin_addr, group.data(), 4);
  ip_mreq mreq{};
  std::memcpy(&mreq.imr_multiaddr, group.data(), 4);
  std::memcpy(&mreq.imr_interface, options_.address.bytes.data(), 4);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
      setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mreq, sizeof mreq) != 0 ||
      epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    debug("udp: cannot join multicast group %u.%u.%u.%u: %s", group[0], group[1], group[2],
              group[3], std::strerror(errno));
    close(fd);
    return false;
  }
  set_int(fd, IPPROTO_IP, IP_PKTINFO, 1);  // the group address is the packet's destination
  set_int(fd, IPPROTO_IP, IP_RECVTOS, 1);
  grow_buffer(fd, SO_RCVBUFFORCE, SO_RCVBUF, options_.buffer_bytes);
  groups_.push_back({group, fd});
  return true;
}

UdpPort::~UdpPort() {
  for (auto& s : pool_)
    if (s.fd >= 0) close(s.fd);
  for (auto& s : extra_)
    if (s.fd >= 0) close(s.fd);
  for (auto& g : groups_) close(g.fd);
  if (epoll_fd_ >= 0) close(epoll_fd_);
  for (auto& q : rxq_)
    if (q.fd >= 0) close(q.fd);
  if (lock_fd_ >= 0) close(lock_fd_);
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
  debug("udp: no free source port for qpn %u, using %u", qpn, options_.port);
  return options_.port;
}

UdpPort::SendSocket* UdpPort::sender_for(uint16_t src_port) {
  if (src_port == options_.port) return &rx_sender_;
  for (auto& s : pool_)
    if (s.fd >= 0 && s.port == src_port) return &s;
  for (auto& s : extra_)
    if (s.port == src_port) return s.fd >= 0 ? &s : nullptr;
  // A port the engine chose itself: bind one for it (or remember that it cannot be had).
  int err = 0;
  extra_.push_back({src_port, open_socket(src_port, err)});
  return extra_.back().fd >= 0 ? &extra_.back() : nullptr;
}

// A socket's first send sets its IP_TOS (IPV6_TCLASS) to the first packet's: a QP's packets
// and ACKs share their traffic class and ECN marking and leave from one source port (QPs
// whose numbers hash to the same socket of the pool share it), so they then leave with no
// IP_TOS control message, which the kernel parses on every send (0.06 us of a polled
// ping-pong's half round trip: docs/live.md, "Where a polled ping-pong's half round trip
// goes"). A packet with another TOS still carries its own. Linux keeps the ECN bits given to
// a datagram socket.
void UdpPort::take_tos(SendSocket& s, std::span<const engine::WirePacket> run) {
  const bool v6 = options_.address.ipv6;
  const int tos = run.empty() ? 0 : run[0].tos;
  s.tos = tos == 0 || set_int(s.fd, v6 ? IPPROTO_IPV6 : IPPROTO_IP, v6 ? IPV6_TCLASS : IP_TOS,
                              tos) == 0
              ? tos
              : 0;
}

// ---- send ---------------------------------------------------------------------------------

void UdpPort::debug(const char* fmt, ...) const {
  if (options_.debug_log == nullptr) return;
  char line[400];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  options_.debug_log("%s", line);
}

// The batch with each source port's packets together, in their order: packets of one QP
// share a source port, so no QP's packets are reordered, and each socket gets one sendmmsg
// however the QPs' packets interleave (with 256 QPs over the pool's 16 ports, a batch of
// ACKs or requests otherwise went out about one sendmmsg per packet).
std::span<const engine::WirePacket> UdpPort::grouped_by_port(
    std::span<const engine::WirePacket> batch) {
  ports_seen_.clear();
  bool grouped = true;
  for (size_t k = 0; k < batch.size(); ++k) {
    const uint16_t port = batch[k].ip.src_port;
    if (k > 0 && port == batch[k - 1].ip.src_port) continue;
    if (std::find(ports_seen_.begin(), ports_seen_.end(), port) != ports_seen_.end())
      grouped = false;
    else
      ports_seen_.push_back(port);
  }
  if (grouped) return batch;
  by_port_.clear();
  for (uint16_t port : ports_seen_)
    for (const engine::WirePacket& p : batch)
      if (p.ip.src_port == port) by_port_.push_back(p);
  return by_port_;
}

void UdpPort::send(std::span<const engine::WirePacket> batch) {
  batch = grouped_by_port(batch);
  size_t i = 0;
  while (i < batch.size()) {
    // A run of packets leaving from the same source port goes out in one sendmmsg.
    size_t j = i + 1;
    while (j < batch.size() && j - i < RecvBatch::kMaxBatch &&
           batch[j].ip.src_port == batch[i].ip.src_port)
      ++j;
    SendSocket* s = sender_for(batch[i].ip.src_port);
    if (s == nullptr) {
      tx_stats_.tx_dropped += j - i;
    } else {
      if (s->tos < 0) take_tos(*s, batch.subspan(i, j - i));
      send_run(*s, batch.subspan(i, j - i));
    }
    i = j;
  }
}

// Packets k..end-1 of a run can leave as one UDP_SEGMENT (GSO) message: same destination
// and TOS, every one of the first size except the last (which may be shorter), at most
// kMaxGsoSegments and one IP datagram's worth of payload. Returns end.
size_t UdpPort::gso_group_end(std::span<const engine::WirePacket> run, size_t k) const {
  const engine::WirePacket& first = run[k];
  const size_t seg = first.data.size();
  size_t total = seg, end = k + 1;
  if (!gso_ || seg == 0) return end;
  // IPv4 segments of a group get IP IDs 0, 1, 2, ... from the kernel (an unconnected DF
  // socket starts at 0): send_run gives segment i the ICRC for ID i, so every datagram on
  // the wire carries a correct ICRC.
  while (end < run.size() && end - k < kMaxGsoSegments) {
    const engine::WirePacket& p = run[end];
    if (p.data.size() > seg || p.tos != first.tos || p.ip.dst != first.ip.dst ||
        p.ip.dst_port != first.ip.dst_port || p.ip.ipv6 != first.ip.ipv6)
      break;
    if (total + p.data.size() > kMaxGsoBytes) break;
    total += p.data.size();
    ++end;
    if (p.data.size() < seg) break;  // a shorter segment can only be the last
  }
  return end;
}

void UdpPort::send_run(SendSocket& s, std::span<const engine::WirePacket> run) {
  const int fd = s.fd;
  const size_t n = run.size();
  sockaddr_storage names[RecvBatch::kMaxBatch];
  // Two iovecs per packet at most: an IPv4 GSO segment after the first sends its body and
  // then its ICRC recomputed for the IP ID the kernel gives it.
  iovec iov[2 * RecvBatch::kMaxBatch];
  uint8_t icrc_for_id[RecvBatch::kMaxBatch][wire::kIcrcSize];
  mmsghdr msgs[RecvBatch::kMaxBatch];
  size_t pkts_in[RecvBatch::kMaxBatch];  // packets carried by each message
  alignas(cmsghdr) uint8_t control[RecvBatch::kMaxBatch][kSendCmsgBytes];
  std::memset(msgs, 0, sizeof(mmsghdr) * n);
  size_t m = 0, used_iov = 0;
  for (size_t k = 0; k < n;) {
    const engine::WirePacket& p = run[k];
    if (p.ip.ipv6 != options_.address.ipv6) {  // no route between address families
      ++tx_stats_.tx_dropped;
      ++k;
      continue;
    }
    const size_t end = gso_group_end(run, k);
    IpAddress dst;
    dst.ipv6 = p.ip.ipv6;
    dst.bytes = p.ip.dst;
    msghdr& h = msgs[m].msg_hdr;
    h.msg_namelen = dst.to_sockaddr(p.ip.dst_port, names[m]);
    h.msg_name = &names[m];
    h.msg_iov = &iov[used_iov];
    const size_t first_iov = used_iov;
    for (size_t q = k; q < end; ++q) {
      const engine::WirePacket& seg = run[q];
      const auto id = static_cast<uint16_t>(q - k);  // the kernel's IP ID for this segment
      if (p.ip.ipv6 || id == 0 || seg.data.size() < wire::kIcrcSize) {
        iov[used_iov++] = {const_cast<uint8_t*>(seg.data.data()), seg.data.size()};
        if (options_.pcap) options_.pcap->write_packet(seg.ip, seg.tos, seg.data);
        continue;
      }
      const size_t body = seg.data.size() - wire::kIcrcSize;
      wire::store_icrc(wire::icrc_with_ip_id_change(wire::stored_icrc(seg.data), body, id),
                       icrc_for_id[q]);
      iov[used_iov++] = {const_cast<uint8_t*>(seg.data.data()), body};
      iov[used_iov++] = {icrc_for_id[q], wire::kIcrcSize};
      if (options_.pcap) {
        std::vector<uint8_t> as_sent(seg.data.begin(), seg.data.end());
        std::memcpy(as_sent.data() + body, icrc_for_id[q], wire::kIcrcSize);
        engine::WirePacket shown = seg;
        shown.ip.ip_id = id;
        options_.pcap->write_packet(shown.ip, shown.tos, as_sent);
      }
    }
    h.msg_iovlen = used_iov - first_iov;
    size_t clen = 0;
    h.msg_control = control[m];
    h.msg_controllen = kSendCmsgBytes;
    cmsghdr* c = CMSG_FIRSTHDR(&h);
    if (p.tos != s.tos) {  // DSCP/ECN other than the socket's (ECT marks, traffic class)
      c->cmsg_level = p.ip.ipv6 ? IPPROTO_IPV6 : IPPROTO_IP;
      c->cmsg_type = p.ip.ipv6 ? IPV6_TCLASS : IP_TOS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      int tos = p.tos;
      std::memcpy(CMSG_DATA(c), &tos, sizeof tos);
      clen += CMSG_SPACE(sizeof(int));
      c = CMSG_NXTHDR(&h, c);
    }
    if (end - k > 1) {
      // One send, one socket buffer and one trip through the stack for the whole group;
      // the kernel cuts it into datagrams of gso_size bytes (the last may be shorter), so
      // the receiver sees exactly the packets the engine built.
      c->cmsg_level = SOL_UDP;
      c->cmsg_type = UDP_SEGMENT;
      c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
      uint16_t gso = static_cast<uint16_t>(p.data.size());
      std::memcpy(CMSG_DATA(c), &gso, sizeof gso);
      clen += CMSG_SPACE(sizeof(uint16_t));
    }
    h.msg_controllen = clen;
    if (clen == 0) h.msg_control = nullptr;
    pkts_in[m] = end - k;
    ++m;
    k = end;
  }
  size_t done = 0;
  int retries = 0;
  const ErrnoKept keep_errno;
  while (done < m) {
    int r = kernel_sendmmsg(fd, msgs + done, static_cast<unsigned>(m - done), MSG_DONTWAIT);
    if (r > 0) {
      ++tx_stats_.tx_calls;
      for (int q = 0; q < r; ++q) tx_stats_.tx_packets += pkts_in[done + q];
      done += static_cast<size_t>(r);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == ENOBUFS) && retries++ < 3) {
      // Send buffer full: wait briefly (bounded) rather than drop and force a Go-Back-N.
      pollfd pfd{fd, POLLOUT, 0};
      poll(&pfd, 1, 1);
      continue;
    }
    if (r < 0 && pkts_in[done] > 1 && (errno == EIO || errno == EINVAL || errno == EOPNOTSUPP)) {
      // The kernel or the route refuses segmentation offload: send the rest one by one.
      debug("udp: UDP_SEGMENT refused (%s), sending without it", std::strerror(errno));
      gso_ = false;
      std::span<const engine::WirePacket> rest = run;
      size_t skip = 0;
      for (size_t q = 0; q < done; ++q) skip += pkts_in[q];
      send_run(s, rest.subspan(skip));
      return;
    }
    // This message cannot go (EMSGSIZE, unreachable...): drop it, as a wire would.
    debug("udp: send failed: %s", std::strerror(errno));
    tx_stats_.tx_dropped += pkts_in[done];
    ++done;
  }
}

}  // namespace vrnic::transport
