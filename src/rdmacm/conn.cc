// Connections: rdma_connect, rdma_accept, rdma_reject, rdma_establish, rdma_disconnect, rdma_notify, ECE.
#include <cerrno>
#include <cstring>
#include <random>

#include "rdmacm/auth.h"
#include "rdmacm/state.h"

namespace vrnic::rdmacm {
namespace {

uint32_t random_psn() {
  static thread_local std::mt19937 rng{std::random_device{}()};
  return rng() & 0xffffff;
}

// RDMA_MAX_RESP_RES / RDMA_MAX_INIT_DEPTH (0xff) ask for the device's maximum; other values
// are held to it.
uint8_t clamp_depth(uint8_t asked, int device_max) {
  const int max = std::min(device_max, 255);
  return static_cast<uint8_t>(asked == 0xff ? max : std::min<int>(asked, max));
}

bool is_ud(const Id* id) { return id->id.qp_type == IBV_QPT_UD; }

std::span<const uint8_t> private_of(const void* p, uint8_t len) {
  return {static_cast<const uint8_t*>(p), p ? len : 0u};
}

// What this side offers in a REQ, from conn_param and the id's QP (librdmacm's rules).
cm::Params offer(Service& s, Id* id, const rdma_conn_param* cp) {
  ibv_device_attr da{};
  ibv_query_device(s.context(), &da);
  ibv_port_attr pa{};
  ibv_query_port(s.context(), 1, &pa);
  cm::Params p;
  p.qpn = id->id.qp ? id->id.qp->qp_num : (cp ? cp->qp_num : 0);
  p.starting_psn = random_psn();
  p.responder_resources = clamp_depth(cp ? cp->responder_resources : 0xff, da.max_qp_rd_atom);
  p.initiator_depth = clamp_depth(cp ? cp->initiator_depth : 0xff, da.max_qp_init_rd_atom);
  p.retry_count = std::min<uint8_t>(cp ? cp->retry_count : 7, 7);
  p.rnr_retry_count = std::min<uint8_t>(cp ? cp->rnr_retry_count : 7, 7);
  p.srq = id->id.srq != nullptr || (cp && cp->srq);
  p.path_mtu = static_cast<uint8_t>(pa.active_mtu);
  p.local_ack_timeout = id->ack_timeout;
  p.traffic_class = id->tos;
  // REQ transport service type: 0 RC, 1 UC, 3 = the extended type, which is XRC (IBA 12.6.5).
  p.transport = id->id.qp_type == IBV_QPT_UC ? 1 : id->id.qp_type == IBV_QPT_XRC_SEND ? 3 : 0;
  return p;
}

// librdmacm's ucma_valid_param (TCP port space only): without a QP the parameters are
// needed (the QP number); depths above the device's (other than RDMA_MAX_*) are refused.
bool valid_param(Service& s, const Id* id, const rdma_conn_param* cp) {
  if (id->id.ps != RDMA_PS_TCP) return true;
  if (!cp) return id->id.qp != nullptr;
  ibv_device_attr da{};
  ibv_query_device(s.context(), &da);
  return (cp->responder_resources == RDMA_MAX_RESP_RES ||
          cp->responder_resources <= da.max_qp_rd_atom) &&
         (cp->initiator_depth == RDMA_MAX_INIT_DEPTH ||
          cp->initiator_depth <= da.max_qp_init_rd_atom);
}

}  // namespace
}  // namespace vrnic::rdmacm

using namespace vrnic::rdmacm;

RDMACM_EXPORT int rdma_connect(rdma_cm_id* cm_id, rdma_conn_param* cp) {
  if (!cm_id) return fail(EINVAL);
  Service& s = Service::get();
  Id* id = to_id(cm_id);
  {
    std::lock_guard<std::mutex> g(s.mu);
    if (!valid_param(s, id, cp)) return fail(EINVAL);
    if (id->state != IdState::kRouteResolved) return fail(EINVAL);
    vrnic::cm::ConnectArgs a;
    vrnic::rdmacm::endpoint_of(&cm_id->route.addr.src_addr, a.local);
    vrnic::rdmacm::endpoint_of(&cm_id->route.addr.dst_addr, a.remote);
    a.port_space = static_cast<uint16_t>(cm_id->ps);
    a.params = offer(s, id, cp);
    const auto pd = cp ? private_of(cp->private_data, cp->private_data_len)
                       : std::span<const uint8_t>{};
    a.params.private_data.assign(pd.begin(), pd.end());
    if (is_ud(id)) {
      a.params.qkey = kUdpQkey;
      if (pd.size() > vrnic::cm::kSidrReqUserPrivate) return fail(EINVAL);
    } else if (pd.size() > vrnic::cm::kReqUserPrivate) {
      return fail(EINVAL);
    } else if (auth_mode(s)) {
      if (int e = auth_offer(id, a.params.private_data)) return fail(e);  // the REQ's share
    }
    id->mine = a.params;
    uint32_t conn = 0;
    const int err = is_ud(id) ? s.manager().resolve_sidr(a, &conn) : s.manager().connect(a, &conn);
    if (err) return fail(err);
    id->conn = conn;
    s.by_conn[conn] = id;
    id->state = IdState::kConnecting;
  }
  s.kick();
  return id->channel->sync ? wait_sync(id) : 0;
}

