// librdmacm.so.1 internals: event channels, communication identifiers, and the process's CM service.
#pragma once
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <array>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "cm/manager.h"
#include "rdmacm/guard_link.h"

#define RDMACM_EXPORT extern "C" __attribute__((visibility("default")))

namespace vrnic::rdmacm {

// The Q_Key of the RDMA CM's UDP port space (as the kernel's RDMA_UDP_QKEY).
inline constexpr uint32_t kUdpQkey = 0x01234567;

struct Id;

// The local ACK timeout exponent of a connection's QPs unless the program sets one
// (VRNIC_CM_ACK_TIMEOUT, settings.h).
uint8_t default_ack_timeout();

// An event as the program sees it, with the private data it points to (freed on ack).
struct EventBox {
  rdma_cm_event ev{};
  std::vector<uint8_t> private_data;
};

// rdma_event_channel: fd is a semaphore eventfd, one count per queued event, so poll() sees
// it readable exactly while events wait and O_NONBLOCK reads fail with EAGAIN.
struct Channel {
  rdma_event_channel ch{};
  std::deque<EventBox*> queue;  // guarded by the service lock
  bool sync = false;            // the private channel of an id created without one
  int readers = 0;              // threads inside rdma_get_cm_event (service lock)
  bool destroyed = false;       // rdma_destroy_event_channel ran (service lock)
};

enum class IdState : uint8_t {
  kIdle, kBound, kAddrResolved, kRouteResolved, kListening, kConnecting, kConnectRequest,
  kAccepting, kConnected, kDisconnected,
};

// Authenticated mode (auth.h): this side's key pair for the connection, and the peer's key.
struct AuthState {
  std::array<uint8_t, 32> pk{}, sk{}, peer_pk{};
};

// rdma_cm_id: the program holds &id (first member); the rest is the shim's.
struct Id {
  rdma_cm_id id{};
  IdState state = IdState::kIdle;
  Channel* channel = nullptr;
  uint32_t conn = 0;       // the Manager's connection, 0 if none
  uint32_t listener = 0;   // the Manager's listener, 0 if none
  Id* listen_parent = nullptr;  // a connection request's listening id (while it lives)
  bool passive = false;         // made for a connection request
  int backlog = 0;
  cm::Params mine, peer;   // what this side offered and what the peer did
  uint8_t tos = 0;
  bool reuseaddr = false, afonly = false;
  bool afonly_set = false;  // RDMA_OPTION_ID_AFONLY given; else bind sets it from the family
  uint8_t ack_timeout = default_ack_timeout();  // rdma_set_ack_timeout changes it
  int pending_events = 0;  // delivered, not yet acknowledged
  bool port_held = false;  // its source port is in Service::port_owners
  bool disconnected = false;  // DISCONNECTED was delivered: TIMEWAIT_EXIT may follow
  bool quiet_establish = false;  // rdma_establish: the active side gets no ESTABLISHED
  ibv_ece local_ece{};      // rdma_set_local_ece
  bool own_pd = false;     // the default PD was taken for rdma_create_qp(id, NULL, ...)
  bool own_cqs = false;    // rdma_create_qp made the CQs (and channels) itself
  bool own_srq_cq = false;
  ibv_sa_path_rec path{};
  std::unique_ptr<ibv_qp_init_attr> ep_attr;  // passive rdma_create_ep: each request's QP
  std::vector<std::array<uint8_t, 16>> groups;  // multicast groups joined (GIDs), per join
  std::vector<std::array<uint8_t, 16>> send_only_groups;  // joined to send only
  AuthState auth;  // authenticated mode only
};

// The process's connection manager: one vrnic device (ibv_context shared by every id), one
// cm::Manager, and a thread that takes QP1's MADs and runs the CM's timers.
class Service {
 public:
  static Service& get();  // opens the device on first use; check ok()
  bool ok() const { return ctx_ != nullptr; }
  // The errno of a call that needs the CM when !ok(): ENODEV (no vrnic device) or EINVAL
  // (a VRNIC_CM_* setting was refused, with a message on stderr).
  int failure() const { return refused_; }
  ibv_context* context() const { return ctx_; }
  const cm::Endpoint& address() const { return addr_; }
  ibv_pd* default_pd();
  // The process's XRC domain on the device (fd -1, O_CREAT), for XRC ids given none.
  ibv_xrcd* default_xrcd();

