// The CM's receive side: each MAD matched to its connection and state, duplicates answered, the rest dropped and counted.
#include <algorithm>
#include <cerrno>

#include "cm/manager.h"

namespace vrnic::cm {

namespace wc = wire::cm;

template <size_t N>
static std::vector<uint8_t> user_data(const std::array<uint8_t, N>& pd, size_t from = 0) {
  return std::vector<uint8_t>(pd.begin() + from, pd.end());
}

Manager::Listener* Manager::find_listener(uint32_t id) {
  auto it = listeners_.find(id);
  return it == listeners_.end() ? nullptr : &it->second;
}

uint32_t Manager::match_listener(uint64_t sid, const Endpoint& to) {
  uint32_t wildcard = 0;
  for (auto& [id, l] : listeners_) {
    if (wc::service_id(l.port_space, l.port) != sid) continue;
    if (!l.wildcard && l.local.same_address(to)) return id;  // a specific address wins
    // An IPv6 wildcard takes IPv4 requests too unless it is IPv6-only (AFONLY).
    if (l.wildcard && (l.local.ipv6 == to.ipv6 || (l.local.ipv6 && !l.ipv6_only))) {
      wildcard = id;
    }
  }
  return wildcard;
}

void Manager::receive(const Endpoint& from, const Endpoint& to, std::span<const uint8_t> bytes) {
  wc::Mad mad;
  if (wc::parse_mad(bytes, mad) != wc::MadError::kOk) {
    ++ctr_.rx_malformed;
    return;
  }
  ++ctr_.rx[(mad.hdr.attr_id - 0x10) & 15];
  const uint64_t tid = mad.hdr.tid;
  std::visit(
      [&](const auto& m) {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, wc::Req>) on_req(from, to, tid, m);
        if constexpr (std::is_same_v<M, wc::Mra>) on_mra(from, m);
        if constexpr (std::is_same_v<M, wc::Rej>) on_rej(from, m);
        if constexpr (std::is_same_v<M, wc::Rep>) on_rep(from, tid, m);
        if constexpr (std::is_same_v<M, wc::Rtu>) on_rtu(from, m);
        if constexpr (std::is_same_v<M, wc::Dreq>) on_dreq(from, to, tid, m);
        if constexpr (std::is_same_v<M, wc::Drep>) on_drep(from, m);
        if constexpr (std::is_same_v<M, wc::SidrReq>) on_sidr_req(from, to, tid, m);
        if constexpr (std::is_same_v<M, wc::SidrRep>) on_sidr_rep(from, m);
      },
      mad.msg);
}

// A message naming our comm ID, from the peer of that connection (and, once known, naming
// the peer's comm ID too); anything else matches nothing.
Manager::Conn* Manager::match(const Endpoint& from, uint32_t our_id, uint32_t their_id) {
  Conn* c = find(our_id);
  if (!c || !c->remote.same_address(from) || (c->remote_id != 0 && c->remote_id != their_id)) {
    ++ctr_.rx_unmatched;
    return nullptr;
  }
  return c;
}

void Manager::reject_req(const Endpoint& from, const Endpoint& to, uint64_t tid,
                         uint32_t remote_id, wc::RejReason reason) {
  wc::Rej r{.local_comm_id = 0, .remote_comm_id = remote_id, .msg_rejected = wc::MsgRef::kReq,
            .reject_info_length = 0, .reason = uint16_t(reason), .ari = {}, .private_data = {}};
  ++ctr_.rejects_sent;
  send_to(to, from, r, tid);
}

// A REQ seen again: the peer missed our answer, or we are slow to give one (IBA 12.9.7).
void Manager::on_duplicate_req(Conn& c) {
  ++ctr_.duplicates;
  if (c.state == State::kReqRcvd) {  // the application has not accepted yet: MRA
    wc::Mra m{.local_comm_id = c.id, .remote_comm_id = c.remote_id,
              .msg_mraed = wc::MsgRef::kReq, .service_timeout = cfg_.mra_service_timeout,
              .private_data = {}};
    c.last = m;
    c.has_last = true;
    set_state(c, State::kMraReqSent);
    send(c, m, c.tid);
  } else if (c.has_last && (c.state == State::kMraReqSent || c.state == State::kRepSent ||
                            c.state == State::kClosed)) {
    send(c, c.last, c.tid);  // the MRA, REP or REJ again
  }
}

