// rsockets inside librdmacm.so.1: the socket object, the process's table of them and the
// thread that turns CQ completions and CM events into socket state.
#pragma once
#include <rdma/rdma_cma.h>
#include <sys/socket.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace vrnic::rdmacm::rs {

// Wire protocol between two vrnic rsockets (both ends are this library). Every message is a
// SEND_WITH_IMM over the RC QP into one of the receiver's pre-posted slots. The immediate
// holds the message kind (bits 31..24) and a credit grant (bits 15..0): how many of the
// sender's data slots were emptied by its reader since the last grant. A data message needs
// one credit; a slot holding data is reposted, and counted for the next grant, only once the
// reader has taken all of it. Credit and FIN messages need no credit: the receiver posts
// kCtrlSlots more slots than it grants and reposts a control slot at once. A credit message
// carries at least kCredits / 2 grants and the peer holds at most kCredits, so no more than
// two are ever outstanding, plus one FIN.
inline constexpr uint32_t kSlotSize = 64 * 1024;
inline constexpr uint32_t kCredits = 16;   // data slots granted to the peer
inline constexpr uint32_t kCtrlSlots = 4;  // extra receive slots for credit / FIN messages
inline constexpr uint32_t kRxSlots = kCredits + kCtrlSlots;
inline constexpr uint32_t kTxSlots = kCredits;
inline constexpr uint32_t kSqDepth = 64;
inline constexpr uint32_t kGrantThreshold = kCredits / 2;

// kIomap: a data-credited message whose payload is an IoMap (riomap on the sender).
enum class Msg : uint8_t { kData = 0, kCredit = 1, kFin = 2, kIomap = 3 };
inline uint32_t imm_of(Msg m, uint32_t grant) { return (uint32_t(m) << 24) | (grant & 0xffff); }

enum class State : uint8_t {
  kIdle, kBound, kListening, kResolving, kConnecting, kAccepting, kConnected, kError, kClosed,
};

struct Rx {
  uint32_t slot, len, off;
};

// Datagram rsockets (SOCK_DGRAM): each is an unreliable-datagram QP of its own, and an
// rdma_cm_id of the UDP port space bound to the socket's address and listening, so that a
// peer can resolve the address to the QP by SIDR. Every datagram starts with a DgHeader
// holding the sender's address (the receiver reports it as the source); a UD receive
// buffer starts with the 40-byte GRH. A datagram's payload is at most the path MTU minus
// the header; datagrams may be lost (no receive posted), never cut short or corrupted.
inline constexpr uint32_t kGrhSize = 40;
inline constexpr uint32_t kDgMaxMtu = 4096;
inline constexpr uint32_t kDgSlotSize = kGrhSize + kDgMaxMtu + 24;
inline constexpr uint32_t kDgRxSlots = 256;
inline constexpr uint32_t kDgTxSlots = 64;
inline constexpr uint8_t kDgMagic = 0xd7;

struct DgHeader {
  uint8_t magic = kDgMagic;
  uint8_t family = 0;   // 4 or 6
  uint16_t port = 0;    // network order
  uint8_t addr[16]{};
};
static_assert(sizeof(DgHeader) == 20);

// A destination's family, address and port as one comparable key (DgHeader's fields).
using PeerKey = std::array<uint8_t, 19>;

// How to reach a destination's QP: resolved once (SIDR) and kept for the socket's life.
struct Peer {
  rdma_cm_id* resolver = nullptr;  // the SIDR exchange under way
  ibv_ah* ah = nullptr;
  uint32_t qpn = 0, qkey = 0;
  int error = 0;                   // the resolution failed (reported once, then forgotten)
};

// A window of memory one side opened for the other's riowrite, at an rsocket offset.
struct IoMap {
  uint64_t offset, addr, len;
  uint32_t rkey;
  void* local = nullptr;  // the mapping side's buffer and MR (not sent)
  ibv_mr* mr = nullptr;
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
  std::deque<rdma_cm_id*> pending;  // a listener's connection requests

  ibv_comp_channel* comp = nullptr;
  ibv_cq* cq = nullptr;
  ibv_mr* rx_mr = nullptr;
  ibv_mr* tx_mr = nullptr;
  uint8_t* rx_buf = nullptr;
  uint8_t* tx_buf = nullptr;
  std::deque<Rx> rx;          // data received, in order, not yet read
  uint32_t unreported = 0;    // data slots reposted since the last grant
  uint32_t credits = 0;       // data messages the peer can take now
  std::vector<uint32_t> free_tx;
  uint32_t sq_used = 0;       // send WRs not yet completed
  bool peer_fin = false;      // FIN or disconnect: nothing more will arrive
  bool peer_gone = false;     // the connection is disconnected
  std::vector<IoMap> local_maps, remote_maps;
  bool rd_shut = false, wr_shut = false, fin_sent = false;