  std::mutex mu;  // guards everything below and every Id / Channel
  std::condition_variable cv;  // an event was acknowledged
  cm::Manager& manager() { return *manager_; }
  std::map<uint32_t, Id*> by_conn, by_listener;
  // The ids holding each (port space, port), as the kernel CMA's bind lists (ports.cc).
  std::map<std::pair<int, uint16_t>, std::vector<Id*>> port_owners;
  // Events handed to the program and not yet acknowledged.
  std::set<const rdma_cm_event*> outstanding;

  // Queues an event for the program (mu held); the box's pointers are fixed up here.
  void deliver(Id* id, EventBox* box);
  // Wakes the thread (a timer may now be earlier).
  void kick();
  uint16_t ephemeral_port();  // the next candidate of the ephemeral range
  // At exit, as the kernel CM when the process's rdma_cm file closes: every connection
  // ends (DREQ, DREP or REJ), unanswered DREQs resent for a moment.
  void finish_connections();

 private:
  Service();
  void run();
  void on_event(const cm::Event& ev);
  void publish_counters();
  static int on_mad(void* self, int ipv6, const uint8_t* src, const uint8_t* dst,
                    const uint8_t* mad);
  static void on_qp_fatal(void* self, uint32_t qp_num);
  void end_lost_connections(const std::vector<uint32_t>& qpns);

  struct Port;
  ibv_context* ctx_ = nullptr;
  int refused_ = ENODEV;
  ibv_pd* pd_ = nullptr;
  ibv_xrcd* xrcd_ = nullptr;
  cm::Endpoint addr_;
  std::unique_ptr<Port> port_;
  std::unique_ptr<engine::Clock> clock_;
  std::unique_ptr<cm::Manager> manager_;
  std::unique_ptr<GuardLink> guard_;  // VRNIC_CM_GUARD: the DREQs owed should this process be killed
  int wake_fd_ = -1;
  int counters_first_ = -1;  // the first of the CM's counters among the device's (-1: none)
  uint16_t next_port_ = 0;
  std::mutex in_mu_;  // the MADs handed over by the device, before the thread takes them
  struct InMad {
    cm::Endpoint from, to;
    std::array<uint8_t, 256> mad;
  };
  std::vector<InMad> inbox_;
  std::vector<uint32_t> lost_qps_;  // QPs the device reported failed (in_mu_)
  std::thread thread_;
};

// Event handling behind the scenes (service.cc).
void handle_connect_response(Service& s, Id* id, const cm::Event& ev);

// Source ports (ports.cc), service lock held. claim_port binds e.port (0: a free ephemeral
// port, written back) for id; check_listen_port is rdma_listen's check of a REUSEADDR id.
int claim_port(Service& s, Id* id, cm::Endpoint& e);
int check_listen_port(Service& s, Id* id);
void release_port(Service& s, Id* id);

// QP transitions from what the CM negotiated (qp.cc).
int qp_to_init(Id* id);
int qp_to_rtr(Id* id);
int qp_to_rts(Id* id);
int qp_to_error(Id* id);

// sockaddr <-> Endpoint (id.cc).
bool endpoint_of(const sockaddr* sa, cm::Endpoint& out);
void sockaddr_of(const cm::Endpoint& e, sockaddr_storage& out);
void fill_ib_addr(Id* id);  // route.addr.addr.ibaddr from the route's two addresses

inline Id* to_id(rdma_cm_id* id) { return reinterpret_cast<Id*>(id); }
inline Channel* to_channel(rdma_event_channel* ch) { return reinterpret_cast<Channel*>(ch); }

// Errors leave as -1 with errno set, as librdmacm's calls do.
inline int fail(int err) {
  errno = err;
  return -1;
}

// The private channel of a synchronous id (channel.cc).
Channel* new_private_channel();

// librdmacm's synchronous mode (ucma_complete): the next event on the id's private channel
// completes the operation and stays in id->event; 0, or -1 with errno from its status
// (ECONNREFUSED for REJECTED). As librdmacm, the event's type is not checked.
int wait_sync(Id* id);

}  // namespace vrnic::rdmacm
