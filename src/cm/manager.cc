// The CM's application side: listen, connect, accept, reject, establish, disconnect; sending and timers.
#include "cm/manager.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace vrnic::cm {

namespace wc = wire::cm;

Manager::Manager(const Config& cfg, MadPort& port, const engine::Clock& clock)
    : cfg_(cfg),
      port_(port),
      clock_(clock),
      next_comm_id_(cfg.seed * 2654435761u | 1),
      next_tid_(static_cast<uint64_t>(cfg.seed) << 32) {}

uint32_t Manager::new_comm_id() {
  // Never 0 (a REJ to an unknown service carries local comm ID 0), never one in use.
  do {
    next_comm_id_ = next_comm_id_ * 1103515245u + 12345u;
  } while (next_comm_id_ == 0 || conns_.count(next_comm_id_));
  return next_comm_id_;
}

uint64_t Manager::new_tid() { return ++next_tid_; }

uint64_t Manager::response_timeout_ns(uint8_t exponent) const {
  return 4096ull << std::min<uint8_t>(exponent, 31);  // 4.096 us * 2^n (IBA 12.7.31)
}

Manager::Conn* Manager::find(uint32_t conn) {
  auto it = conns_.find(conn);
  return it == conns_.end() ? nullptr : &it->second;
}
const Manager::Conn* Manager::find(uint32_t conn) const {
  auto it = conns_.find(conn);
  return it == conns_.end() ? nullptr : &it->second;
}

Manager::Conn* Manager::find_by_remote(const Endpoint& peer, uint32_t remote_comm_id) {
  for (auto& [id, c] : conns_) {
    if (c.remote_id == remote_comm_id && c.remote.same_address(peer)) return &c;
  }
  return nullptr;
}

Manager::Conn& Manager::create(const Endpoint& local, const Endpoint& remote) {
  const uint32_t id = new_comm_id();
  Conn& c = conns_[id];
  c.id = id;
  c.local = local;
  c.remote = remote;
  return c;
}

State Manager::state(uint32_t conn) const {
  const Conn* c = find(conn);
  return c ? c->state : State::kClosed;
}

void Manager::send_to(const Endpoint& from, const Endpoint& to, const wc::Message& msg,
                      uint64_t tid) {
  wc::Mad mad{.hdr = {}, .msg = msg};
  mad.hdr.tid = tid;
  std::array<uint8_t, wc::kMadSize> bytes;
  wc::build_mad(mad, bytes.data());
  const uint16_t attr = static_cast<uint16_t>(bytes[16] << 8 | bytes[17]);
  ++ctr_.tx[(attr - 0x10) & 15];
  port_.send_mad(from, to, bytes);
}

void Manager::set_state(Conn& c, State s) {
  const bool was = c.state == State::kEstablished;
  c.state = s;
  const bool is = s == State::kEstablished;
  if (!witness_ || was == is) return;
  if (!is) return witness_->drop(c.id);
  // The DREQ the kernel's CM would send when the process's rdma_cm file closes (IBA 12.6.10).
  const wc::Dreq r{.local_comm_id = c.id, .remote_comm_id = c.remote_id,
                   .remote_qpn = c.peer.qpn, .private_data = {}};
  wc::Mad mad{.hdr = {}, .msg = r};
  mad.hdr.tid = new_tid();
  std::array<uint8_t, wc::kMadSize> bytes;
  wc::build_mad(mad, bytes.data());
  witness_->keep(c.id, c.local, c.remote, bytes);
}

void Manager::send(const Conn& c, const wc::Message& msg, uint64_t tid) {
  send_to(c.local, c.remote, msg, tid);
}

// A message that expects an answer: remembered for resending, the response timer armed.
void Manager::arm(Conn& c, uint64_t after_ns) {
  c.deadline = clock_.now_ns() + after_ns;
}

void Manager::emit(Event ev) { events_.push_back(std::move(ev)); }

bool Manager::poll_event(Event& out) {
  if (events_.empty()) return false;
  out = std::move(events_.front());
  events_.pop_front();
  return true;
}

