// The CM's events as rdma_cm events: new ids for connection requests, QPs moved on a reply, parameters as the kernel CM reports them.
#include <arpa/inet.h>

#include <cerrno>
#include <cstring>

#include "rdmacm/auth.h"
#include "rdmacm/state.h"
#include "wire/gid.h"

namespace vrnic::rdmacm {
namespace {

bool is_ud(const Id* id) { return id->id.ps == RDMA_PS_UDP || id->id.ps == RDMA_PS_IPOIB; }

// A connection's parameters seen from the receiving side: what the peer offers as responder
// resources is this side's initiator depth and the other way round (as the kernel's CM
// reports REQ and REP).
void fill_conn(rdma_conn_param& c, const cm::Params& peer) {
  c.responder_resources = peer.initiator_depth;
  c.initiator_depth = peer.responder_resources;
  c.flow_control = 1;
  c.retry_count = peer.retry_count;
  c.rnr_retry_count = peer.rnr_retry_count;
  c.srq = peer.srq;
  c.qp_num = peer.qpn;
}

// The address handle attributes to reach the peer of a UD id.
void fill_ah(ibv_ah_attr& ah, const cm::Endpoint& peer, uint8_t tos) {
  ah = {};
  ah.is_global = 1;
  ah.port_num = 1;
  ah.grh.sgid_index = 0;
  ah.grh.hop_limit = 64;
  ah.grh.traffic_class = tos;
  const auto gid = wire::gid_of_ip(peer.ip, peer.ipv6);
  std::memcpy(ah.grh.dgid.raw, gid.data(), 16);
}

EventBox* box_of(rdma_cm_event_type type, int status = 0) {
  auto* b = new EventBox();
  b->ev.event = type;
  b->ev.status = status;
  return b;
}

// The kernel CMA's cma_ib_check_req_qp_type: a REQ's transport must be the listener's QP type
// and a SIDR_REQ needs a UD listener; another request is refused (REJ 28, SIDR_REP Rejected).
bool request_fits(const Id* listener, const cm::Event& ev) {
  const ibv_qp_type want = listener->id.qp_type;
  if (ev.sidr) return want == IBV_QPT_UD;
  switch (ev.peer.transport) {
    case 0: return want == IBV_QPT_RC;
    case 1: return want == IBV_QPT_UC;
    case 3: return want == IBV_QPT_XRC_RECV;  // an XRC initiator's REQ, for an XRC target
    default: return false;
  }
}

// A connection request: a new id on the listener's channel, with the request's addresses.
void on_request(Service& s, Id* parent, const cm::Event& ev) {
  auto* child = new Id();
  child->id.verbs = s.context();
  child->id.context = parent->id.context;
  child->id.ps = parent->id.ps;
  child->id.port_num = 1;
  child->id.qp_type = parent->id.qp_type;
  child->channel = parent->channel;
  child->id.channel = parent->id.channel;
  child->conn = ev.conn;
  child->peer = ev.peer;
  child->listen_parent = parent;
  child->passive = true;
  child->state = IdState::kConnectRequest;
  child->tos = parent->tos;
  child->ack_timeout = parent->ack_timeout;
  sockaddr_of(ev.local, child->id.route.addr.src_storage);
  sockaddr_of(ev.remote, child->id.route.addr.dst_storage);
  fill_ib_addr(child);
  s.by_conn[ev.conn] = child;
  EventBox* b = box_of(RDMA_CM_EVENT_CONNECT_REQUEST);
  b->ev.listen_id = &parent->id;
  b->private_data = ev.peer.private_data;
  if (is_ud(child)) {
    b->ev.param.ud.qp_num = ev.peer.qpn;
  } else {
    fill_conn(b->ev.param.conn, ev.peer);
  }
  s.deliver(child, b);
}

// ESTABLISHED: on the active side the REP's parameters and private data; on the passive side
// nothing (the kernel CMA reports the RTU with an empty event); for UD the address, QPN and
// Q_Key the SIDR reply gave.
void on_established(Service& s, Id* id, const cm::Event& ev) {
  id->state = IdState::kConnected;
  if (id->quiet_establish) return;  // rdma_establish: no event on the active side
  EventBox* b = box_of(RDMA_CM_EVENT_ESTABLISHED);
  if (id->passive) {
    s.deliver(id, b);
    return;
  }
  b->private_data = ev.peer.private_data;
  if (is_ud(id)) {
    b->ev.param.ud.qp_num = ev.peer.qpn;
    b->ev.param.ud.qkey = ev.peer.qkey;
    cm::Endpoint peer;
    endpoint_of(&id->id.route.addr.dst_addr, peer);
    fill_ah(b->ev.param.ud.ah_attr, peer, id->tos);
  } else {
    fill_conn(b->ev.param.conn, id->peer);
  }
  s.deliver(id, b);
}

}  // namespace

// REP: with a QP on the id, it goes to RTR and RTS and the RTU leaves (ESTABLISHED follows);
// without one the program gets CONNECT_RESPONSE and calls rdma_establish itself.
void handle_connect_response(Service& s, Id* id, const cm::Event& reply) {
  cm::Event ev = reply;
  // Authenticated mode: a REP without the peer's share is refused (REJ, consumer reject).
  if (auth_mode(s) && !is_ud(id) && !auth_take_share(ev.peer.private_data, id->auth.peer_pk)) {
    s.manager().reject(id->conn, {});
    id->state = IdState::kDisconnected;
    s.deliver(id, box_of(RDMA_CM_EVENT_REJECTED,
                         static_cast<int>(wire::cm::RejReason::kConsumerReject)));
    return;
  }
  if (auth_mode(s) && !is_ud(id)) {
    if (int e = auth_complete(s, id, id->mine.qpn)) {
      s.manager().reject(id->conn, {});
      s.deliver(id, box_of(RDMA_CM_EVENT_CONNECT_ERROR, -e));
      return;
    }
  }
  id->peer = ev.peer;
  if (id->id.qp == nullptr) {
    EventBox* b = box_of(RDMA_CM_EVENT_CONNECT_RESPONSE);
    b->private_data = ev.peer.private_data;
    fill_conn(b->ev.param.conn, ev.peer);
    s.deliver(id, b);
    return;
  }
  // The negotiated depths: this side's responder resources are the peer's initiator depth.
  id->mine.responder_resources = ev.peer.initiator_depth;
  id->mine.initiator_depth = ev.peer.responder_resources;
  id->mine.rnr_retry_count = ev.peer.rnr_retry_count;
  if (qp_to_rtr(id) != 0 || qp_to_rts(id) != 0) {
    // librdmacm's ucma_process_conn_resp: the QP to ERR, status -1 (its errno stays behind).
    qp_to_error(id);
    s.manager().reject(id->conn, {});
    s.deliver(id, box_of(RDMA_CM_EVENT_CONNECT_ERROR, -1));
    return;
  }
  s.manager().establish(id->conn);  // its ESTABLISHED comes back through on_event
}

void Service::on_event(const cm::Event& ev) {
  if (ev.type == cm::EventType::kConnectRequest) {
    auto it = by_listener.find(ev.listener);
    if (it == by_listener.end() || !request_fits(it->second, ev)) {
      if (ev.sidr) {
        manager_->reject_sidr(ev.conn, wire::cm::SidrStatus::kRejected, {});
      } else {
        manager_->reject(ev.conn, {});
      }
      return;
    }
    if (is_ud(it->second) || !auth_mode(*this)) return on_request(*this, it->second, ev);
    // Authenticated mode: a request without the peer's share is refused before the program
    // sees it (the peer runs without the mode, or is no vrnic device).
    cm::Event req = ev;
    std::array<uint8_t, 32> peer_pk{};
    if (!auth_take_share(req.peer.private_data, peer_pk)) {
      manager_->reject(ev.conn, {});
      return;
    }
    on_request(*this, it->second, req);
    by_conn[ev.conn]->auth.peer_pk = peer_pk;
    return;
  }
  auto it = by_conn.find(ev.conn);
  if (it == by_conn.end()) return;  // the id is gone
  Id* id = it->second;
  switch (ev.type) {
    case cm::EventType::kConnectResponse:
      handle_connect_response(*this, id, ev);
      return;
    case cm::EventType::kEstablished: {
      if (is_ud(id)) id->peer = ev.peer;
      cm::Event shown = ev;  // the REP's share is vrnic's, not the program's
      std::array<uint8_t, 32> share{};
      if (!is_ud(id) && auth_mode(*this)) auth_take_share(shown.peer.private_data, share);
      on_established(*this, id, shown);
      return;
    }
    case cm::EventType::kRejected: {  // status: the REJ's reason; the QP to ERR (librdmacm)
      id->state = IdState::kDisconnected;
      if (id->id.qp) qp_to_error(id);
      EventBox* b = box_of(RDMA_CM_EVENT_REJECTED, ev.reason);
      b->private_data = ev.peer.private_data;
      deliver(id, b);
      return;
    }
    case cm::EventType::kUnreachable: {  // -ETIMEDOUT, or a SIDR_REP's status
      id->state = IdState::kDisconnected;
      EventBox* b = box_of(RDMA_CM_EVENT_UNREACHABLE, ev.timed_out ? -ETIMEDOUT : ev.reason);
      if (is_ud(id)) b->private_data = ev.peer.private_data;
      deliver(id, b);
      return;
    }
    case cm::EventType::kDisconnected:  // 0, or -ETIMEDOUT for a DREQ never answered
      id->state = IdState::kDisconnected;
      id->disconnected = true;
      deliver(id, box_of(RDMA_CM_EVENT_DISCONNECTED, ev.timed_out ? -ETIMEDOUT : 0));
      return;
    case cm::EventType::kTimewaitExit:  // the kernel CMA's: only after DISCONNECTED
      if (id->disconnected) deliver(id, box_of(RDMA_CM_EVENT_TIMEWAIT_EXIT));
      return;
    case cm::EventType::kConnectRequest:
      return;
  }
}

}  // namespace vrnic::rdmacm
