// The connection manager's vocabulary: addresses, negotiated parameters, states, events, counters.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace vrnic::cm {

// An address of a device (vrnic's convention: IPv4 in the first four bytes) and, for the IP
// CM header, a port.
struct Endpoint {
  bool ipv6 = false;
  std::array<uint8_t, 16> ip{};
  uint16_t port = 0;
  bool same_address(const Endpoint& o) const { return ipv6 == o.ipv6 && ip == o.ip; }
};

// The CM's timing and retries. Response timeouts are IBA exponents: 4.096 us * 2^n.
struct Config {
  uint8_t cm_response_timeout = 20;  // as the kernel's RDMA CM: about 4.3 s
  uint8_t max_cm_retries = 15;
  uint8_t mra_service_timeout = 20;  // promised in an MRA for a slow accept
  uint64_t ca_guid = 0;              // this device's node GUID (REQ / REP)
  uint32_t seed = 1;                 // first comm ID and transaction ID
  uint8_t packet_lifetime = 18;      // REQ path LocalAckTimeout; time-wait derives from it
  // A REQ or SIDR_REQ for a service whose last listener stopped less than this ago waits up to
  // this long for a new listener before it is rejected (a server that listens again between
  // two connections, as perftest -R's, is not raced by its client's next request).
  uint64_t relisten_wait_ns = 200'000'000;
};

// The user's private data each message carries (the REQ's and SIDR_REQ's after the 36-byte IP
// CM header), as the kernel's RDMA CM limits them.
inline constexpr size_t kReqUserPrivate = 56, kRepUserPrivate = 196, kRejUserPrivate = 148,
                        kRtuUserPrivate = 224, kDreqUserPrivate = 220, kDrepUserPrivate = 224,
                        kSidrReqUserPrivate = 180, kSidrRepUserPrivate = 136;

// What a REQ, REP or SIDR pair negotiates, and the user's private data.
struct Params {
  uint32_t qpn = 0;
  uint32_t qkey = 0;
  uint32_t starting_psn = 0;
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
  uint8_t retry_count = 7;
  uint8_t rnr_retry_count = 7;
  uint8_t path_mtu = 3;  // enum ibv_mtu
  bool srq = false;
  uint8_t transport = 0;  // 0 RC, 1 UC, 3 XRC (REQ: extended transport type 1)
  uint8_t local_ack_timeout = 18;
  uint8_t traffic_class = 0;
  uint8_t hop_limit = 64;
  std::vector<uint8_t> private_data;  // the user's, without the IP CM header
};

struct ConnectArgs {
  Endpoint local, remote;  // remote.port: the service's port; local.port: the source port
  uint16_t port_space = 0;
  Params params;
};

// Connection states (IBA 12.9.6, the communication-establishment and release diagrams).
enum class State : uint8_t {
  kIdle, kReqSent, kMraReqRcvd, kReqRcvd, kMraReqSent, kRepSent, kRepRcvd, kEstablished,
  kDreqSent, kDreqRcvd, kTimewait, kSidrReqSent, kSidrReqRcvd, kClosed,
};
const char* to_string(State s);

// What the application sees (as the RDMA CM's events; see docs/protocol.md).
enum class EventType : uint8_t {
  kConnectRequest,   // REQ (or SIDR_REQ) for a listener: a new connection in kReqRcvd
  kConnectResponse,  // REP: the caller moves its QP to RTR/RTS, then establish()
  kEstablished,      // RTU received (passive), establish() done (active), SIDR_REP valid
  kRejected,         // REJ (its reason in `reason`)
  kUnreachable,      // no answer after every retry (timed_out), or a SIDR_REP's failure
  kDisconnected,     // DREQ received, or our DREQ answered / given up on (timed_out)
  kTimewaitExit,     // time-wait over: the QP may be reused
};
const char* to_string(EventType t);

struct Event {
  EventType type = EventType::kConnectRequest;
  uint32_t conn = 0;
  uint32_t listener = 0;   // kConnectRequest
  Params peer;             // kConnectRequest / kConnectResponse / kEstablished (SIDR)
  uint16_t reason = 0;     // kRejected: the REJ reason; kUnreachable: the SIDR status
  bool timed_out = false;  // kUnreachable / kDisconnected: the retries ran out unanswered
  Endpoint local, remote;  // kConnectRequest: the addresses of the IP CM header
  uint16_t port_space = 0;
  bool sidr = false;       // kConnectRequest: from a SIDR_REQ (a UD QP's), not a REQ
};

struct Counters {
  uint64_t tx[16] = {};  // by attribute - 0x10 (REQ .. APR)
  uint64_t rx[16] = {};
  uint64_t retries = 0;       // MADs resent after a response timeout
  uint64_t timeouts = 0;      // connections given up after max_cm_retries
  uint64_t rejects_sent = 0, rejects_received = 0;
  uint64_t duplicates = 0;    // REQ/REP/RTU/DREQ seen again, answered without a new state
  uint64_t rx_malformed = 0;  // not a CM MAD, a bad length, version or attribute
  uint64_t rx_unmatched = 0;  // comm IDs that match no connection, or the wrong peer
  uint64_t rx_bad_state = 0;  // a message the connection's state does not expect
  uint64_t parked = 0;        // requests held for a service listening again (relisten_wait_ns)
  uint64_t backlog_drops = 0; // requests left unanswered: the listener's backlog was full
};

}  // namespace vrnic::cm
