// Device::Impl: the object tables and the end-of-call work (ACKs, sends, direct copies).
#pragma once
#include <algorithm>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/core.h"
#include "engine/device.h"
#include "engine/icrc_peers.h"
#include "engine/names.h"
#include "engine/requester.h"
#include "engine/responder.h"
#include "engine/srq.h"
#include "wire/psn.h"

namespace vrnic::engine {

struct Device::Impl {
  Impl(const DeviceConfig& cfg, PacketPort& port, Clock& clock, HostMemory& host,
       EventSink& events)
      : core(cfg, port, clock, host, events) {
    core.tx.set_icrc(cfg.icrc);
    icrc_peers.set_checked(cfg.icrc);
  }

  Core core;
  IcrcPeers icrc_peers;
  std::vector<std::unique_ptr<Pd>> pds;
  std::vector<std::unique_ptr<Cq>> cqs;
  std::unordered_map<uint32_t, std::unique_ptr<Qp>> qps;  // owns them; walked in this order
  NameTable<Qp*, nullptr> qp_by_qpn;  // finds them: one cell, not a bucket and a chain
  std::vector<std::unique_ptr<Srq>> srqs;
  std::vector<std::unique_ptr<Xrcd>> xrcds;
  uint32_t next_srqn = 1;
  uint32_t next_pd_handle = 1;
  RecentNames recent_qpns;  // QPNs destroyed lately: not handed out again soon (new_qp)
  std::vector<Qp*> timer_due;  // on_timer's scratch: the QPs it runs the timers of

  Qp* find_qp(uint32_t qpn) const { return qp_by_qpn.find(qpn); }
  void add_qp(std::unique_ptr<Qp> qp) {
    qp_by_qpn.insert(qp->qpn, qp.get());
    qps.emplace(qp->qpn, std::move(qp));
  }
  bool has_pd(const Pd* pd) const {
    return std::any_of(pds.begin(), pds.end(), [&](auto& p) { return p.get() == pd; });
  }
  bool has_cq(const Cq* cq) const {
    return std::any_of(cqs.begin(), cqs.end(), [&](auto& c) { return c.get() == cq; });
  }
  bool has_srq(const Srq* srq) const {
    return std::any_of(srqs.begin(), srqs.end(), [&](auto& s) { return s.get() == srq; });
  }
  bool has_xrcd(const Xrcd* x) const {
    return std::any_of(xrcds.begin(), xrcds.end(), [&](auto& p) { return p.get() == x; });
  }
  // An XRC SRQ being destroyed: its number stops resolving, target QPs let go of it (xrc.cc).
  void forget_xrc_srq(Srq& srq);