void Manager::on_req(const Endpoint& from, const Endpoint& to, uint64_t tid, const wc::Req& m,
                     bool may_park) {
  if (Conn* dup = find_by_remote(from, m.local_comm_id)) return on_duplicate_req(*dup);
  wc::IpCmHeader h;
  if (!wc::is_ip_service_id(m.service_id) || !wc::parse_ip_cm_header(m.private_data, h) ||
      h.ipv6 != from.ipv6) {
    ++ctr_.rx_malformed;
    return reject_req(from, to, tid, m.local_comm_id, wc::RejReason::kInvalidServiceId);
  }
  const uint32_t lid = match_listener(m.service_id, to);
  Listener* l = find_listener(lid);
  if (!l && may_park && park(from, to, tid, m, m.service_id, m.local_comm_id)) return;
  if (!l) return reject_req(from, to, tid, m.local_comm_id, wc::RejReason::kInvalidServiceId);
  const bool xrc = m.transport == 3 && m.extended_transport == 1;  // IBA 12.6.5
  if (m.transport > 1 && !xrc) {
    return reject_req(from, to, tid, m.local_comm_id, wc::RejReason::kInvalidTransportType);
  }
  if (l->pending >= l->backlog) {  // unanswered, as ucma leaves it: the resent REQ tries again
    ++ctr_.backlog_drops;
    return;
  }
  Endpoint local = to, remote = from;
  local.port = wc::service_port(m.service_id);
  remote.port = h.src_port;
  Conn& c = create(local, remote);
  c.remote_id = m.local_comm_id;
  c.listener = lid;
  c.port_space = wc::service_port_space(m.service_id);
  c.service_id = m.service_id;
  c.tid = tid;
  c.peer_response_timeout = m.local_cm_response_timeout;
  c.retries_left = m.max_cm_retries;
  Params& p = c.peer;
  p.qpn = m.local_qpn;
  p.starting_psn = m.starting_psn;
  p.responder_resources = m.responder_resources;
  p.initiator_depth = m.initiator_depth;
  p.retry_count = m.retry_count;
  p.rnr_retry_count = m.rnr_retry_count;
  p.path_mtu = m.path_mtu;
  p.srq = m.srq;
  p.transport = m.transport;
  p.local_ack_timeout = m.primary.local_ack_timeout;
  p.traffic_class = m.primary.traffic_class;
  p.hop_limit = m.primary.hop_limit;
  p.private_data = user_data(m.private_data, wc::kIpCmHeaderSize);
  set_state(c, State::kReqRcvd);
  c.unfetched = true;
  ++l->pending;
  emit({.type = EventType::kConnectRequest, .conn = c.id, .listener = c.listener,
        .peer = p, .local = local, .remote = remote, .port_space = c.port_space});
}

void Manager::on_mra(const Endpoint& from, const wc::Mra& m) {
  Conn* c = match(from, m.remote_comm_id, m.local_comm_id);
  if (!c) return;
  const bool for_req = m.msg_mraed == wc::MsgRef::kReq &&
                       (c->state == State::kReqSent || c->state == State::kMraReqRcvd);
  const bool for_rep = m.msg_mraed == wc::MsgRef::kRep && c->state == State::kRepSent;
  if (!for_req && !for_rep) {
    ++ctr_.rx_bad_state;
    return;
  }
  if (for_req) {
    c->remote_id = m.local_comm_id;
    set_state(*c, State::kMraReqRcvd);
  }
  // The peer promises an answer within its service timeout (IBA 12.6.6): wait that long.
  arm(*c, response_timeout_ns(m.service_timeout) +
              response_timeout_ns(for_req ? cfg_.cm_response_timeout : c->peer_response_timeout));
}

