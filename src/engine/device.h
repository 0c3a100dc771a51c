// The NIC: device limits, PDs, memory table, CQs, QPs, and the packet/timer entry points.
// Single-threaded (_st): the caller serialises every call (the live runtime holds a mutex).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/counters.h"
#include "engine/dcqcn.h"
#include "engine/rate_control.h"
#include "engine/packet_auth.h"
#include "engine/ports.h"
#include "engine/types.h"

namespace vrnic::engine {

class Qp;
class Mr;

// The limits the device advertises (ibv_query_device / ibv_query_port report these).
struct DeviceLimits {
  uint32_t max_qp = 16384, max_qp_wr = 16384, max_sge = 32, max_cq = 65536, max_cqe = 4194303,
           max_mr = 1 << 20, max_pd = 1 << 16, max_qp_rd_atom = 16, max_qp_init_rd_atom = 16,
           max_res_rd_atom = 16 * 16384, max_inline_data = 256, max_srq = 1 << 16,
           max_srq_wr = 16384, max_ah = 1 << 16, max_mcast_grp = 8192, max_mcast_qp_attach = 256;
  uint32_t max_srq_sge = 32;
  uint32_t max_mw = 1 << 16;
  // CQ moderation (ibv_modify_cq): mlx5's limits, a 16-bit count and a 12-bit period in µs.
  uint16_t max_cq_count = 65535, max_cq_period_us = 4095;
  uint64_t max_mr_size = ~0ull;
  uint8_t max_mtu = 5;     // IBV_MTU_4096
  uint8_t active_mtu = 5;  // path MTU the port reports active
};

struct DeviceConfig {
  Gid gid;                  // GID index 0: the RoCEv2 GID (IPv4-mapped or IPv6)
  DeviceLimits limits;
  Counters* counters = nullptr;  // where to count; null = the device's own
  DirectLink* direct = nullptr;   // same-host direct copy (ports.h); null = always the wire
  // The seed of the CSPRNG that draws QP numbers and memory keys (names.h): random in a
  // live device (getrandom(2)), fixed in tests and the simulator for repeatable runs.
  std::array<uint8_t, 32> name_seed{};
  // Bytes a requester QP keeps in flight (requester.h send_window): what a peer's receive
  // buffer is expected to absorb in one burst.
  uint32_t send_window_bytes = 256 * 1024;
  // The token bucket UD and UC packets leave through (ud.h): bytes per microsecond on
  // average (bursts of kPaceBurstBytes); 0: none, for a link that serialises itself and a
  // receiver that keeps up (the simulator's NICs).
  uint64_t unreliable_pace_bytes_per_us = 1000;
  // Congestion control: ECT(0) on data packets, CNPs for CE-marked ones, DCQCN per QP.
  DcqcnParams cc;
  // Another congestion control in DCQCN's place (rate_control.h): each connected QP gets a
  // controller from this factory, which outlives the device. Null (live mode): DCQCN.
  RateControlFactory* rate_control = nullptr;
  // False: packets leave with a zero ICRC and arrive unchecked, for a fabric that corrupts
  // nothing (the simulator's, whose captures fill the ICRC in themselves). Live: true.
  bool icrc = true;
};

// The reaction point of one QP that has received a CNP (Device::qp_rates).
struct QpRate {
  uint32_t qpn = 0;
  bool limited = false;  // false: back at line rate, the limiter released
  double rate_bps = 0, target_bps = 0, alpha = 0;
};

struct MrInfo {
  Mr* mr = nullptr;
  uint32_t lkey = 0, rkey = 0;
};

class Device {
 public:
  // The device keeps references to the four ports (ports.h); they outlive it.
  Device(const DeviceConfig& config, PacketPort& port, Clock& clock, HostMemory& host,
         EventSink& events);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const DeviceConfig& config() const;
  // Inline: the live device reads the counters on every verb call.
  Counters& counters() { return *counters_; }

  // --- control path (return 0 or an errno, as the verbs do) -------------------------------
  Pd* alloc_pd();
  Errno dealloc_pd(Pd* pd);  // EBUSY while QPs or MRs use it

  // Registers [addr, addr+length) of this process; remote and local accesses use iova as
  // the start address (iova == addr for ibv_reg_mr). lkey and rkey carry a generation tag,
  // so a key of a deregistered MR never matches a later one. length may be 0 for a
  // zero-based region (kZeroBased: an empty one, as the kernel allows for device memory).
  Errno reg_mr(Pd* pd, void* addr, size_t length, uint64_t iova, uint32_t access, MrInfo& out);
  Errno dereg_mr(Mr* mr);
  // ibv_advise_mr on ODP regions (odp.h): prefetch faults the pages in.
  Errno advise_mr(Pd* pd, uint32_t advice, uint32_t flags, const Sge* sges, size_t n);

