// A simulated host: a real engine::Device whose PacketPort is its NIC's port on a simulated
// link, the memory it sends from and receives into, the verbs the simulator's flows use (one
// CQ; RC, UC and UD QPs connected in place; WRITE, READ, SEND and RECV of up to 64 KiB,
// Fetch-and-Add), and the NIC's PCIe timing: what the engine sends waits in the NIC for the
// time the simulator computes (hold()).
#pragma once
#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/device.h"
#include "sim/event_queue.h"
#include "sim/network.h"
#include "sim/traffic.h"

namespace vrnic::sim {

inline constexpr uint32_t kChunkBytes = 64 * 1024;  // one message of a flow at most
inline constexpr uint32_t kUdQkey = 0x11111111;
inline constexpr uint32_t kGrhBytes = 40;  // ahead of a UD message in its receive buffer

engine::Gid gid_of_ipv4(uint32_t ipv4);

// The bytes every host's messages are sent from and written into: one pair for the whole
// simulation, registered by each host's device. What lands is never looked at (atomics have
// each host's own words), and one pair keeps the engine's payload copies in cache instead of
// spreading them over a megabyte per host.
struct Payload {
  std::vector<uint8_t> src = std::vector<uint8_t>(kChunkBytes, 0x5a);
  std::vector<uint8_t> dst = std::vector<uint8_t>(kChunkBytes + kGrhBytes, 0);
};

struct PathParams {
  uint32_t mtu = 4096;
  uint8_t ack_timeout = 10;   // local ACK timeout exponent
  uint8_t traffic_class = 0;  // the GRH traffic class (DSCP << 2); 0: the engine's default
};

class Host : public engine::PacketPort, public engine::EventSink, public engine::HostMemory {
 public:
  // `port`: the host's port in `net`, where its packets go; `payload` outlives the host.
  Host(Network& net, engine::Clock& clock, uint32_t port, uint32_t ipv4,
       const engine::DeviceConfig& cfg, uint32_t cq_entries, Payload& payload);

  // PacketPort: every packet the engine sends goes onto the NIC's egress queue, copied.
  void send(std::span<const engine::WirePacket> batch) override;
  uint16_t source_port_for(uint32_t qpn) override { return 0xc000 | (qpn & 0x3fff); }
  // EventSink: the simulator polls; nothing waits on events.
  void on_cq_event(engine::Cq*, void*) override {}
  void on_async_event(const engine::AsyncEvent&) override {}
  // HostMemory: only pinned regions here, never asked; every page is present.
  bool pages_present(const uint8_t*, uint64_t, bool) override { return true; }

  // A QP of `type` in RESET (allocated, not connected); its QPN is dev().qp_num(qp).
  engine::Qp* create_qp(engine::QpType type, uint32_t send_wqes, uint32_t recv_wqes);
  // Moves `qp` through INIT, RTR and RTS toward `peer_qpn` at `peer_ipv4` (UD: the peer is
  // named per message). Returns 0 or errno.
  int connect(engine::Qp* qp, engine::QpType type, uint32_t peer_qpn, uint32_t peer_ipv4,
              const PathParams& path);
  // Posts one signaled message of `bytes` (<= kChunkBytes): WRITE into `peer`'s memory
  // (WRITE with immediate if `imm`), READ from it, or SEND (UD: to `peer_qpn` at the peer).
  // Returns 0 or errno.
  int post(engine::Qp* qp, engine::QpType type, Verb verb, const Host& peer, uint32_t peer_qpn,
           uint64_t wr_id, uint32_t bytes, bool imm, const PathParams& path);
  // Posts a RECV of `bytes` (plus the GRH on UD).
  int post_recv(engine::Qp* qp, uint64_t wr_id, uint32_t bytes, bool ud);
  // Posts one signaled Fetch-and-Add of `add` on `peer`'s atomic word; the original value
  // lands in fetched().
  int post_faa(engine::Qp* qp, const Host& peer, uint64_t wr_id, uint64_t add);
  // Registers this host's atomic words (once; before a Fetch-and-Add to or from it). Not at
  // setup: each key drawn moves the QP numbers drawn after it, and with them ECMP's paths.
  void register_words();
  uint64_t fetched() const;
  uint64_t atomic_word() const;
  void set_atomic_word(uint64_t v);

  // NIC timing. With it on, the packets the engine sends wait until hold() releases them
  // `delay_ns` from now (never before those held earlier): the simulator calls hold() after
  // each engine call with what that call cost the NIC. release() runs at kNicRelease.
  void set_nic_timing(EventQueue* ev, uint32_t index) { ev_ = ev, index_ = index; }
  void hold(uint64_t delay_ns);
  void release();
  // When each ATOMIC ACKNOWLEDGE left the NIC, oldest first.
  const std::vector<uint64_t>& atomic_acks_out() const { return atomic_acks_out_; }

  // HPCC's NIC: with INT on, each data packet the engine sends carries an INT header, and
  // each ACK echoes the records of the last data packet received from the QP it answers.
  void set_int(bool on) { int_ = on; }
  // A data packet with INT received: its records kept for the ACKs to that sender's QP.
  void note_int(const Packet& p);

  engine::Device& dev() { return *dev_; }
  engine::Cq* cq() { return cq_; }
  // The engine's timer as the event queue knows it: when it is armed and its generation.
  uint64_t timer_at = UINT64_MAX, timer_gen = 0;

 private:
  Network& net_;
  engine::Clock& clock_;
  uint32_t port_;
  uint32_t ipv4_;
  EventQueue* ev_ = nullptr;  // null: no NIC timing, packets go out at once
  uint32_t index_ = 0;
  std::vector<Packet> pending_;  // sent by the engine call under way
  std::deque<std::pair<uint64_t, Packet>> held_;  // (release time, packet), in time order
  std::vector<uint64_t> atomic_acks_out_;
  bool int_ = false;
  // By the sender's IPv4 << 16 | its QPN's low 14 bits (its UDP source port, source_port_for).
  std::unordered_map<uint64_t, IntRecord> int_seen_;
  void add_int(Packet& p, const engine::WirePacket& w);
  std::unique_ptr<engine::Device> dev_;
  engine::Pd* pd_ = nullptr;
  engine::Cq* cq_ = nullptr;
  Payload& payload_;
  engine::MrInfo src_mr_, dst_mr_;  // payload_'s src and dst, registered here
  // The atomic word peers' Fetch-and-Adds hit, and where this host's own land.
  std::array<uint64_t, 2> words_{};
  engine::MrInfo words_mr_;
  std::unordered_map<uint64_t, engine::Ah*> ahs_;  // UD: by peer IPv4 << 8 | traffic class
  engine::Ah* ah_for(uint32_t ipv4, uint8_t traffic_class);
};

}  // namespace vrnic::sim
