// The CM's answers the application gives: accept, establish, reject, disconnect, destroy, SIDR; and the timers.
#include <algorithm>
#include <cerrno>

#include "cm/manager.h"

namespace vrnic::cm {

namespace wc = wire::cm;

template <size_t N>
static void copy_private(std::array<uint8_t, N>& to, std::span<const uint8_t> from,
                         size_t at = 0) {
  std::copy_n(from.begin(), std::min(from.size(), N - at), to.begin() + at);
}

int Manager::accept(uint32_t conn, const Params& p) {
  Conn* c = find(conn);
  if (!c || (c->state != State::kReqRcvd && c->state != State::kMraReqSent)) return EINVAL;
  if (p.private_data.size() > kRepUserPrivate) return EINVAL;
  wc::Rep r;
  r.local_comm_id = c->id;
  r.remote_comm_id = c->remote_id;
  r.local_qpn = p.qpn;
  r.starting_psn = p.starting_psn;
  r.responder_resources = p.responder_resources;
  r.initiator_depth = p.initiator_depth;
  r.end_to_end_flow_control = true;
  r.rnr_retry_count = p.rnr_retry_count;
  r.srq = p.srq;
  r.local_ca_guid = cfg_.ca_guid;
  copy_private(r.private_data, p.private_data);
  c->mine = p;
  c->last = r;
  c->has_last = true;
  set_state(*c, State::kRepSent);
  leave_backlog(*c);
  send(*c, r, c->tid);
  arm(*c, response_timeout_ns(c->peer_response_timeout));
  return 0;
}

int Manager::establish(uint32_t conn) {
  Conn* c = find(conn);
  if (!c || c->state != State::kRepRcvd) return EINVAL;
  wc::Rtu r{.local_comm_id = c->id, .remote_comm_id = c->remote_id, .private_data = {}};
  c->last = r;  // answers a duplicate REP
  c->has_last = true;
  set_state(*c, State::kEstablished);
  c->deadline = UINT64_MAX;
  send(*c, r, c->tid);
  emit({.type = EventType::kEstablished, .conn = c->id, .peer = c->peer});
  return 0;
}

int Manager::reject(uint32_t conn, std::span<const uint8_t> pd, uint16_t reason) {
  Conn* c = find(conn);
  if (!c) return EINVAL;
  if (pd.size() > kRejUserPrivate) return EINVAL;
  wc::MsgRef what;
  switch (c->state) {
    case State::kReqRcvd:
    case State::kMraReqSent:
      what = wc::MsgRef::kReq;
      break;
    case State::kRepRcvd:
      what = wc::MsgRef::kRep;
      break;
    case State::kReqSent:  // a set-up this side abandons: the REQ or the REP it sent
    case State::kMraReqRcvd:
    case State::kRepSent:
      what = wc::MsgRef::kOther;
      break;
    default:
      return EINVAL;
  }
  leave_backlog(*c);
  wc::Rej r{.local_comm_id = c->id, .remote_comm_id = c->remote_id, .msg_rejected = what,
            .reject_info_length = 0, .reason = reason, .ari = {}, .private_data = {}};
  copy_private(r.private_data, pd);
  c->last = r;  // a duplicate REQ gets the same answer
  c->has_last = true;
  set_state(*c, State::kClosed);
  c->deadline = UINT64_MAX;
  ++ctr_.rejects_sent;
  send(*c, r, c->tid);
  return 0;
}

int Manager::disconnect(uint32_t conn, std::span<const uint8_t> pd) {
  Conn* c = find(conn);
  if (!c) return EINVAL;
  if (c->state == State::kDreqRcvd) {  // answer the peer's DREQ
    if (pd.size() > kDrepUserPrivate) return EINVAL;
    wc::Drep r{.local_comm_id = c->id, .remote_comm_id = c->remote_id, .private_data = {}};
    copy_private(r.private_data, pd);
    c->last = r;
    c->has_last = true;
    send(*c, r, c->tid);
    enter_timewait(*c);
    return 0;
  }
  if (c->state == State::kDreqSent || c->state == State::kTimewait) return 0;
  if (c->state != State::kEstablished && c->state != State::kRepSent) return EINVAL;
  if (pd.size() > kDreqUserPrivate) return EINVAL;
  wc::Dreq r{.local_comm_id = c->id, .remote_comm_id = c->remote_id,
             .remote_qpn = c->peer.qpn, .private_data = {}};
  copy_private(r.private_data, pd);
  c->last = r;
  c->has_last = true;
  set_state(*c, State::kDreqSent);
  c->tid = new_tid();
  c->retries_left = cfg_.max_cm_retries;
  send(*c, r, c->tid);
  arm(*c, response_timeout_ns(c->peer_response_timeout));
  return 0;
}

int Manager::transport_lost(uint32_t conn) {
  Conn* c = find(conn);
  if (!c || (c->state != State::kEstablished && c->state != State::kDreqSent)) return EINVAL;
  if (c->state == State::kEstablished) {
    // A peer that is still there learns of the end from this DREQ; a dead one never answers.
    wc::Dreq r{.local_comm_id = c->id, .remote_comm_id = c->remote_id,
               .remote_qpn = c->peer.qpn, .private_data = {}};
    send(*c, r, new_tid());
  }
  c->has_last = false;
  enter_timewait(*c);
  if (!c->orphan) emit({.type = EventType::kDisconnected, .conn = c->id});
  return 0;
}

void Manager::destroy(uint32_t conn) {
  Conn* c = find(conn);
  if (!c) return;
  switch (c->state) {
    case State::kEstablished:
    case State::kDreqRcvd:
      disconnect(conn);
      [[fallthrough]];
    case State::kDreqSent:
    case State::kTimewait:
      c->orphan = true;  // finishes its release quietly, then goes
      return;
    case State::kReqRcvd:
    case State::kMraReqSent:
    case State::kRepRcvd:
      reject(conn, {});
      break;
    case State::kSidrReqRcvd:  // answered, and off the listener's backlog
      reject_sidr(conn, wc::SidrStatus::kRejected, {});
      break;
    case State::kReqSent:
    case State::kMraReqRcvd:
    case State::kRepSent: {
      // The kernel CM rejects a set-up it abandons with reason Timeout.
      wc::Rej r{.local_comm_id = c->id, .remote_comm_id = c->remote_id,
                .msg_rejected = c->state == State::kRepSent ? wc::MsgRef::kRep : wc::MsgRef::kReq,
                .reject_info_length = 0, .reason = uint16_t(wc::RejReason::kTimeout), .ari = {},
                .private_data = {}};
      ++ctr_.rejects_sent;
      send(*c, r, c->tid);
      break;
    }
    default:
      break;
  }
  leave_backlog(*c);
  conns_.erase(conn);
}

void Manager::leave_backlog(Conn& c) {
  if (!c.unfetched) return;
  c.unfetched = false;
  if (Listener* l = find_listener(c.listener)) --l->pending;
}

void Manager::request_taken(uint32_t conn) {
  if (Conn* c = find(conn)) leave_backlog(*c);
}

int Manager::notify_established(uint32_t conn) {
  Conn* c = find(conn);
  if (!c) return EINVAL;
  if (c->state == State::kEstablished) return EISCONN;
  if (c->state != State::kRepSent) return EINVAL;
  set_state(*c, State::kEstablished);
  c->deadline = UINT64_MAX;
  emit({.type = EventType::kEstablished, .conn = c->id, .peer = c->peer});
  return 0;
}

void Manager::shutdown() {
  std::vector<uint32_t> live;
  for (const auto& [id, c] : conns_) {
    if (!c.orphan) live.push_back(id);
  }
  for (uint32_t id : live) destroy(id);
}

int Manager::resolve_sidr(const ConnectArgs& a, uint32_t* conn) {
  if (a.params.private_data.size() > kSidrReqUserPrivate) return EINVAL;
  Conn& c = create(a.local, a.remote);
  c.port_space = a.port_space;
  c.service_id = wc::service_id(a.port_space, a.remote.port);
  c.mine = a.params;
  c.tid = new_tid();
  wc::SidrReq r{.request_id = c.id, .pkey = 0xffff, .service_id = c.service_id,
                .private_data = {}};
  const wc::IpCmHeader h{.version = 0, .ipv6 = a.local.ipv6, .src_port = a.local.port,
                         .src = a.local.ip, .dst = a.remote.ip};
  wc::write_ip_cm_header(h, r.private_data.data());
  copy_private(r.private_data, a.params.private_data, wc::kIpCmHeaderSize);
  c.last = r;
  c.has_last = true;
  set_state(c, State::kSidrReqSent);
  c.retries_left = cfg_.max_cm_retries;
  send(c, r, c.tid);
  arm(c, response_timeout_ns(cfg_.cm_response_timeout));
  *conn = c.id;
  return 0;
}

int Manager::answer_sidr(uint32_t conn, wc::SidrStatus status, uint32_t qpn, uint32_t qkey,
                         std::span<const uint8_t> pd) {
  Conn* c = find(conn);
  if (!c || c->state != State::kSidrReqRcvd) return EINVAL;
  if (pd.size() > kSidrRepUserPrivate) return EINVAL;
  wc::SidrRep r{.request_id = c->remote_id, .status = uint8_t(status), .info_length = 0,
                .qpn = qpn, .service_id = c->service_id, .qkey = qkey, .info = {},
                .private_data = {}};
  copy_private(r.private_data, pd);
  c->last = r;  // a duplicate SIDR_REQ gets the same answer
  c->has_last = true;
  set_state(*c, State::kClosed);
  leave_backlog(*c);
  if (status != wc::SidrStatus::kValid) ++ctr_.rejects_sent;
  send(*c, r, c->tid);
  return 0;
}

int Manager::accept_sidr(uint32_t conn, uint32_t qpn, uint32_t qkey,
                         std::span<const uint8_t> pd) {
  return answer_sidr(conn, wc::SidrStatus::kValid, qpn, qkey, pd);
}

int Manager::reject_sidr(uint32_t conn, wc::SidrStatus status, std::span<const uint8_t> pd) {
  return answer_sidr(conn, status, 0, 0, pd);
}

void Manager::enter_timewait(Conn& c) {
  set_state(c, State::kTimewait);
  // Long enough for any packet of the connection still in the network to die (IBA 12.9.9):
  // twice the path's packet lifetime.
  c.deadline = clock_.now_ns() + 2 * response_timeout_ns(cfg_.packet_lifetime);
}

// A response timeout: resend what is outstanding, or give the connection up.
void Manager::expire(Conn& c) {
  c.deadline = UINT64_MAX;
  if (c.state == State::kTimewait) {
    set_state(c, State::kClosed);
    if (!c.orphan) emit({.type = EventType::kTimewaitExit, .conn = c.id});
    return;
  }
  if (c.retries_left > 0 && c.has_last) {
    --c.retries_left;
    ++ctr_.retries;
    send(c, c.last, c.tid);
    arm(c, response_timeout_ns(c.state == State::kRepSent ? c.peer_response_timeout
                                                            : cfg_.cm_response_timeout));
    return;
  }
  ++ctr_.timeouts;
  if (c.state == State::kDreqSent) {  // the peer never answered: released all the same
    enter_timewait(c);
    if (!c.orphan) emit({.type = EventType::kDisconnected, .conn = c.id, .timed_out = true});
    return;
  }
  set_state(c, State::kClosed);
  emit({.type = EventType::kUnreachable, .conn = c.id, .timed_out = true});
}

void Manager::on_timer() {
  const uint64_t now = clock_.now_ns();
  std::vector<uint32_t> done;
  for (auto& [id, c] : conns_) {
    if (c.deadline <= now) expire(c);
    if (c.orphan && c.state == State::kClosed) done.push_back(id);
  }
  for (uint32_t id : done) conns_.erase(id);
  expire_parked(now);
}

size_t Manager::resend_pending_disconnects() {
  size_t n = 0;
  for (auto& [id, c] : conns_) {
    if (c.state != State::kDreqSent || !c.has_last) continue;
    ++ctr_.retries;
    send(c, c.last, c.tid);
    ++n;
  }
  return n;
}

size_t Manager::unanswered_disconnects() const {
  size_t n = 0;
  for (const auto& [id, c] : conns_) n += c.state == State::kDreqSent && c.has_last;
  return n;
}

uint64_t Manager::next_timer_ns() const {
  uint64_t t = UINT64_MAX;
  for (const auto& [id, c] : conns_) t = std::min(t, c.deadline);
  for (const Parked& p : parked_) t = std::min(t, p.until);
  return t;
}

}  // namespace vrnic::cm