// Passive side: with a QP on the id it goes to RTR and RTS with the negotiated values, then
// the REP (or the SIDR reply) leaves.
RDMACM_EXPORT int rdma_accept(rdma_cm_id* cm_id, rdma_conn_param* cp) {
  if (!cm_id) return fail(EINVAL);
  Service& s = Service::get();
  Id* id = to_id(cm_id);
  {
    std::lock_guard<std::mutex> g(s.mu);
    if (!valid_param(s, id, cp)) return fail(EINVAL);
    if (id->state == IdState::kAccepting && !cm_id->qp) {
      // The kernel's accept fails for a REP already sent and rejects the set-up (with a QP,
      // librdmacm's move of it to RTR fails first, leaving the connection be).
      s.manager().reject(id->conn, {});
      s.kick();
      return fail(EINVAL);
    }
    if (id->state != IdState::kConnectRequest) return fail(EINVAL);
    const auto pd = cp ? private_of(cp->private_data, cp->private_data_len)
                       : std::span<const uint8_t>{};
    if (is_ud(id)) {
      if (!cm_id->qp && !cp) return fail(EINVAL);
      const uint32_t qpn = cm_id->qp ? cm_id->qp->qp_num : cp->qp_num;
      const int err = s.manager().accept_sidr(id->conn, qpn, kUdpQkey, pd);
      if (err) return fail(err);
      id->state = IdState::kConnected;
      return 0;
    }
    if (pd.size() > vrnic::cm::kRepUserPrivate) return fail(EINVAL);
    // Defaults, as librdmacm: the depths the request asked for.
    rdma_conn_param dflt{};
    dflt.responder_resources = id->peer.initiator_depth;
    dflt.initiator_depth = id->peer.responder_resources;
    dflt.rnr_retry_count = 7;
    id->mine = offer(s, id, cp ? cp : &dflt);
    id->mine.retry_count = id->peer.retry_count;  // the REQ's, for both ends (IBA 12.7.38)
    id->mine.path_mtu = std::min(id->mine.path_mtu, id->peer.path_mtu);
    id->mine.private_data.assign(pd.begin(), pd.end());
    if (auth_mode(s)) {  // the keys on the QP before it takes a packet; the REP's share
      const uint32_t qpn = cm_id->qp ? cm_id->qp->qp_num : (cp ? cp->qp_num : 0);
      if (int e = auth_accept(s, id, qpn, id->mine.private_data)) return fail(e);
    }
    if (cm_id->qp && (qp_to_rtr(id) != 0 || qp_to_rts(id) != 0)) return -1;
    const int err = s.manager().accept(id->conn, id->mine);
    if (err) return fail(err);
    id->state = IdState::kAccepting;
  }
  s.kick();
  return id->channel->sync ? wait_sync(id) : 0;
}

namespace {

// The kernel CM's ib_send_cm_rej (SIDR_REP Rejected on a UD id); librdmacm's reason 0 is the
// consumer's (28).
int reject_with(rdma_cm_id* cm_id, const void* private_data, uint8_t len, uint16_t reason) {
  if (!cm_id) return fail(EINVAL);
  Service& s = Service::get();
  Id* id = to_id(cm_id);
  std::lock_guard<std::mutex> g(s.mu);
  if (!id->conn) return fail(EINVAL);
  const auto pd = private_of(private_data, len);
  int err;
  if (is_ud(id)) {
    if (pd.size() > vrnic::cm::kSidrRepUserPrivate) return fail(EINVAL);
    err = s.manager().reject_sidr(id->conn, vrnic::wire::cm::SidrStatus::kRejected, pd);
  } else {
    if (pd.size() > vrnic::cm::kRejUserPrivate) return fail(EINVAL);
    err = s.manager().reject(id->conn, pd, reason);
  }
  s.kick();
  return err ? fail(err) : 0;
}

}  // namespace

