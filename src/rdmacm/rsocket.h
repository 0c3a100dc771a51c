// rsockets inside librdmacm.so.1: the socket object, the process's table of them and the
// thread that turns CQ completions, CM events, resolution datagrams and keepalive times into
// socket state. Both kinds speak rdma-core v44's rsocket protocol (rsocket_wire.h).
#pragma once
#include <rdma/rdma_cma.h>
#include <sys/socket.h>

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "rdmacm/rsocket_flow.h"
#include "rdmacm/rsocket_wire.h"

namespace vrnic::rdmacm::rs {

using Clock = std::chrono::steady_clock;

// Stream sockets: an RC QP on an rdma_cm_id of the TCP port space. Each side writes into the
// peer's receive buffer with RDMA WRITE WITH IMMEDIATE (the windows, credits and updates of
// rsocket_flow.h); the receives posted carry no buffer.
inline constexpr uint32_t kMaxTransfer = 64 * 1024;   // the largest data message
inline constexpr uint32_t kSendLowWater = 2048;      // a send waits for this much buffer
inline constexpr int kDefaultBuffer = 1 << 20;       // receive ring and send buffer
inline constexpr int kDefaultQueue = 384;            // send and receive queue (as rdma-core)
inline constexpr int kMinQueue = 16, kMaxQueue = 0xfffe;
inline constexpr int kDefaultInline = 64;

enum class State : uint8_t {
  kIdle, kBound, kListening, kResolving, kConnecting, kAccepting, kConnected, kError, kClosed,
};

// The sizes a socket is built with (SO_SNDBUF, SO_RCVBUF, SOL_RDMA): an accepted socket
// has its listener's, as in rdma-core.
struct Sizes {
  int sndbuf = kDefaultBuffer, rcvbuf = kDefaultBuffer;
  int sqsize = kDefaultQueue, rqsize = kDefaultQueue, inline_size = kDefaultInline;
  int iomapsize = 0;
};

// A connection request a listener holds, with its connection data.
struct Pending {
  rdma_cm_id* id = nullptr;
  std::vector<uint8_t> private_data;
};

// A buffer riomap registered: PROT_WRITE ones take an entry (`index`) of the peer's I/O map
// table and are announced to it before the next data; PROT_NONE ones are local only.
struct LocalMap {
  void* buf = nullptr;
  size_t len = 0;
  ibv_mr* mr = nullptr;
  uint64_t offset = 0;
  int index = -1;
  bool announced = false;
};

// Datagram sockets: a UD QP of their own (Q_Key 0x01234567) and a kernel UDP socket on the
// same address and port, over which a destination's QP is learnt (rsocket_dgram_peer.cc).
inline constexpr uint32_t kGrhSize = 40;
inline constexpr uint32_t kDgSlotSize = kGrhSize + kDsMaxMessage;
inline constexpr uint32_t kDgRxSlots = 256;
inline constexpr uint32_t kDgTxSlots = 64;

struct DgRx {
  uint32_t slot, header, len;  // the receive slot, its header's and the payload's lengths
};

// A destination's family, address and port as one comparable key.
using PeerKey = std::array<uint8_t, 19>;

// A destination: its QP once it answered (before that, datagrams go over kernel UDP).
struct Peer {
  sockaddr_storage addr{};
  ibv_ah* ah = nullptr;
  uint32_t qpn = 0;
};

struct Socket {
  int fd = -1;  // an eventfd: the number the program holds, written on every state change
  uint64_t serial = 0;
  int type = SOCK_STREAM;
  std::mutex mu;
  std::condition_variable cv;
  State state = State::kIdle;
  bool closed = false;  // rclose ran: the thread leaves the verbs objects alone
  bool nonblock = false;
  int so_error = 0;     // reported once by SO_ERROR
  int conn_error = 0;   // why the connection is gone (sticky, for send / recv)
  rdma_cm_id* id = nullptr;
  std::deque<Pending> pending;  // a listener's connection requests

  ibv_comp_channel* comp = nullptr;
  ibv_cq* cq = nullptr;
  uint8_t* rbuf = nullptr;   // stream: the receive ring; datagram: the receive slots
  ibv_mr* rbuf_mr = nullptr;
  uint8_t* tx_buf = nullptr;  // stream: the send ring, then credit updates; datagram: slots
  ibv_mr* tx_mr = nullptr;
  uint32_t sq_used = 0;       // send WRs not yet completed
  bool armed = false;         // the CQ will raise an event (armed only before a wait)