  // Datagram sockets only (rsocket_dgram*.cc).
  int domain = AF_INET;
  ibv_qp* ud_qp = nullptr;
  bool armed = false;          // the CQ will raise an event (armed only before a wait)
  uint32_t max_dgram = 0;      // the largest payload one datagram carries
  DgHeader self;               // this socket's address as its datagrams carry it
  bool has_dest = false;       // rconnect'ed: the default destination and the only source
  PeerKey dest{};
  sockaddr_storage dest_addr{};
  std::map<PeerKey, Peer> peers;

  // Options (SOL_SOCKET, IPPROTO_TCP, SOL_RDMA); kept and reported back.
  int reuseaddr = 0, keepalive = 0, nodelay = 0, keepidle = 7200;
  int sndbuf = kSlotSize * kCredits, rcvbuf = kSlotSize * kCredits;
  linger lin{};
  int sqsize = kSqDepth, rqsize = kRxSlots, inline_size = 0, iomapsize = 0;

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
  void watch();                         // the set of CQ channels changed
 private:
  Runtime();
  void run();
  void on_cm_event(rdma_cm_event* ev);
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

// Connection resources and the datapath (rsocket_conn.cc), all with s.mu held.
int setup_conn(Socket& s);           // CQ, MRs, QP on s.id, receives posted
// What stream and datagram sockets set up alike: page-aligned rx and tx slot buffers with
// their MRs, a completion channel and one CQ for both directions (0 or an errno), and the
// attributes of a QP on that CQ (every send signalled, one SGE).
int setup_rings(Socket& s, ibv_context* ctx, uint32_t rx_slots, uint32_t tx_slots,
                size_t slot_size, int cq_entries);
ibv_qp_init_attr ring_qp_attr(const Socket& s, ibv_qp_type type, uint32_t send_wr,
                              uint32_t recv_wr);
void conn_param(rdma_conn_param& p);  // what both sides offer
void poll_cq(Socket& s);             // takes every completion, updates the state
int post_msg(Socket& s, Msg m, uint32_t slot, uint32_t len);
void repost_slot(Socket& s, uint32_t slot, bool data);
void send_grant_if_due(Socket& s);
void teardown(Socket& s);            // destroys the verbs and CM objects

// The datagram socket (rsocket_dgram.cc, rsocket_dgram_peer.cc), all with s.mu held.
int dgram_bind(Socket& s, const sockaddr* addr);  // the id bound and listening, QP ready
int dgram_connect(Socket& s, const sockaddr* addr);
ssize_t dgram_send(Socket& s, std::unique_lock<std::mutex>& g, const iovec* iov, int iovcnt,
                   int flags, const sockaddr* to, socklen_t tolen);
ssize_t dgram_recv(Socket& s, std::unique_lock<std::mutex>& g, const iovec* iov, int iovcnt,
                   int flags, sockaddr* from, socklen_t* fromlen, int* msg_flags);
short dgram_ready(const Socket& s);
void dgram_poll_cq(Socket& s);
void dgram_arm(Socket& s);  // before a wait: the CQ armed, then polled once more
void dgram_teardown(Socket& s);
bool peer_key(const sockaddr* sa, socklen_t len, PeerKey& key);
int start_resolve(Socket& s, const PeerKey& key, const sockaddr* to);
void dgram_answer(Socket& s, rdma_cm_id* request);  // a peer's SIDR request for our QP
void dgram_cm_event(Socket& s, rdma_cm_id* id, rdma_cm_event_type type, int status,
                    const rdma_ud_param& ud);

// iovec helpers (rsocket_data.cc).
size_t total_of(const iovec* iov, int n);
void gather(const iovec* iov, size_t at, uint8_t* buf, size_t len);
void scatter(const iovec* iov, size_t at, const uint8_t* buf, size_t len);
ssize_t would_block();  // EAGAIN, after yielding the CPU

inline void* serial_ctx(uint64_t serial) { return reinterpret_cast<void*>(serial); }

}  // namespace vrnic::rdmacm::rs
