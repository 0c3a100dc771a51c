// The connection manager of a device, sans-IO: CM MADs in and out, the state of each connection, timers.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <span>
#include <vector>

#include "cm/types.h"
#include "engine/ports.h"
#include "wire/cm_mad.h"

namespace vrnic::cm {

// Where the CM's MADs go: the caller wraps each in a GSI datagram (wire::cm::build_gsi_packet)
// from `from` to `to` and sends it. Called from inside the Manager; must not call back.
class MadPort {
 public:
  virtual ~MadPort() = default;
  virtual void send_mad(const Endpoint& from, const Endpoint& to,
                        std::span<const uint8_t, wire::cm::kMadSize> mad) = 0;
};

// Told which connections a DREQ would have to end should the process stop without ending
// them (SIGKILL): the kernel's CM ends a killed process's connections, vrnic's CM dies with
// the process, so a guard outside it keeps these and sends them then (src/guard). keep()
// when a connection becomes established, with the whole DREQ MAD; drop() when it leaves
// that state. Called from inside the Manager; must not call back.
class Witness {
 public:
  virtual ~Witness() = default;
  virtual void keep(uint32_t conn, const Endpoint& from, const Endpoint& to,
                    std::span<const uint8_t, wire::cm::kMadSize> dreq) = 0;
  virtual void drop(uint32_t conn) = 0;
};

// One device's CM (IBA 12.9 state machine, the RDMA IP CM of Annex A11 on top). Single-
// threaded: the caller serialises every call. The Manager sends REQ/REP/RTU/DREQ/DREP/REJ/MRA
// and the SIDR pair, resends on its response timeouts, answers duplicates without creating a
// second connection, and reports what the application must see as Events. QPs are not
// touched here: as with the kernel CM, the layer above moves them through INIT/RTR/RTS from
// the negotiated Params before accept() / establish().
class Manager {
 public:
  Manager(const Config& cfg, MadPort& port, const engine::Clock& clock);

  // Passive side. The port space and port make the service ID; `local` may be a wildcard
  // (any address of this device, of either family when !ipv6_only). Errors: EADDRINUSE.
  int listen(uint16_t port_space, uint16_t port, const Endpoint& local, bool wildcard,
             int backlog, uint32_t* listener, bool ipv6_only = false);
  void stop_listening(uint32_t listener);

  // Active side: sends a REQ (RC/UC) and returns the new connection's id in *conn.
  int connect(const ConnectArgs& args, uint32_t* conn);
  // After CONNECT_RESPONSE: the RTU, and the connection is established.
  int establish(uint32_t conn);
  // Passive side, after CONNECT_REQUEST: the REP (ESTABLISHED follows with the RTU).
  int accept(uint32_t conn, const Params& local);
  // REJ: refuses a request (passive side), a REP (active side), or abandons a set-up of
  // either side still in progress (as the kernel CM's ib_send_cm_rej). EINVAL otherwise.
  int reject(uint32_t conn, std::span<const uint8_t> private_data,
             uint16_t reason = uint16_t(wire::cm::RejReason::kConsumerReject));
  // The application fetched the connection request: it leaves its listener's backlog (the
  // kernel's ucma counts requests not yet read; a request that finds the backlog full goes
  // unanswered, and the requester's resend tries again).
  void request_taken(uint32_t conn);
  // The QP of a passive connection received before the RTU (IBV_EVENT_COMM_EST): established
  // as if the RTU had come. EISCONN if already established, EINVAL in any other state.
  int notify_established(uint32_t conn);
  // DREQ (or the DREP that answers the peer's DREQ). EINVAL if not connected.
  int disconnect(uint32_t conn, std::span<const uint8_t> private_data = {});
  // Forgets a connection. One still connected is disconnected first; one that is being set
  // up is rejected, as the kernel CM does when an id is destroyed.
  void destroy(uint32_t conn);
  // The QP of an established connection failed on its own (the transport gave up on the
  // peer): one DREQ is sent without waiting for its DREP, and kDisconnected is reported at
  // once (the connection goes to time-wait). EINVAL if the connection carries nothing.
  int transport_lost(uint32_t conn);

  // UD service ID resolution (the UDP and IB port spaces with a UD QP).
  int resolve_sidr(const ConnectArgs& args, uint32_t* conn);
  int accept_sidr(uint32_t conn, uint32_t qpn, uint32_t qkey, std::span<const uint8_t> pd);
  int reject_sidr(uint32_t conn, wire::cm::SidrStatus status, std::span<const uint8_t> pd);

  // A received MAD (the payload of a GSI datagram) from `from` to `to`.
  void receive(const Endpoint& from, const Endpoint& to, std::span<const uint8_t> mad);
  // Runs the timers that are due; next_timer_ns() is when to call again (UINT64_MAX: none).
  void on_timer();
  // The process is about to exit and its timers with it: resends every DREQ still awaiting
  // its DREP now (the kernel CM would go on resending after the process). Returns how many.
  size_t resend_pending_disconnects();
  size_t unanswered_disconnects() const;  // DREQs still awaiting their DREP
  // The process is exiting: every connection ends as destroy() ends it (DREQ, DREP or REJ),
  // as the kernel CM ends those of a process whose rdma_cm file closes.
  void shutdown();
  uint64_t next_timer_ns() const;