  // Stream sockets only (rsocket_conn.cc, rsocket_data.cc, rsocket.cc).
  uint8_t* table = nullptr;   // the target SGL and I/O map table the peer writes
  ibv_mr* table_mr = nullptr;
  std::unique_ptr<StreamFlow> flow;
  std::unique_ptr<SendRing> ring;
  uint32_t rbuf_size = 0, sbuf_size = 0;
  bool peer_fin = false;      // shutdown or disconnect from the peer: nothing more arrives
  bool peer_gone = false;     // the peer disconnected: nothing more may be sent
  bool rd_shut = false, wr_shut = false;
  bool shutdown_sent = false, disconnect_sent = false;
  std::vector<LocalMap> maps;
  Clock::time_point next_keepalive{};

  // Datagram sockets only (rsocket_dgram*.cc).
  int domain = AF_INET;
  int udp_fd = -1;             // the kernel UDP socket (address resolution)
  ibv_qp* ud_qp = nullptr;
  ibv_ah* self_ah = nullptr;   // to this socket's own QP (first datagrams, forwarded)
  uint32_t max_dgram = 0;      // the largest payload one datagram carries
  sockaddr_storage self{};     // this socket's address as its datagrams carry it
  bool has_dest = false;       // rconnect'ed: the default destination and the only source
  PeerKey dest{};
  sockaddr_storage dest_addr{};
  std::map<PeerKey, Peer> peers;
  std::deque<DgRx> rx;         // datagrams received, not yet read
  std::vector<uint32_t> free_tx;

  // Options (SOL_SOCKET, IPPROTO_TCP, SOL_RDMA); kept and reported back.
  int reuseaddr = 0, keepalive = 0, nodelay = 0, keepidle = 7200;
  linger lin{};
  Sizes sizes;

  void wake();  // cv + eventfd (mu held)
};

using Ptr = std::shared_ptr<Socket>;

// The process's rsockets and their thread.
class Runtime {
 public:
  static Runtime& get();
  rdma_event_channel* channel() const { return channel_; }
  Ptr create(int type);                 // a new socket with its fd; nullptr + errno
  Ptr find(int fd);                     // nullptr if fd is not an rsocket
  void remove(const Ptr& s);            // rclose: out of the table, verbs torn down later
  void watch();                         // the set of fds or a keepalive time changed
 private:
  Runtime();
  void run();
  int next_wait_ms(const std::vector<Ptr>& socks);
  void on_cm_event(rdma_cm_event* ev);
  void on_stream_event(Socket& s, rdma_cm_id* id, rdma_cm_event_type type,
                       std::span<const uint8_t> private_data);
  void on_cq_channel(const Ptr& s);
  void bury(const Ptr& s);

