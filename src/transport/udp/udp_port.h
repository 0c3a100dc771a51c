// UdpPort: the live PacketPort — RoCEv2 over kernel UDP sockets (port 4791, IPv4 or IPv6).
// Single-threaded (_st): the caller serialises send / receive / source_port_for (the live
// runtime calls them with the device lock held); fd() may be read from any thread.
#pragma once
#include <sys/socket.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/ports.h"
#include "transport/udp/ip_address.h"

namespace vrnic::transport {

class PcapWriter;
class FaultInjector;

struct UdpPortOptions {
  IpAddress address;                    // the device address; every socket binds to it
  uint16_t port = 4791;                 // RoCEv2 destination port (IANA); 0 = ephemeral
  int buffer_bytes = 8 << 20;           // SO_RCVBUF / SO_SNDBUF asked for
  size_t source_ports = 16;             // size of the pool of send sockets (flow entropy)
  PcapWriter* pcap = nullptr;           // tap: every frame sent and received
  FaultInjector* faults = nullptr;      // applied to received packets (tests, experiments)
  bool offload = true;                  // UDP_SEGMENT on send, UDP_GRO on receive
  // Receive sockets (queues) on (address, port). More than one share it with SO_REUSEPORT:
  // the kernel hashes each flow (source address and port) to one of them, so a flow's
  // datagrams stay in order on its queue, and different queues can be read by different
  // threads. Needs a fixed port.
  size_t rx_queues = 1;
  static constexpr size_t kMaxRxQueues = 64;
  // Diagnostics (printf-style), e.g. a multicast join refused; null: none.
  void (*debug_log)(const char* fmt, ...) = nullptr;
};

struct UdpPortStats {
  uint64_t tx_packets = 0, tx_dropped = 0, rx_packets = 0, rx_truncated = 0,
           rx_fault_dropped = 0,
           tx_calls = 0;  // sendmmsg calls that sent something
};

// Storage for one received batch: buffers, message headers and the WirePackets that point
// into them. Owned by the receiving thread; reused from call to call.
class RecvBatch {
 public:
  static constexpr size_t kMaxBatch = 64;
  // A UDP_GRO buffer: up to 64 KiB of datagrams of one segmentation-offload group.
  static constexpr size_t kSlotBytes = 65536;

  explicit RecvBatch(size_t capacity = kMaxBatch);
  ~RecvBatch();
  RecvBatch(const RecvBatch&) = delete;
  RecvBatch& operator=(const RecvBatch&) = delete;

  static constexpr size_t kCmsgBytes = 128;  // room for PKTINFO + TOS/TCLASS + UDP_GRO

  std::span<const engine::WirePacket> packets() const { return packets_; }
  size_t capacity() const { return capacity_; }
  // Datagrams the last receive took from the socket (before drops and injected faults).
  size_t datagrams() const { return datagrams_; }
  // The last receive took as many datagrams as it asked for: the socket may hold more.
  bool full() const { return datagrams_ > 0 && datagrams_ == asked_; }

 private:
  friend class UdpPort;
  struct Slots;
  size_t capacity_;
  size_t datagrams_ = 0;
  size_t asked_ = 0;   // datagrams the last receive asked for (UdpPort's choice)
  size_t filled_ = 0;  // messages the last recvmmsg wrote into (their headers need a reset)
  std::unique_ptr<Slots> slots_;
  std::vector<engine::WirePacket> packets_;
};

class UdpPort final : public engine::PacketPort {
 public:
  // Binds the receive socket to (address, port). Returns null and sets err (errno value;
  // EADDRINUSE when another device holds the address) on failure.
  static std::unique_ptr<UdpPort> open(const UdpPortOptions& options, int& err);
  ~UdpPort() override;

  // Readable when a packet waits on the first receive queue or on a multicast group's
  // socket (an epoll set of them).
  int fd() const { return epoll_fd_ >= 0 ? epoll_fd_ : rxq_[0].fd; }
  // The socket of receive queue i (0 .. rx_queues() - 1).
  int queue_fd(size_t i) const { return rxq_[i].fd; }
  size_t rx_queues() const { return rxq_.size(); }
  const IpAddress& address() const { return options_.address; }
  uint16_t port() const { return options_.port; }
  int granted_rcvbuf() const { return granted_rcvbuf_; }
  // Sent counts, and received ones summed over the queues (each read whole, not as one
  // snapshot while other threads receive).
  UdpPortStats stats() const;
  // tx_packets + rx_packets of stats(), read on every verb (the live layer's mark of whether
  // a call moved packets): no copy of the whole record.
  uint64_t packets_moved() const {
    uint64_t n = tx_stats_.tx_packets;
    for (const RxQueue& q : rxq_) n += q.rx_packets.load(std::memory_order_relaxed);
    return n;
  }