  // The guard's view of the connections (null: none); set before the first connection.
  void set_witness(Witness* w) { witness_ = w; }

  bool poll_event(Event& out);
  const Counters& counters() const { return ctr_; }
  State state(uint32_t conn) const;

 private:
  struct Conn {
    uint32_t id = 0;               // our local comm ID (also the SIDR request ID)
    uint32_t remote_id = 0;        // the peer's comm ID
    uint32_t listener = 0;         // the listener a passive connection came through
    State state = State::kIdle;
    Endpoint local, remote;
    uint16_t port_space = 0;
    uint64_t service_id = 0;
    uint64_t tid = 0;              // of the exchange in progress
    Params mine, peer;
    uint8_t peer_response_timeout = 20;  // the peer's CM response timeout (its REQ)
    wire::cm::Message last{};     // what a retry or a duplicate resends
    bool has_last = false;
    uint64_t deadline = UINT64_MAX;
    uint8_t retries_left = 0;
    bool orphan = false;           // destroyed by the application while still disconnecting
    bool unfetched = false;        // a request the application has not fetched: in the backlog
  };
  struct Listener {
    uint16_t port_space = 0;
    uint16_t port = 0;
    Endpoint local;
    bool wildcard = false;
    bool ipv6_only = false;
    int backlog = 0;
    int pending = 0;  // connection requests the application has not fetched yet
  };

  struct Parked {  // a request for a service between two listeners
    Endpoint from, to;
    uint64_t tid = 0;
    wire::cm::Message msg;
    uint64_t until = 0;
  };

  Conn* find(uint32_t conn);
  const Conn* find(uint32_t conn) const;
  Listener* find_listener(uint32_t id);
  int answer_sidr(uint32_t conn, wire::cm::SidrStatus status, uint32_t qpn, uint32_t qkey,
                  std::span<const uint8_t> pd);
  Conn* find_by_remote(const Endpoint& peer, uint32_t remote_comm_id);
  Conn& create(const Endpoint& local, const Endpoint& remote);
  uint32_t new_comm_id();
  uint64_t new_tid();
  uint64_t response_timeout_ns(uint8_t exponent) const;

  // Sets the state, and tells the witness when a connection enters or leaves kEstablished.
  void set_state(Conn& c, State s);
  void send(const Conn& c, const wire::cm::Message& msg, uint64_t tid);
  void send_to(const Endpoint& from, const Endpoint& to, const wire::cm::Message& msg,
               uint64_t tid);
  void arm(Conn& c, uint64_t after_ns);
  void expire(Conn& c);
  void enter_timewait(Conn& c);
  void leave_backlog(Conn& c);
  void emit(Event ev);

  bool park(const Endpoint& from, const Endpoint& to, uint64_t tid, const wire::cm::Message& m,
            uint64_t service_id, uint32_t remote_id);
  void replay_parked(uint64_t service_id);
  void expire_parked(uint64_t now);
  void dispatch_request(const Parked& p, bool may_park);
  template <typename Pred>
  void dispatch_parked(Pred due);
  void on_req(const Endpoint& from, const Endpoint& to, uint64_t tid, const wire::cm::Req& m,
              bool may_park = true);
  void on_mra(const Endpoint& from, const wire::cm::Mra& m);
  void on_rej(const Endpoint& from, const wire::cm::Rej& m);
  void on_rep(const Endpoint& from, uint64_t tid, const wire::cm::Rep& m);
  void on_rtu(const Endpoint& from, const wire::cm::Rtu& m);
  void on_dreq(const Endpoint& from, const Endpoint& to, uint64_t tid, const wire::cm::Dreq& m);
  void on_drep(const Endpoint& from, const wire::cm::Drep& m);
  void on_sidr_req(const Endpoint& from, const Endpoint& to, uint64_t tid,
                   const wire::cm::SidrReq& m, bool may_park = true);
  void on_sidr_rep(const Endpoint& from, const wire::cm::SidrRep& m);
  void on_duplicate_req(Conn& c);
  uint32_t match_listener(uint64_t service_id, const Endpoint& to);
  Conn* match(const Endpoint& from, uint32_t our_id, uint32_t their_id);
  void reject_req(const Endpoint& from, const Endpoint& to, uint64_t tid, uint32_t remote_id,
                  wire::cm::RejReason reason);

  Config cfg_;
  MadPort& port_;
  const engine::Clock& clock_;
  std::map<uint32_t, Conn> conns_;  // by local comm ID
  std::map<uint32_t, Listener> listeners_;
  std::map<uint16_t, uint64_t> stopped_at_;  // port -> when a listener on it last stopped
  std::vector<Parked> parked_;
  std::deque<Event> events_;
  Counters ctr_;
  uint32_t next_comm_id_;
  uint32_t next_listener_ = 1;
  Witness* witness_ = nullptr;
  uint64_t next_tid_;
};

}  // namespace vrnic::cm