void Manager::on_rej(const Endpoint& from, const wc::Rej& m) {
  // A requester abandoning its REQ may not know our comm ID yet: found by its own.
  Conn* c = m.remote_comm_id == 0 ? find_by_remote(from, m.local_comm_id)
                                  : match(from, m.remote_comm_id, m.local_comm_id);
  if (!c) {
    if (m.remote_comm_id == 0) ++ctr_.rx_unmatched;
    return;
  }
  ++ctr_.rejects_received;
  switch (c->state) {
    case State::kReqSent:
    case State::kMraReqRcvd:
    case State::kReqRcvd:  // the requester gave up before our answer
    case State::kMraReqSent:
    case State::kRepSent:
    case State::kRepRcvd: {
      leave_backlog(*c);
      set_state(*c, State::kClosed);
      c->deadline = UINT64_MAX;
      Event ev{.type = EventType::kRejected, .conn = c->id, .reason = m.reason};
      ev.peer.private_data = user_data(m.private_data);
      emit(std::move(ev));
      return;
    }
    case State::kEstablished:
      enter_timewait(*c);
      emit({.type = EventType::kDisconnected, .conn = c->id});
      return;
    default:
      ++ctr_.rx_bad_state;
  }
}

void Manager::on_rep(const Endpoint& from, uint64_t tid, const wc::Rep& m) {
  Conn* c = match(from, m.remote_comm_id, m.local_comm_id);
  if (!c) return;
  if (c->state == State::kRepRcvd || c->state == State::kEstablished) {
    ++ctr_.duplicates;  // our RTU was lost: send it again (nothing to send before establish)
    if (c->state == State::kEstablished && c->has_last) send(*c, c->last, c->tid);
    return;
  }
  if (c->state != State::kReqSent && c->state != State::kMraReqRcvd) {
    ++ctr_.rx_bad_state;
    return;
  }
  c->remote_id = m.local_comm_id;
  set_state(*c, State::kRepRcvd);
  c->deadline = UINT64_MAX;
  Params& p = c->peer;
  p.qpn = m.local_qpn;
  p.starting_psn = m.starting_psn;
  p.responder_resources = m.responder_resources;
  p.initiator_depth = m.initiator_depth;
  p.rnr_retry_count = m.rnr_retry_count;
  p.srq = m.srq;
  p.private_data = user_data(m.private_data);
  emit({.type = EventType::kConnectResponse, .conn = c->id, .peer = p});
}

void Manager::on_rtu(const Endpoint& from, const wc::Rtu& m) {
  Conn* c = match(from, m.remote_comm_id, m.local_comm_id);
  if (!c) return;
  if (c->state == State::kEstablished) {
    ++ctr_.duplicates;
    return;
  }
  if (c->state != State::kRepSent) {
    ++ctr_.rx_bad_state;
    return;
  }
  set_state(*c, State::kEstablished);
  c->deadline = UINT64_MAX;
  Event ev{.type = EventType::kEstablished, .conn = c->id, .peer = c->peer};
  ev.peer.private_data = user_data(m.private_data);
  emit(std::move(ev));
}

void Manager::on_dreq(const Endpoint& from, const Endpoint& to, uint64_t tid,
                      const wc::Dreq& m) {
  Conn* c = match(from, m.remote_comm_id, m.local_comm_id);
  if (!c) {  // answered all the same, so a peer that lost our state is not left waiting
    send_to(to, from, wc::Drep{.local_comm_id = m.remote_comm_id,
                               .remote_comm_id = m.local_comm_id, .private_data = {}}, tid);
    return;
  }
  switch (c->state) {
    case State::kEstablished:
    case State::kRepSent: {
      set_state(*c, State::kDreqRcvd);
      c->deadline = UINT64_MAX;
      c->tid = tid;
      Event ev{.type = EventType::kDisconnected, .conn = c->id};
      ev.peer.private_data = user_data(m.private_data);
      if (!c->orphan) emit(std::move(ev));
      if (c->orphan) disconnect(c->id);
      return;
    }
    case State::kDreqSent:  // both ends disconnect at once: answer, and release
      c->tid = tid;
      send(*c, wc::Drep{.local_comm_id = c->id, .remote_comm_id = c->remote_id,
                        .private_data = {}}, tid);
      enter_timewait(*c);
      if (!c->orphan) emit({.type = EventType::kDisconnected, .conn = c->id});
      return;
    case State::kDreqRcvd:
      ++ctr_.duplicates;
      return;
    case State::kTimewait:
    case State::kClosed:
      ++ctr_.duplicates;  // our DREP was lost
      if (c->has_last) send(*c, c->last, tid);
      return;
    default:
      ++ctr_.rx_bad_state;
  }
}