int Manager::listen(uint16_t port_space, uint16_t port, const Endpoint& local, bool wildcard,
                    int backlog, uint32_t* listener, bool ipv6_only) {
  for (const auto& [id, l] : listeners_) {
    if (l.port_space != port_space || l.port != port) continue;
    if (l.wildcard || wildcard || l.local.same_address(local)) return EADDRINUSE;
  }
  const uint32_t id = next_listener_++;
  listeners_[id] = Listener{port_space, port, local, wildcard, ipv6_only,
                            backlog > 0 ? backlog : 1024, 0};
  *listener = id;
  replay_parked(wc::service_id(port_space, port));
  return 0;
}

void Manager::stop_listening(uint32_t listener) {
  auto it = listeners_.find(listener);
  if (it == listeners_.end()) return;
  stopped_at_[it->second.port] = clock_.now_ns();
  listeners_.erase(it);
}

// The REQ of a connection: the negotiated parameters, a RoCE path between the two
// addresses, and the IP CM header ahead of the user's private data.
static wc::Req make_req(const Config& cfg, uint32_t id, uint64_t sid, const ConnectArgs& a) {
  wc::Req r;
  const Params& p = a.params;
  r.local_comm_id = id;
  r.service_id = sid;
  r.local_ca_guid = cfg.ca_guid;
  r.local_qpn = p.qpn;
  r.responder_resources = p.responder_resources;
  r.initiator_depth = p.initiator_depth;
  r.remote_cm_response_timeout = cfg.cm_response_timeout;
  r.transport = p.transport;
  r.extended_transport = p.transport == 3 ? 1 : 0;  // 3: XRC (extended transport type 1)
  r.end_to_end_flow_control = true;
  r.starting_psn = p.starting_psn;
  r.local_cm_response_timeout = cfg.cm_response_timeout;
  r.retry_count = p.retry_count;
  r.path_mtu = p.path_mtu;
  r.rnr_retry_count = p.rnr_retry_count;
  r.max_cm_retries = cfg.max_cm_retries;
  r.srq = p.srq;
  r.primary.local_lid = r.primary.remote_lid = 0xffff;  // permissive: RoCE has no LIDs
  r.primary.local_gid = wc::gid_of_ip(a.local.ip, a.local.ipv6);
  r.primary.remote_gid = wc::gid_of_ip(a.remote.ip, a.remote.ipv6);
  r.primary.packet_rate = 2;
  r.primary.traffic_class = p.traffic_class;
  r.primary.hop_limit = p.hop_limit;
  r.primary.local_ack_timeout = p.local_ack_timeout;
  const wc::IpCmHeader h{.version = 0, .ipv6 = a.local.ipv6, .src_port = a.local.port,
                         .src = a.local.ip, .dst = a.remote.ip};
  wc::write_ip_cm_header(h, r.private_data.data());
  std::copy_n(p.private_data.begin(), p.private_data.size(),
              r.private_data.begin() + wc::kIpCmHeaderSize);
  return r;
}

int Manager::connect(const ConnectArgs& a, uint32_t* conn) {
  if (a.params.private_data.size() > kReqUserPrivate) return EINVAL;
  if (a.local.ipv6 != a.remote.ipv6) return EINVAL;
  Conn& c = create(a.local, a.remote);
  c.port_space = a.port_space;
  c.service_id = wc::service_id(a.port_space, a.remote.port);
  c.mine = a.params;
  c.tid = new_tid();
  c.last = make_req(cfg_, c.id, c.service_id, a);
  c.has_last = true;
  set_state(c, State::kReqSent);
  c.retries_left = cfg_.max_cm_retries;
  // The active side's later waits (a DREQ's) take the response timeout its REQ announced, as
  // the kernel CM's do (cm_id timeout_ms from the REQ's remote CM response timeout).
  c.peer_response_timeout = cfg_.cm_response_timeout;
  send(c, c.last, c.tid);
  arm(c, response_timeout_ns(cfg_.cm_response_timeout));
  *conn = c.id;
  return 0;
}

}  // namespace vrnic::cm