  // Sends what the engine call produced: coalesced ACKs, then requester packets; performs
  // the direct copies submitted unless they are held for a batch. ACKs that are held, or
  // may be, are settled after the rest (settle_acks).
  void finish() {
    const bool acks_wait = core.held_acks_until != 0 || core.hold_acks_ns != 0;
    for (;;) {
      if (!acks_wait) flush_acks();
      for (size_t i = 0; i < core.tx_ready.size(); ++i) requester_progress(core, *core.tx_ready[i]);
      core.tx_ready.clear();
      wake_budget_waiters();
      if (core.direct_hold || core.direct_ops.empty()) break;
      core.direct_flush();  // makes the QPs ready: WQEs behind the copies may go now
    }
    if (acks_wait) settle_acks();
    core.send_tx();
    core.tx_mark = core.ctr.tx_packets;
    core.acks_mark = core.acks_queued;
  }
  // Sends the held ACKs now (Device::release_acks; before a QP changes state or goes).
  void release_held_acks() {
    if (core.held_acks_until == 0) return;
    if (core.now() >= core.held_acks_until) note_unanswered();  // the runtime saw it run out
    flush_acks();
    core.send_tx();
    core.tx_mark = core.ctr.tx_packets;
  }
  void flush_acks() {
    for (size_t i = 0; i < core.ack_pending.size(); ++i)
      responder_flush_ack(core, *core.ack_pending[i]);
    core.ack_pending.clear();
    core.held_acks_until = 0;
  }
  // Held ACKs wait while the device sends nothing else: a receive that may hold and made
  // only ACKs holds them (until hold_acks_ns from now, within each QP's ACK timeout), and a
  // call that makes no packet and no ACK leaves them held. Anything else lets them go, after
  // the packets this call made (the program's answer first: its peer, waiting for the ACK,
  // then has the answer too).
  void settle_acks() {
    const bool sent = core.ctr.tx_packets != core.tx_mark;
    const bool new_acks = core.acks_queued != core.acks_mark;
    const bool holds = core.hold_acks_ns != 0 || (core.held_acks_until != 0 && !new_acks);
    if (holds && !sent) release_unanswered();
    const bool waiting = std::any_of(core.ack_pending.begin(), core.ack_pending.end(),
                                     [](const Qp* qp) { return qp->resp.ack_pending; });
    if (!waiting || sent || !holds) return flush_acks();
    if (core.held_acks_until == 0) core.held_acks_until = core.now() + ack_hold_bound();
    core.note_deadline(core.held_acks_until);
  }
  // The ACKs of messages the program is not told of go now on a QP whose program left the
  // last such hold unanswered, or whose own packets await the peer's ACK (both sides put and
  // wait for their ACKs, as MPI_Put + MPI_Win_flush on both ranks: neither program can
  // answer what it does not see), and so does the ACK of a duplicate (its requester is
  // resending); the others may stay held.
  void release_unanswered() {
    auto gone = std::remove_if(core.ack_pending.begin(), core.ack_pending.end(), [&](Qp* qp) {
      const ResponderState& r = qp->resp;
      const bool unseen_now = r.ack_unseen && (!r.unseen_answered || awaits_ack(*qp));
      if (!r.ack_pending || !(r.ack_duplicate || unseen_now)) return false;
      responder_flush_ack(core, *qp);
      return true;
    });
    core.ack_pending.erase(gone, core.ack_pending.end());
  }
  // Held ACKs ran out (their deadline passed before the program sent anything): a QP whose
  // held ACK covers only unseen messages stops holding them until its program answers one
  // (note_post).
  void note_unanswered() {
    ++core.ctr.ack_holds_expired;
    for (Qp* qp : core.ack_pending)
      if (qp->resp.ack_pending && qp->resp.ack_unseen) qp->resp.unseen_answered = false;
  }
  // The program posts to `qp`: if the last message it took was unseen and came within the
  // last hold, the program answers such messages and their ACKs may be held again.
  void note_post(Qp& qp) {
    ResponderState& r = qp.resp;
    if (r.unseen_at_ns != 0 && core.now() - r.unseen_at_ns < core.hold_window_ns)
      r.unseen_answered = true;
    r.unseen_at_ns = 0;
  }
  // hold_acks_ns, but never more than half the ACK timeout of a QP whose ACK waits, nor
  // than hold_crossed_ns if that QP's own packets await the peer's ACK (crossed holds).
  uint64_t ack_hold_bound() const {
    uint64_t bound = core.hold_acks_ns;
    for (const Qp* qp : core.ack_pending) {
      if (!qp->resp.ack_pending) continue;
      if (qp->attr.timeout != 0) bound = std::min(bound, ack_timeout_ns(qp->attr.timeout) / 2);
      if (awaits_ack(*qp)) bound = std::min(bound, core.hold_crossed_ns);
    }
    return std::max<uint64_t>(bound, 1);
  }
  static bool awaits_ack(const Qp& qp) {
    return is_reliable(qp.type) && qp.sending() && wire::psn_diff(qp.req.next_psn, qp.req.una) > 0;
  }
  // Performs held direct copies and what they let go (before a control verb or a poll).
  void drain_direct() {
    if (core.direct_ops.empty()) return;
    const bool hold = core.direct_hold;
    core.direct_hold = false;
    finish();
    core.direct_hold = hold;
  }

  // QPs held back by the device window send again once it has room (in the order they
  // stopped, so the budget goes round the QPs instead of to the busiest).
  void wake_budget_waiters() {
    if (core.budget_waiters.empty() || core.inflight >= kDeviceWindow) return;
    waking.clear();
    waking.swap(core.budget_waiters);  // both keep their capacity: no allocation per call
    for (Qp* q : waking) {
      q->req.budget_wait = false;
      requester_progress(core, *q);  // may put itself back on budget_waiters
    }
  }
  std::vector<Qp*> waking;  // wake_budget_waiters' scratch

  std::unique_ptr<Qp> new_qp(Errno& err);  // device_qp.cc
  void dispatch(const WirePacket& pkt);
  void apply(Qp& qp, const QpAttr& a, uint32_t mask);
};

}  // namespace vrnic::engine