  // cqe: requested depth; the granted depth is written back. ring: memory for the CQEs the
  // caller supplies (Cq's constructor), or null.
  Cq* create_cq(uint32_t& cqe, void* user_context, WorkCompletion* ring = nullptr);
  Errno destroy_cq(Cq* cq);  // EBUSY while QPs use it
  // Moves up to n completions into out; returns how many (>= 0).
  int poll_cq(Cq* cq, WorkCompletion* out, int n);
  // Arms the CQ: the next CQE (or next solicited one) raises EventSink::on_cq_event once.
  Errno req_notify_cq(Cq* cq, bool solicited_only);
  // ibv_modify_cq's moderation: EINVAL above max_cq_count / max_cq_period_us.
  Errno modify_cq(Cq* cq, uint32_t count, uint32_t period_us);

  // init.cap is written back with the granted capabilities. Errors: EINVAL (bad attribute),
  // ENOMEM, EOPNOTSUPP (QP type or feature the device lacks).
  Qp* create_qp(QpInitAttr& init, Errno& err);
  uint32_t qp_num(const Qp* qp) const;
  // Validates attr_mask against the transition (IBA 10.3.1 / table 91 "QP attribute
  // modifications"); EINVAL on a missing required or a forbidden attribute.
  Errno modify_qp(Qp* qp, const QpAttr& attr, uint32_t attr_mask);
  Errno query_qp(const Qp* qp, QpAttr& attr, QpInitAttr& init) const;
  // Authenticated mode (packet_auth.h, docs/protocol.md): from now on the RC QP's packets
  // carry a tag under keys.tx, and a packet to it is taken only with a right tag under
  // keys.rx; the keys go with the QP (destroyed or reset). EINVAL: no such RC QP.
  Errno set_qp_auth(uint32_t qpn, const AuthKeys& keys);
  Errno destroy_qp(Qp* qp);

  // --- address handles, SRQs, memory windows, CQ resize, MR re-registration (each returns
  // 0 or the errno the verbs call reports) ---------------------------------------------------
  // Address handles (UD). EINVAL for a PD not of this device or an AV of the wrong family.
  Ah* create_ah(Pd* pd, const AddressVector& av, Errno& err);
  Errno destroy_ah(Ah* ah);
  // Multicast groups of a UD QP (gid must be a multicast GID).
  Errno attach_mcast(Qp* qp, const Gid& gid, uint16_t lid);
  Errno detach_mcast(Qp* qp, const Gid& gid, uint16_t lid);

  // Shared receive queues. attr in: requested max_wr / max_sge / srq_limit; out: granted.
  struct SrqAttr {
    uint32_t max_wr = 0, max_sge = 0, srq_limit = 0;
  };
  Srq* create_srq(Pd* pd, SrqAttr& attr, void* user_context, Errno& err);
  // mask: 1 = max_wr (resize), 2 = srq_limit (arms the SRQ_LIMIT_REACHED event), as IBV_SRQ_*.
  Errno modify_srq(Srq* srq, const SrqAttr& attr, uint32_t mask);
  Errno query_srq(const Srq* srq, SrqAttr& attr) const;
  Errno destroy_srq(Srq* srq);  // EBUSY while QPs use it
  Errno post_srq_recv(Srq* srq, const RecvWr* wrs, size_t n, size_t* bad);

  // XRC (xrc.cc). An XRC domain; close_xrcd is EBUSY while SRQs or target QPs are in it.
  Xrcd* open_xrcd();
  Errno close_xrcd(Xrcd* xrcd);
  // An XRC SRQ: its WQEs take the SENDs of any target QP of the domain naming its number; its
  // completions go to cq. EINVAL for a PD, XRCD or CQ not of this device.
  Srq* create_xrc_srq(Pd* pd, Xrcd* xrcd, Cq* cq, SrqAttr& attr, void* user_context,
                      Errno& err);
  // The number requests carry in their XRCETH (ibv_get_srq_num); EINVAL for a basic SRQ.
  Errno srq_num(const Srq* srq, uint32_t& srqn) const;

  // Memory windows: type 1 or 2; rkey written back.
  Mw* alloc_mw(Pd* pd, uint8_t type, uint32_t& rkey, Errno& err);
  Errno dealloc_mw(Mw* mw);
  // Type 1 bind (ibv_bind_mw): posted on qp's send queue like a WR, completes as kBindMw.
  Errno bind_mw(Qp* qp, uint64_t wr_id, uint32_t send_flags, const MwBindInfo& bind);