  void send(std::span<const engine::WirePacket> batch) override;
  // 0xC000 | 14 bits chosen by a hash of the QPN, then the pool socket actually bound for
  // that hash bucket (the next free port if the preferred one was taken).
  uint16_t source_port_for(uint32_t qpn) override;
  // IPv4 multicast: a socket bound to (group, port) that joined the group on the device's
  // interface; receive() reads it too. IPv6 groups are not joined (returns false).
  bool set_multicast(const std::array<uint8_t, 16>& group, bool ipv6, bool join) override;

  // Receives, without blocking, the packets waiting on the first queue and the multicast
  // groups, up to batch.capacity() datagrams (one after a lone datagram on a quiet socket);
  // batch.packets() then holds them. Returns their number (0 if none); batch.full() says
  // whether more may wait.
  size_t receive(RecvBatch& batch);
  // The same on receive queue `queue` (0: as above). Calls on different queues may run at
  // once on different threads, beside the single-threaded calls above; one queue is read
  // by one thread at a time.
  size_t receive(RecvBatch& batch, size_t queue);

 private:
  struct SendSocket {
    uint16_t port = 0;
    int fd = -1;
    // The socket's own IP_TOS / IPV6_TCLASS, set to the first packet's at its first send
    // (-1: not yet): packets with it carry no control message for it (send_run).
    int tos = -1;
  };

  // One receive socket and what receiving on it keeps: written only by the thread reading
  // it, the counters read by any.
  struct RxQueue {
    int fd = -1;
    size_t ask = RecvBatch::kMaxBatch;  // datagrams the next receive asks for (1 or a batch)
    bool prev_got = false;              // the last receive found datagrams
    FaultInjector* faults = nullptr;    // the options' for queue 0, an own one for the others
    std::unique_ptr<FaultInjector> own_faults;
    std::atomic<uint64_t> rx_packets{0}, rx_truncated{0}, rx_fault_dropped{0};
  };

  explicit UdpPort(const UdpPortOptions& options);  // in the .cc: RxQueue is complete there
  // Bound to (address, port), sharing it if reuse_port; -1 on failure.
  int open_socket(uint16_t port, int& err, bool reuse_port = false);
  void set_receive_options(int fd);
  int open_queues(int& err);
  int recv_datagrams(RecvBatch& batch, size_t queue);
  bool read_header(const msghdr& h, engine::WirePacket& p, size_t& gro_size) const;
  SendSocket* sender_for(uint16_t src_port);  // null: no socket for the port
  void take_tos(SendSocket& s, std::span<const engine::WirePacket> run);
  void send_run(SendSocket& s, std::span<const engine::WirePacket> run);
  std::span<const engine::WirePacket> grouped_by_port(std::span<const engine::WirePacket> batch);
  void debug(const char* fmt, ...) const __attribute__((format(printf, 2, 3)));
  size_t gso_group_end(std::span<const engine::WirePacket> run, size_t k) const;

  // One UDP_SEGMENT message: at most this many packets and this much payload (an IP
  // datagram's 65535 bytes minus the IPv6 and UDP headers, rounded down).
  static constexpr size_t kMaxGsoSegments = 64;
  static constexpr size_t kMaxGsoBytes = 65000;

  struct GroupSocket {
    std::array<uint8_t, 16> group{};
    int fd = -1;
  };

  UdpPortOptions options_;
  std::vector<RxQueue> rxq_;        // at least one
  int lock_fd_ = -1;                // the address lock of a port with several queues
  int epoll_fd_ = -1;               // the first queue's socket and the group sockets
  std::vector<GroupSocket> groups_;
  size_t rx_turn_ = 0;              // which socket receive() reads first (fairness)
  int granted_rcvbuf_ = 0;
  bool gso_ = false;  // send groups with UDP_SEGMENT (cleared if the kernel refuses)
  bool gro_ = false;  // UDP_GRO granted on the receive socket
  std::vector<engine::WirePacket> by_port_;  // grouped_by_port's copy
  std::vector<uint16_t> ports_seen_;           // grouped_by_port's ports, first seen first
  std::vector<SendSocket> pool_;     // indexed by hash bucket; fd -1 until first use
  std::vector<SendSocket> extra_;    // sockets for source ports outside the pool
  SendSocket rx_sender_;             // receive queue 0's socket, when it sends (not owned)
  UdpPortStats tx_stats_;  // the send side's counts (received ones are per queue)
};

// The preferred UDP source port of a QP: RoCEv2 Annex A17.5 leaves the source port to the
// sender for flow entropy; vrnic keeps it in 0xC000..0xFFFF.
uint16_t preferred_source_port(uint32_t qpn);

}  // namespace vrnic::transport