  std::mutex mu_;
  std::map<int, Ptr> by_fd_;
  std::map<uint64_t, Ptr> by_serial_;
  std::vector<Ptr> graveyard_;
  uint64_t next_serial_ = 1;
  rdma_event_channel* channel_ = nullptr;
  int wake_fd_ = -1;
  std::thread thread_;
};

// The stream's connection and datapath (rsocket_conn.cc), all with s.mu held.
int setup_conn(Socket& s);  // buffers, MRs, CQ, QP on s.id, receives posted; 0 or an errno
std::array<uint8_t, kConnDataSize> conn_data_of(const Socket& s);
bool start_conn(Socket& s, std::span<const uint8_t> peer_data);  // the peer's REQ / REP data
void conn_param(rdma_conn_param& p, const uint8_t* private_data);
// A completion channel and one CQ for both directions (0 or an errno).
int setup_cq(Socket& s, ibv_context* ctx, int entries);
uint8_t* alloc_pages(size_t len);
void poll_cq(Socket& s);   // takes every completion, updates the state, sends credit updates
void pump(Socket& s);      // sends the credit updates due
// Before a wait (either type): the CQ armed, then polled once more. A CQ is armed only when
// a thread is about to sleep: a program that keeps calling polls it itself, and its
// traffic wakes the rsocket thread only when someone waits (rsocket_runtime.cc).
void arm_cq(Socket& s);
void take_completions(Socket& s);  // the CQ polled now (poll_cq or dgram_poll_cq)
bool can_send(const Socket& s);
// Posts an RDMA WRITE (WITH IMMEDIATE if `imm`) of tx_buf piece `c`; `ctrl`: of the control
// window (no piece of the send ring).
int post_write(Socket& s, const Write& w, Chunk c, bool imm, bool ctrl);
void keepalive_due(Socket& s, Clock::time_point now);
void teardown(Socket& s);          // destroys the verbs and CM objects

// I/O maps (rsocket.cc): announces the mappings not yet sent, which go before any later
// data; 0 once none is left, EAGAIN while one waits for a credit, or the post's errno.
int announce_maps(Socket& s);
// The control message the socket's closed halves call for, if not sent yet (0, or EAGAIN
// while the control window is full).
int send_close_ctrl(Socket& s);

// The datagram socket (rsocket_dgram.cc, rsocket_dgram_peer.cc), all with s.mu held.
int dgram_bind(Socket& s, const sockaddr* addr);  // UDP socket, id and QP; 0 or an errno
int dgram_connect(Socket& s, const sockaddr* addr);
ssize_t dgram_send(Socket& s, std::unique_lock<std::mutex>& g, const iovec* iov, int iovcnt,
                   int flags, const sockaddr* to, socklen_t tolen);
ssize_t dgram_recv(Socket& s, std::unique_lock<std::mutex>& g, const iovec* iov, int iovcnt,
                   int flags, sockaddr* from, socklen_t* fromlen, int* msg_flags);
short dgram_ready(const Socket& s);
void dgram_poll_cq(Socket& s);
void dgram_teardown(Socket& s);
bool peer_key(const sockaddr* sa, socklen_t len, PeerKey& key);
// Sends a datagram over kernel UDP with the resolution header (before the peer's QP is known).
ssize_t udp_send(Socket& s, const Peer& peer, Op op, const iovec* iov, int iovcnt, int flags);
void on_udp_readable(Socket& s);  // resolution datagrams from peers
// Posts tx slot `slot` (header and payload written, `len` bytes) as a UD SEND.
int post_dgram(Socket& s, uint32_t slot, uint32_t len, ibv_ah* ah, uint32_t qpn);
int dgram_slot(Socket& s);  // a free tx slot, or -1
uint8_t* dgram_tx(const Socket& s, uint32_t slot);
ibv_ah* ah_to(Socket& s, const sockaddr* to);  // from the socket's address; nullptr + errno

// iovec helpers (rsocket_data.cc).
size_t total_of(const iovec* iov, int n);
void gather(const iovec* iov, size_t at, uint8_t* buf, size_t len);
void scatter(const iovec* iov, size_t at, const uint8_t* buf, size_t len);
ssize_t would_block();  // EAGAIN, after yielding the CPU

// How an rsocket call (rsend, rrecv, riowrite, the datagram calls …) that cannot go on
// waits, with s.mu held. The caller's thread first takes the CQ's completions itself, as
// rdma-core's rsockets do inside their calls (on vrnic a poll of the CQ also moves the
// device's packets): a nonblocking call polls once before EAGAIN; a blocking one polls for
// kSpin, then arms the CQ (the arm also ends the device's deferral, docs/live.md "Armed"),
// polls once more and sleeps until the rsocket thread wakes it.
class CallWait {
 public:
  static constexpr auto kSpin = std::chrono::microseconds(200);
  explicit CallWait(bool dontwait) : dontwait_(dontwait) {}
  // After the call found nothing to do: true to look again, false to fail with EAGAIN.
  bool next(Socket& s, std::unique_lock<std::mutex>& g);

 private:
  bool dontwait_;
  bool polled_ = false, armed_ = false;
  Clock::time_point start_{};
};

// The length of an address of the family (AF_INET6 or, otherwise, AF_INET).
inline socklen_t addr_len(int family) {
  return family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

inline void* serial_ctx(uint64_t serial) { return reinterpret_cast<void*>(serial); }

}  // namespace vrnic::rdmacm::rs