  // ibv_resize_cq: cqe in: requested, out: granted. EINVAL if fewer than the CQEs held.
  // ring: as for create_cq (the old ring is no longer used once this returns 0).
  Errno resize_cq(Cq* cq, uint32_t& cqe, WorkCompletion* ring = nullptr);
  // ibv_rereg_mr: flags as IBV_REREG_MR_CHANGE_{TRANSLATION=1,PD=2,ACCESS=4}; keys kept.
  Errno rereg_mr(Mr* mr, uint32_t flags, Pd* pd, void* addr, size_t length, uint64_t iova,
                 uint32_t access, MrInfo& out);

  // --- fast path ----------------------------------------------------------------------------
  // The doorbell. Validates each WR in order; on the first bad one stops and sets *bad to
  // its index (EINVAL bad opcode/flags for the QP type, ENOMEM send queue full,
  // EINVAL too many SGEs or inline too long, EINVAL QP not in RTS/SQD...).
  Errno post_send(Qp* qp, const SendWr* wrs, size_t n, size_t* bad);
  Errno post_recv(Qp* qp, const RecvWr* wrs, size_t n, size_t* bad);

  // Packets from the transport (ICRC not yet checked: the engine checks it and counts).
  // hold_acks_ns != 0: the ACKs the batch makes may wait that long for the program's answer
  // (a responder may coalesce and delay ACKs, within the requester's timeout): they leave
  // with the next packets the device sends, right after them in the same batch, or by
  // held_acks_deadline(), whichever is first. A batch that makes other packets holds
  // nothing. (The live layer holds them for a program that answers what it receives.)
  // crossed_hold_ns: the bound instead, if shorter, when the QP whose ACK waits has packets
  // of its own awaiting the peer's ACK: the peer may be holding that ACK for its answer just
  // as this side holds its own, and each answer may wait for the other's ACK (two programs
  // that both send at once, a collective's exchange).
  // Unseen messages (a WRITE without immediate, a duplicate: no receive completion tells
  // the program of them) have their ACK held only on a QP whose program answered such a
  // message within the hold since its last one ran out unanswered (ib_write_lat polls
  // memory and answers), and never while the QP's own packets await an ACK (both sides put
  // and flush at once): a put followed by a flush would wait out the hold every time. The
  // ACK of a duplicate is never held (its requester is resending).
  struct ReceiveResult {
    uint32_t sent = 0;       // packets the batch made that left (ACKs included)
    bool acks_held = false;  // ACKs wait (held_acks_deadline())
    // Atomic requests the batch carried, and those of them answered from the ACK queue (a
    // duplicate: its saved result replayed, never executed again): a NIC model's costs.
    uint32_t atomic_requests = 0, atomics_replayed = 0;
  };
  ReceiveResult receive(std::span<const WirePacket> batch, uint64_t hold_acks_ns = 0,
                        uint64_t crossed_hold_ns = UINT64_MAX);
  // When the held ACKs must leave (on_timer sends them; next_timer_ns() includes it), or
  // UINT64_MAX if none wait.
  uint64_t held_acks_deadline() const;
  // Sends the held ACKs now; past their deadline, as on_timer would (they ran out unanswered).
  void release_acks();
  // Sends a 256-byte MAD from QP1 to the GSI of the address in `to` (dst; src is filled in
  // with this device's address): the connection manager's datagrams.
  void send_gsi(const wire::IpUdpInfo& to, std::span<const uint8_t, 256> mad);

  // Time: the instant (Clock ns) at which on_timer must run next, or UINT64_MAX. It may be
  // early (a timer armed since the last on_timer and re-armed later since): on_timer then
  // finds nothing due and recomputes it exactly. O(1): no scan of the QPs per call.
  uint64_t next_timer_ns() const;
  void on_timer();

  // True if any QP has packets it wants to send but is window-limited or has work queued
  // (the runtime keeps servicing the device while this holds).
  bool has_pending_tx() const;
  // The DCQCN state of every QP that has had a CNP (congestion.h), for the stats.
  void qp_rates(std::vector<QpRate>& out) const;
  // The controller of QP `qpn` made by DeviceConfig::rate_control (null: none, or not yet).
  RateControl* rate_control(uint32_t qpn) const;

  // Direct mode (DeviceConfig::direct). While held, engine calls leave the copies they
  // submit queued, so a burst of posts is copied in few system calls; direct_flush (and any
  // control verb, and a poll_cq while a held copy is signaled) performs them, completing
  // their WQEs.
  void set_direct_hold(bool hold);
  void direct_flush();
  bool direct_queued() const;

  // The doorbell batch: while held, the packets engine calls make wait in the device's
  // transmit batch (the 64th of them sends the batch); flush_tx sends them in one
  // PacketPort::send, in the order they were made. Packets later calls make go after them.
  void set_tx_hold(bool hold);
  void flush_tx();
  bool tx_queued() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  Counters* counters_;  // impl_->core.ctr
  Qp* create_xrc_tgt(QpInitAttr& init, Errno& err);
};

}  // namespace vrnic::engine