RDMACM_EXPORT int rdma_reject(rdma_cm_id* cm_id, const void* private_data, uint8_t len) {
  return reject_with(cm_id, private_data, len,
                     uint16_t(vrnic::wire::cm::RejReason::kConsumerReject));
}

// IBTA's reason 35, vendor option not supported, as librdmacm sends it.
RDMACM_EXPORT int rdma_reject_ece(rdma_cm_id* cm_id, const void* private_data, uint8_t len) {
  return reject_with(cm_id, private_data, len, 35);
}

// After CONNECT_RESPONSE on an id without a QP (the program moved its QP itself): the RTU.
// As with the kernel CM, the active side gets no ESTABLISHED for it (the passive side gets
// its own on the RTU), and a call before the REP fails and abandons the set-up.
RDMACM_EXPORT int rdma_establish(rdma_cm_id* cm_id) {
  if (!cm_id || cm_id->qp) return fail(EINVAL);
  Service& s = Service::get();
  Id* id = to_id(cm_id);
  std::lock_guard<std::mutex> g(s.mu);
  if (!id->conn) return fail(EINVAL);
  id->quiet_establish = true;
  const int err = s.manager().establish(id->conn);
  if (err) s.manager().reject(id->conn, {});
  s.kick();
  return err ? fail(err) : 0;
}

// The QP goes to ERR (its WRs flush), then the DREQ leaves, or the DREP that answers one. As
// the kernel CMA, 0 whenever the id has a CM exchange behind it (connected, rejected, being
// set up or listening), whatever the CM could still send; EINVAL for an id that never had
// one. The DISCONNECTED this side gets (on the DREP, or -ETIMEDOUT when the DREQ's resends
// run out) is the one a synchronous id waits for here.
RDMACM_EXPORT int rdma_disconnect(rdma_cm_id* cm_id) {
  if (!cm_id || !cm_id->verbs) return fail(EINVAL);
  Service& s = Service::get();
  Id* id = to_id(cm_id);
  {
    std::lock_guard<std::mutex> g(s.mu);
    if (cm_id->qp && qp_to_error(id) != 0) return -1;
    if (!id->conn && !id->listener) return fail(EINVAL);
    if (id->conn && !is_ud(id)) s.manager().disconnect(id->conn);
  }
  s.kick();
  return id->channel->sync ? wait_sync(id) : 0;
}

// IBV_EVENT_COMM_EST on a QP whose RTU is late: the kernel CM takes it as the RTU
// (ESTABLISHED follows); EISCONN once established. IBV_EVENT_PATH_MIG: accepted on an
// established connection (the kernel's cm_migrate; a RoCE path has no alternate to move to).
// EINVAL without a connection, or for any other event.
RDMACM_EXPORT int rdma_notify(rdma_cm_id* cm_id, ibv_event_type event) {
  if (!cm_id) return fail(EINVAL);
  Service& s = Service::get();
  Id* id = to_id(cm_id);
  std::lock_guard<std::mutex> g(s.mu);
  if (!id->conn) return fail(EINVAL);
  if (event == IBV_EVENT_PATH_MIG) {
    return s.manager().state(id->conn) == vrnic::cm::State::kEstablished ? 0 : fail(EINVAL);
  }
  if (event != IBV_EVENT_COMM_EST) return fail(EINVAL);
  const int err = s.manager().notify_established(id->conn);
  s.kick();
  return err ? fail(err) : 0;
}

// Enhanced Connection Establishment, kept in librdmacm itself: the local options are held
// (before the id has a QP), and the peer's read back. vrnic's CM carries no ECE, so the peer's
// are those of a peer without it (vendor ID 0), as librdmacm reports a kernel that has none.
RDMACM_EXPORT int rdma_set_local_ece(rdma_cm_id* cm_id, ibv_ece* ece) {
  if (!cm_id || cm_id->qp || !ece || !ece->vendor_id || ece->comp_mask) return fail(EINVAL);
  to_id(cm_id)->local_ece = *ece;
  return 0;
}

RDMACM_EXPORT int rdma_get_remote_ece(rdma_cm_id* cm_id, ibv_ece* ece) {
  if (!cm_id || cm_id->qp || !ece) return fail(EINVAL);
  *ece = {};
  return 0;
}
