// What the requester, responder and completer share inside one device: the ports, counters,
// memory table, the outgoing batch, and the completion / error paths.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "engine/counters.h"
#include "engine/cq.h"
#include "engine/device.h"
#include "engine/memory_table.h"
#include "engine/names.h"
#include "engine/ports.h"
#include "engine/qp.h"
#include "engine/qp_timers.h"
#include "engine/tx_batch.h"
#include "engine/ud.h"
#include "wire/headers.h"

namespace vrnic::engine {

// Local reasons for an error completion, reported in WorkCompletion::vendor_err. A NAK from
// the responder reports its AETH syndrome (0x60 | code) instead.
enum VendorErr : uint32_t {
  kVendorNone = 0,
  kVendorLocalKey = 0x101,     // a local SGE failed the memory check
  kVendorRetryTimeout = 0x102, // local ACK timeout, retry_cnt exhausted
  kVendorRnrExhausted = 0x103,
  kVendorBadResponse = 0x104,
  kVendorMsgTooLong = 0x105,
};

class Core {
 public:
  Core(const DeviceConfig& config, PacketPort& port, Clock& clock, HostMemory& host,
       EventSink& events);

  DeviceConfig config;
  PacketPort& port;
  Clock& clock;
  EventSink& events;
  Counters own_counters;
  Counters& ctr;
  NameSource names;  // QP numbers and memory keys (names.h)
  MemoryTable mem;
  PacketAuth auth;  // keys of authenticated QPs (packet_auth.h), used by tx and receive
  TxBatch tx;
  // While set, the packets engine calls make stay in tx (up to its kMaxBatch) instead of
  // leaving at each call's end: a doorbell batch sent by Device::flush_tx in one system call.
  bool tx_hold = false;
  void send_tx() {
    if (!tx_hold) tx.flush(port);
  }
  wire::IpUdpInfo local_ip;  // source address from the device GID
  uint32_t gsi_psn = 0;      // QP1's send PSN
  UdTables ud;               // address handles and multicast groups (ud.cc)

  // QPs with a coalesced ACK waiting for the end of the receive batch.
  std::vector<Qp*> ack_pending;
  uint64_t acks_queued = 0;  // ACKs asked for (queue_ack), coalesced ones included
  // Held ACKs (Device::receive with hold_acks_ns): ack_pending outlives the call that filled
  // it, until other packets leave or the deadline passes (Device::Impl::settle_acks).
  uint64_t hold_acks_ns = 0;      // set during a receive that may hold
  uint64_t hold_crossed_ns = UINT64_MAX;  // its bound for a QP whose own packets await an ACK
  uint64_t held_acks_until = 0;   // 0: nothing held
  uint64_t hold_window_ns = 0;    // the last hold_acks_ns that was not 0 (Impl::note_post)
  // ctr.tx_packets and acks_queued at the end of the last engine call: what a call made.
  uint64_t tx_mark = 0, acks_mark = 0;
  // QPs whose requester may be able to send (window opened, timer fired).
  std::vector<Qp*> tx_ready;
  // Packets in flight over all RC QPs (see kDeviceWindow), and the QPs that stopped
  // sending because the device budget was used up: they are made ready when it frees.
  uint32_t inflight = 0;
  std::vector<Qp*> budget_waiters;
  // XRC SRQs by number: what an XRCETH names (responder, xrc_bind_srq).
  std::unordered_map<uint32_t, Srq*> xrc_srqs;

  uint64_t now() const { return clock.now_ns(); }
  uint64_t precise_now() const { return clock.precise_now_ns(); }  // ports.h, Clock
  // A lower bound of every armed QP timer: each arming lowers it, on_timer recomputes it.
  uint64_t timer_hint = UINT64_MAX;
  void note_deadline(uint64_t t) {
    if (t < timer_hint) timer_hint = t;
  }
  // A QP armed a deadline at `t` (qp_timers.h).
  QpTimers timers;
  void note_qp_deadline(const Qp& qp, uint64_t t) {
    note_deadline(t);
    timers.lower(qp, t);
  }

  // Writes a CQE (timestamped) and raises the CQ event when armed (or, with CQ moderation,
  // lists the CQ in moderated_cqs until its held-back event is due).
  void complete(Cq* cq, WorkCompletion wc, bool solicited = false);
  // Armed CQs holding back an event until a moderation period ends (ibv_modify_cq).
  std::vector<Cq*> moderated_cqs;
  // Raises the CQ events that are due by now and returns the earliest still to come.
  uint64_t fire_due_cq_events();
  void watch_cq_deadline(Cq* cq);  // lists it if its event waits for a deadline
  void forget_cq(Cq* cq);  // destroy_cq
  void async_event(AsyncEventType type, void* ctx);
  // Moves the QP to ERR: every outstanding send and receive WQE completes with
  // WR_FLUSH_ERR (an error always completes, signaled or not: IBA 10.7.3.1), timers stop.
  void enter_error(Qp& qp);
  // Flushes whatever queues a QP in ERR still holds (WRs posted after the transition).
  void flush_queues(Qp& qp);

  // Direct mode (ports.h DirectLink): keeps the published tables in step with the device.
  // No-ops without a DirectLink.
  void publish_qp(const Qp& qp);
  void retract_qp(const Qp& qp);
  void publish_mr(const Mr& mr);
  void retract_mr(const Mr& mr);
  // The QP of each direct copy submitted and not yet flushed, in submission order.
  std::vector<Qp*> direct_ops;
  std::vector<Qp*> direct_scratch;
  uint32_t direct_signaled = 0;  // of those, the ones that complete with a CQE
  uint64_t direct_first_ns = 0;  // when the oldest of them was submitted
  // While set, engine calls leave submitted copies queued (a doorbell batch, like the port's
  // tx_hold); the caller flushes (Device::direct_flush, or any poll_cq).
  bool direct_hold = false;
  // Performs the queued copies: completed WQEs retire (CQEs), failed ones go back to their
  // send queues to be sent on the wire; their QPs are made ready (requester_direct.cc).
  void direct_flush();

  // Starts a packet to the QP's peer; fill the returned span, then commit_packet().
  // Data packets leave ECT(0) in the QP's traffic class (congestion.h data_tos).
  std::span<uint8_t> start_packet(Qp& qp, const wire::Packet& p, size_t payload_len);
  size_t commit_packet();  // returns the packet's size (BTH to ICRC)
  void mark_tx_ready(Qp& qp);
  // Brings the QP's share of `inflight` up to date (0 once it no longer sends).
  void recount_inflight(Qp& qp);

  // Gathers len bytes at byte offset `offset` of a WQE's SGE list into dst (local read);
  // false on a memory check failure.
  bool gather(const Pd* pd, const SgeList& sges, uint64_t offset, uint8_t* dst,
              uint64_t len);
  // Scatters src into the SGE list at byte offset `offset` (local write access required).
  bool scatter(const Pd* pd, const SgeList& sges, uint64_t offset,
               const uint8_t* src, uint64_t len);
};

}  // namespace vrnic::engine