void Manager::on_drep(const Endpoint& from, const wc::Drep& m) {
  Conn* c = match(from, m.remote_comm_id, m.local_comm_id);
  if (!c) return;
  if (c->state != State::kDreqSent) {
    ++ctr_.duplicates;
    return;
  }
  enter_timewait(*c);
  if (!c->orphan) emit({.type = EventType::kDisconnected, .conn = c->id});
}

void Manager::on_sidr_req(const Endpoint& from, const Endpoint& to, uint64_t tid,
                          const wc::SidrReq& m, bool may_park) {
  if (Conn* dup = find_by_remote(from, m.request_id)) {
    ++ctr_.duplicates;
    if (dup->state == State::kClosed && dup->has_last) send(*dup, dup->last, dup->tid);
    return;
  }
  wc::IpCmHeader h;
  uint32_t lid = 0;
  const bool well_formed = wc::parse_ip_cm_header(m.private_data, h) && h.ipv6 == from.ipv6;
  if (well_formed) {
    lid = match_listener(m.service_id, to);
  } else {
    ++ctr_.rx_malformed;
  }
  Listener* l = find_listener(lid);
  if (!l && well_formed && may_park && park(from, to, tid, m, m.service_id, m.request_id)) {
    return;
  }
  if (!l) {
    ++ctr_.rejects_sent;
    send_to(to, from, wc::SidrRep{.request_id = m.request_id,
                                  .status = uint8_t(wc::SidrStatus::kServiceIdNotSupported),
                                  .service_id = m.service_id}, tid);
    return;
  }
  if (l->pending >= l->backlog) {  // unanswered, as a REQ (on_req)
    ++ctr_.backlog_drops;
    return;
  }
  Endpoint local = to, remote = from;
  local.port = wc::service_port(m.service_id);
  remote.port = h.src_port;
  Conn& c = create(local, remote);
  c.remote_id = m.request_id;
  c.listener = lid;
  c.port_space = wc::service_port_space(m.service_id);
  c.service_id = m.service_id;
  c.tid = tid;
  set_state(c, State::kSidrReqRcvd);
  c.peer.private_data = user_data(m.private_data, wc::kIpCmHeaderSize);
  c.unfetched = true;
  ++l->pending;
  emit({.type = EventType::kConnectRequest, .conn = c.id, .listener = c.listener,
        .peer = c.peer, .local = local, .remote = remote, .port_space = c.port_space,
        .sidr = true});
}

void Manager::on_sidr_rep(const Endpoint& from, const wc::SidrRep& m) {
  Conn* c = match(from, m.request_id, 0);
  if (!c) return;
  if (c->state != State::kSidrReqSent) {
    ++ctr_.duplicates;
    return;
  }
  set_state(*c, State::kClosed);
  c->deadline = UINT64_MAX;
  Event ev{.conn = c->id, .reason = m.status};
  ev.peer.private_data = user_data(m.private_data);
  if (m.status == uint8_t(wc::SidrStatus::kValid)) {
    ev.type = EventType::kEstablished;
    ev.peer.qpn = m.qpn;
    ev.peer.qkey = m.qkey;
  } else {
    ev.type = EventType::kUnreachable;  // as the kernel's RDMA CM reports a failed SIDR
    ++ctr_.rejects_received;
  }
  emit(std::move(ev));
}

}  // namespace vrnic::cm
