// qp_transition: checks each QP state change against the state diagram and does what it implies.
#include "engine/qp_transition.h"

#include <cerrno>

#include <algorithm>

namespace vrnic::engine {

namespace {

// RESET (10.3.1): the work queues are emptied and the QP forgets everything of the connection
// it served: requester, responder and ACK queue, timers, congestion state. Its completions
// still in its CQs go too, as mlx5's provider cleans them (mlx5_modify_qp, __mlx5_cq_clean),
// so a recovered QP's consumer polls only what the new connection completes. An XRC target
// completes into the CQ of the SRQ each request names, not a CQ of its own: nothing to clean
// (mlx5: its recv_cq is NULL).
void enter_reset(Core& c, Qp& qp) {
  c.inflight -= qp.req.counted_inflight;
  if (qp.req.budget_wait)
    c.budget_waiters.erase(std::remove(c.budget_waiters.begin(), c.budget_waiters.end(), &qp),
                           c.budget_waiters.end());
  qp.sq.clear();
  qp.rq.clear();
  qp.req = RequesterState{};
  ResponderState fresh;  // keeps the ACK queue's storage; RTR sizes it anew
  fresh.ack_queue = std::move(qp.resp.ack_queue);
  fresh.ack_queue.clear();
  qp.resp = std::move(fresh);
  qp.cc = CongestionState{};
  qp.sq_drain_notify = false;
  if (qp.type == QpType::kXrcTgt) return;
  if (qp.send_cq != nullptr) qp.send_cq->remove_qp(qp.qpn);
  if (qp.recv_cq != nullptr && qp.recv_cq != qp.send_cq) qp.recv_cq->remove_qp(qp.qpn);
}

// RTR (10.3.1): the responder starts at the receive PSN with an empty ACK queue.
void enter_rtr(Qp& qp) {
  qp.resp.started = true;
  qp.resp.epsn = qp.attr.rq_psn;
  qp.resp.msn = 0;
  qp.resp.nak_sent = false;
  qp.resp.ack_queue.reset(qp.attr.max_dest_rd_atomic ? qp.attr.max_dest_rd_atomic : 1);
}

// RTS (10.3.1): from RTR the requester starts at the send PSN with full retry counts; from
// SQD or SQE it goes on where it stopped.
void enter_rts(Core& c, Qp& qp, QpState from) {
  if (from == QpState::kRtr) {
    RequesterState& r = qp.req;
    r = RequesterState{};
    r.started = true;
    r.next_psn = r.next_new_psn = r.una = r.high_psn = r.asked_end = qp.attr.sq_psn;
    r.retry_left = qp.attr.retry_cnt;
    r.rnr_left = qp.attr.rnr_retry;
  }
  c.mark_tx_ready(qp);
}

// ERR (10.3.1, 11.6.2): timers stop and every outstanding WQE completes with WR_FLUSH_ERR.
void enter_err(Core& c, Qp& qp) {
  c.publish_qp(qp);
  c.recount_inflight(qp);
  qp.req.ack_deadline = 0;
  qp.req.rnr_deadline = 0;
  qp.resp.ack_pending = false;
  qp.resp.op = ResponderState::Op::kNone;
  c.flush_queues(qp);
  // A QP on an SRQ takes no more of its WQEs from now on (IBA 11.6.3, last WQE reached). An
  // XRC target's srq is only the one its last request named, not an SRQ it is attached to.
  if (qp.srq != nullptr && qp.type != QpType::kXrcTgt)
    c.async_event(AsyncEventType::kQpLastWqeReached, qp.user_context);
}

}  // namespace

Errno qp_transition(Core& c, Qp& qp, QpState to, QpCause cause, uint32_t mask) {
  const QpState from = qp.state();
  if (!transition_allowed(qp.type, from, to, cause)) return EINVAL;
  // RTS -> RTS, SQD -> SQD, ...: attributes only. (RESET -> RESET resets again.)
  if (cause == QpCause::kModify && to == from && to != QpState::kReset) return 0;
  // Direct copies submitted before an error complete (or fail) first.
  if (to == QpState::kErr) c.direct_flush();
  qp.attr.qp_state = to;
  switch (to) {
    case QpState::kReset: enter_reset(c, qp); break;
    case QpState::kInit: break;
    case QpState::kRtr: enter_rtr(qp); break;
    case QpState::kRts: enter_rts(c, qp, from); break;
    case QpState::kSqd:
      // 11.2.4.2: the consumer asks for the SQ drained event with this transition.
      qp.sq_drain_notify = (mask & kAttrEnSqdAsyncNotify) != 0;
      c.mark_tx_ready(qp);  // reports the drain at once if nothing is outstanding
      break;
    case QpState::kSqe: qp.req.rnr_deadline = 0; break;  // the send queue stops
    case QpState::kErr: enter_err(c, qp); break;
    case QpState::kUnknown: break;  // refused by transition_allowed
  }
  return 0;
}

}  // namespace vrnic::engine
