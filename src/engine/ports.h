// The narrow interfaces through which the sans-IO engine meets the world: PacketPort, Clock,
// HostMemory, EventSink, and DirectLink in direct mode.
#pragma once
#include <array>
#include <cstdint>
#include <span>

#include "wire/icrc.h"
#include "wire/packet_kind.h"

namespace vrnic::engine {

class Cq;

// One RoCEv2 packet handed to or from the transport: the UDP payload (BTH .. ICRC) plus the
// IP/UDP fields the ICRC covers. `data` is valid only for the duration of the call.
struct WirePacket {
  wire::IpUdpInfo ip;
  uint8_t tos = 0;  // DSCP/ECN byte (ECN bits used by congestion control)
  std::span<const uint8_t> data;
  // What the packet is (wire::packet_kind): set by the engine on every packet it sends, so
  // that what carries it never reads opcodes; not looked at on packets received.
  wire::PacketKind kind = wire::PacketKind::kRequest;
};

class PacketPort {
 public:
  virtual ~PacketPort() = default;
  // Sends a batch; the port copies what it needs before returning.
  virtual void send(std::span<const WirePacket> batch) = 0;
  // The UDP source port this port will really send a QP's packets from (flow entropy for
  // ECMP, derived from the QPN); the engine puts it in the ICRC.
  virtual uint16_t source_port_for(uint32_t qpn) = 0;
  // UD multicast membership of the device: join when the first QP attaches to a group (an
  // IP address, IPv4 in the first four bytes), leave after the last detaches. Returns true
  // if the port then delivers the group's packets itself — this device's own sends
  // included — so the engine does not loop them back; false (the default) if it cannot.
  virtual bool set_multicast(const std::array<uint8_t, 16>& group, bool ipv6, bool join) {
    return false;
  }
};

// Same-host direct copy (docs/protocol.md, "Direct mode"): a device whose peers run on the
// same host publishes its memory regions and RC QPs in a table the peers can read, and a
// peer's requester moves an RDMA WRITE or READ itself, straight between the two processes'
// memories, like a DMA engine behind a PCIe switch, instead of sending packets. Every check
// the responder would make is made on the published table first; anything the table does
// not positively allow goes on the wire, where the responder decides (and NAKs).
struct DirectMr {
  uint32_t key = 0;   // lkey == rkey
  uint32_t pd = 0;    // the PD's handle
  uint32_t access = 0;
  uint64_t iova = 0, length = 0;
  const uint8_t* host = nullptr;  // where iova maps to in the owner's address space
};
struct DirectQp {
  uint32_t qpn = 0;
  uint32_t pd = 0;
  uint32_t access = 0;     // qp_access_flags (remote read / write / atomic)
  uint32_t dest_qpn = 0;
  bool responds = false;   // RTR, RTS or SQD: the responder accepts requests
  bool ipv6 = false;
  std::array<uint8_t, 16> dest_ip{};  // the peer it is connected to
};
struct DirectSpan {
  uint8_t* addr = nullptr;  // in this process
  uint64_t len = 0;
  bool transient = false;   // may move before the flush (inline data): copy it at submit
};
constexpr size_t kMaxDirectSpans = 32;  // local spans of one copy (the device's max_sge)
struct DirectOp {
  bool read = false;  // RDMA READ (remote -> local), else RDMA WRITE
  uint32_t qpn = 0, dest_qpn = 0;
  bool ipv6 = false;
  std::array<uint8_t, 16> src_ip{}, dest_ip{};
  uint32_t rkey = 0;
  uint64_t remote_addr = 0, length = 0;
  std::span<const DirectSpan> local;  // total length == length
};

class DirectLink {
 public:
  virtual ~DirectLink() = default;
  // Owner side, called under the engine's lock whenever a region or an RC QP changes.
  virtual void publish_mr(const DirectMr& mr) = 0;
  // Returns once no peer is still copying through the key (as a NIC finishes its DMA before
  // a deregistration completes).
  virtual void retract_mr(uint32_t key) = 0;
  virtual void publish_qp(const DirectQp& qp) = 0;
  virtual void retract_qp(uint32_t qpn) = 0;
  // Requester side. submit: checks the access against the peer's table; if it is allowed,
  // pins the region and queues the copy (local spans are read at flush; the link copies any
  // it cannot rely on keeping still) and returns true. false: no table at that address, or
  // the table does not allow it: the caller sends the request on the wire.
  virtual bool submit(const DirectOp& op) = 0;
  // Performs the queued copies in order and returns how many completed. The copies stop at
  // the first that fails (the peer died, its memory was unmapped); it and the later ones
  // are to be sent on the wire, whole. Every pin is released.
  virtual size_t flush() = 0;
  virtual size_t queued() const = 0;
  virtual bool full() const = 0;  // flush before submitting more
};

class Clock {
 public:
  virtual ~Clock() = default;
  virtual uint64_t now_ns() const = 0;
  // The time read afresh, for events timed against one another within one stretch of the
  // device's work (the CE marks and CNPs of one receive batch): a clock that hands out one
  // reading per stretch (live/verb_clock.h) reads again here. Never earlier than now_ns().
  virtual uint64_t precise_now_ns() const { return now_ns(); }
};

// The pages of this process as the device's page tables see them. A registered region is
// pinned and always there; an on-demand (ODP) region is not, so the engine asks before each
// access whether its pages are present, as a NIC takes a page fault.
class HostMemory {
 public:
  virtual ~HostMemory() = default;
  // True if every page of [p, p+len) is mapped readable, and writable when `write`, and
  // then also faulted in; true for len 0. Changes no byte and never raises a signal.
  virtual bool pages_present(const uint8_t* p, uint64_t len, bool write) = 0;
};

// Notifications out of the engine; called with the engine's lock held, must not call back
// into the engine.
class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void on_cq_event(Cq* cq, void* cq_user_context) = 0;  // an armed CQ got a CQE
  virtual void on_async_event(const struct AsyncEvent& ev) = 0;
  // A MAD for QP1, the General Services Interface (IBA 13.5): a UD SEND_ONLY with the GSI
  // Q_Key and a 256-byte payload, its ICRC checked. Returns false if nobody consumes MADs
  // here (the device has no connection manager): the packet is then counted as for an
  // unknown QP.
  virtual bool on_gsi_mad(const wire::IpUdpInfo& from, std::span<const uint8_t> mad) {
    return false;
  }
};

}  // namespace vrnic::engine
