// The fabric of a simulation: links (rate, propagation delay, FIFO serialisation per
// direction), output-queued switches (per egress port and priority a drop-tail queue, ETS
// between traffic classes, RED/ECN marking at dequeue, PFC by ingress accounting, the PFC
// watchdog) and the hosts' NIC ports, with static routes by destination IP. Time moves only
// through the EventQueue.
#pragma once
#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/ports.h"
#include "engine/ring.h"
#include "sim/congestion.h"
#include "sim/event_queue.h"
#include "sim/mmu.h"
#include "sim/prefetch.h"
#include "sim/qos.h"

namespace vrnic::sim {

inline constexpr uint32_t kNone = UINT32_MAX;
// Bytes a frame occupies on the wire around the UDP payload: preamble and gap (20),
// Ethernet header and FCS (18), IPv4 (20), UDP (8).
inline constexpr uint64_t kFrameOverhead = 20 + 18 + 20 + 8;
inline constexpr uint64_t kPauseFrameBytes = 64 + 20;  // a PFC frame: minimum frame + gap

// An owning pointer that copies what it points to (a Packet stays copyable).
template <typename T>
struct DeepPtr : std::unique_ptr<T> {
  using std::unique_ptr<T>::unique_ptr;
  using std::unique_ptr<T>::operator=;
  DeepPtr() = default;
  DeepPtr(DeepPtr&&) noexcept = default;
  DeepPtr& operator=(DeepPtr&&) noexcept = default;
  DeepPtr(const DeepPtr& o) : std::unique_ptr<T>(o ? std::make_unique<T>(*o) : nullptr) {}
  DeepPtr& operator=(const DeepPtr& o) {
    this->reset(o ? new T(*o) : nullptr);
    return *this;
  }
};

// A frame in the fabric. What a switch reads (addresses and ports for ECMP, DSCP, sizes,
// where it goes) is in the first cache line; the payload's vector and the INT records after.
struct alignas(64) Packet {
  wire::IpUdpInfo ip;
  uint8_t tos = 0;
  uint8_t prio = 0;          // from the DSCP, by the map of the device it is in
  wire::PacketKind kind = wire::PacketKind::kRequest;  // as the sending engine stamped it
  uint32_t ingress = kNone;  // the switch port it came in on (PFC accounting)
  uint32_t dst_node = kNone;  // the destination host's node, found once at the sending NIC
  uint32_t wire = 0;  // wire_bytes(), kept once the frame is in the fabric (Network::enqueue)
  std::vector<uint8_t> bytes;  // the UDP payload: BTH .. ICRC
  // HPCC: the INT header (kIntHeaderBytes more on the wire) and the records in it, stamped
  // by the switches on a data packet, echoed by the receiver's NIC in its ACK. Null: none.
  DeepPtr<IntRecord> telemetry;
  // The port each switch on the way sends it out of, in order, chosen at the sending NIC
  // (Network::route_path); kUnrouted: the switch looks it up itself. `routed`: how many
  // switches it has been sent toward.
  static constexpr size_t kPathHops = 7;
  std::array<uint32_t, kPathHops> path = unrouted_path();
  uint8_t routed = 0;
  static constexpr uint32_t kUnrouted = kNone - 1;
  static constexpr std::array<uint32_t, kPathHops> unrouted_path() {
    std::array<uint32_t, kPathHops> a{};
    a.fill(kUnrouted);
    return a;
  }
  uint64_t wire_bytes() const { return wire != 0 ? wire : count_wire_bytes(); }
  uint64_t count_wire_bytes() const {
    return bytes.size() + kFrameOverhead + (telemetry ? kIntHeaderBytes : 0);
  }
};

uint64_t serialize_ns(uint64_t wire_bytes, double rate_bps);

struct RedParams {
  bool enabled = true;
  uint64_t kmin = 5'000, kmax = 200'000;  // bytes of queue left behind at dequeue
  double pmax = 0.01;
  // Non-zero: kmin and kmax are for a port of this rate and scale with a port's rate (the
  // HPCC simulator's KMIN_MAP / KMAX_MAP: 400 KB / 1600 KB at 100 Gb/s, 4x at 400 Gb/s).
  double per_rate_bps = 0;
};

// The PFC watchdog (as SONiC's): an egress queue paused without a break for detect_ns is
// declared stormed; its action applies until, restore_ns later, the pause has ended.
struct WatchdogParams {
  bool enabled = false;
  uint64_t detect_ns = 200'000'000, restore_ns = 200'000'000;
  bool drop = true;  // action: drop the queue's frames (true) or send them despite the pause
};

// Drops the nth frame (1 = the first) with this BTH opcode that a switch receives (tests,
// experiments: e.g. an atomic ACK, to make the requester retransmit).
struct DropRule {
  uint8_t opcode = 0;
  uint64_t nth = 1;
};

// A host NIC's receive buffer (docs/sim.md "NIC model"): frames off the link wait there until
// the NIC has moved them into host memory at rate_bps (0: the NIC keeps up with any link and
// nothing waits). With PFC on a frame's priority the NIC sends PAUSE to its switch once more
// than xoff bytes of that priority wait and resumes it at xon; a frame that does not fit in
// buffer_bytes is dropped and counted.
struct NicRxParams {
  double rate_bps = 0;
  uint64_t buffer_bytes = 512 * 1024, xoff = 128 * 1024, xon = 64 * 1024;
  uint16_t pause_quanta = 0xffff;  // the pause time its PAUSE frames ask for
};

// The time a PAUSE of `quanta` asks for on a link of `rate_bps`: 512 bit times each
// (802.1Qbb).
uint64_t pause_ns(uint16_t quanta, double rate_bps);

struct SwitchParams {
  uint64_t buffer_bytes = 1'000'000;  // per egress port (all priorities); drop tail beyond
  MmuParams mmu;  // on: one shared buffer with dynamic thresholds instead (mmu.h)
  RedParams red;                      // the same for every queue
  bool pfc = false;                   // on the priorities qos.pfc_priorities names
  uint64_t xoff = 40'000, xon = 20'000;  // ingress bytes per priority
  // The pause time an XOFF frame asks for (quanta of 512 bit times); the switch sends the
  // XOFF again at half that time while the ingress stays above XON.
  uint16_t pause_quanta = 0xffff;
  QosParams qos;
  WatchdogParams watchdog;
  std::vector<DropRule> drop;
  bool int_telemetry = false;  // stamp an INT record on each data packet that carries INT
};

// A port. The fields a frame touches at an egress come first, in three cache lines (the
// port is aligned to one), then its queues, then the ingress side and the rest.
struct alignas(64) Port {
  uint32_t node = kNone, peer = kNone;  // the owning node; the port at the link's far end
  double rate_bps = 0;
  uint64_t delay_ns = 0;
  uint64_t queue_bytes = 0;  // all priorities
  uint64_t tx_bytes = 0;  // wire bytes sent (INT's txBytes)
  uint64_t tx_packets = 0;
  // serialize_ns(wire_bytes, rate_bps), kept for the last size (most frames are one size).
  uint64_t serialize(uint64_t wire_bytes) {
    if (wire_bytes != ser_bytes_)
      ser_bytes_ = static_cast<uint32_t>(wire_bytes), ser_ns_ = serialize_ns(wire_bytes, rate_bps);
    return ser_ns_;
  }
  uint64_t ser_ns_ = 0;
  uint32_t ser_bytes_ = 0;
  bool busy = false;
  bool peer_switch = false;  // the far end is a switch's port (connect)
  uint8_t queued = 0;  // bit p: queue[p] holds a frame (the ETS pick reads no empty ring)
  std::array<bool, kPriorities> paused{};  // the far end sent PAUSE for the priority
  std::array<bool, kPriorities> stormed{};        // the watchdog's action applies
  std::array<bool, kPriorities> pause_sent{};  // ingress: an XOFF stands (below)
  uint32_t peer_node = kNone;  // the node at the link's far end
  uint64_t queue_max = 0, marked = 0;
  uint64_t queue_samples = 0, queue_sum = 0;  // queue left at dequeue, after stats_from_ns
  alignas(64) std::array<uint64_t, kPriorities> tc_bytes{};  // bytes sent per class, likewise
  std::array<engine::Ring<uint32_t>, kPriorities> queue;  // frames (Network's pool)
  // Ingress side (switch ports, and a NIC's receive buffer): bytes of the packets that came
  // in here, still buffered (or the MMU's account of them); which XOFF is being refreshed.
  std::array<uint64_t, kPriorities> ingress_bytes{};
  uint64_t mmu_headroom = 0;
  std::array<MmuQueue, kPriorities> mmu{};  // with the shared-buffer MMU
  std::array<uint64_t, kPriorities> xoff_gen{};
  std::array<uint64_t, kPriorities> pause_until{};  // when that PAUSE's quanta run out
  std::array<uint64_t, kPriorities> pause_gen{};  // counts pauses and resumes (watchdog)
  EtsState ets;
  engine::Ring<Packet> rx;  // a NIC's receive buffer, oldest first (NicRxParams)
  uint64_t rx_bytes = 0;
  bool rx_busy = false;
  // Counters.
  uint64_t drops = 0, pauses_sent = 0;
  std::array<uint64_t, kPriorities> pauses_by_prio{};  // XOFF frames (refreshes too)
  std::array<uint64_t, kPriorities> resumes_by_prio{};  // XON frames
  std::array<uint64_t, kPriorities> pauses_expired{};  // honoured here, ran out without XON
  uint64_t pauses_ignored = 0;  // PAUSE for a priority without PFC here
  uint64_t storms = 0, storm_drops = 0;  // the watchdog's detections and its drops
};

// Where packets for a host go: the simulator's hosts implement it.
class HostSink {
 public:
  virtual ~HostSink() = default;
  virtual void deliver(uint32_t node, Packet&& p) = 0;
};

// Sees the frames of the hosts' NICs, for per-host captures: each data frame a NIC starts to
// send or has received whole, and each PFC frame it sends or receives.
class FrameTap {
 public:
  virtual ~FrameTap() = default;
  virtual void data_frame(uint32_t node, const Packet& p) = 0;
  virtual void pfc_frame(uint32_t node, bool sent, uint8_t prio, uint16_t quanta) = 0;
};

class Network {
 public:
  Network(EventQueue& events, SimClock& clock, uint64_t seed)
      : ev_(events), clock_(clock), rng_(seed) {}

  // A host whose NIC has DCB settings `qos` (negotiated with its switch's at connect()).
  uint32_t add_host(uint32_t ipv4, const QosParams& qos = {}, const NicRxParams& nic = {});
  uint32_t add_switch(const SwitchParams& p);
  // A full-duplex link: one port on each node. Returns the port on `a`.
  uint32_t connect(uint32_t a, uint32_t b, double rate_bps, uint64_t delay_ns);
  // Static routes: every switch sends toward each host along the shortest paths, ECMP over
  // every port on one of them (a frame's port by a hash of its 5-tuple).
  void compute_routes();
  // Overrides the route of switch `node` toward `ipv4`: out of `port` only.
  void set_route(uint32_t node, uint32_t ipv4, uint32_t port);
  // DCBX at start: each link whose ends' settings disagree, one line per difference.
  std::vector<std::string> dcbx_check() const;
  void set_sink(HostSink* sink) { sink_ = sink; }
  void set_tap(FrameTap* tap) { tap_ = tap; }
  void set_stats_from(uint64_t t) { stats_from_ = t; }

  // A packet into a port's egress queue (a host's NIC, or a switch after routing).
  void enqueue(uint32_t port, Packet&& p);
  // Packet buffers are reused: a sender takes one (empty, with the capacity of a packet
  // that has ended), a receiver gives back the bytes of a packet it is done with.
  std::vector<uint8_t> take_buffer() {
    if (spare_.empty()) return {};
    std::vector<uint8_t> b = std::move(spare_.back());
    spare_.pop_back();
    return b;
  }
  void give_back(std::vector<uint8_t>&& b) {
    b.clear();
    if (spare_.size() < 4096) spare_.push_back(std::move(b));
  }
  // kTxDone, kArrive, kPause, kPauseExpire, kPfcRefresh, kNicRx, kWatchdog, kRestore
  void handle(const Event& e);
  // Starts loading what handle(e) will touch first (the port, the frame arriving), so that
  // the memory of the next event is on its way while this one runs.
  void prefetch(const Event& e) const {
    if (e.kind == EventKind::kTxDone) {  // the port, its queues, the frame likely next
      prefetch_line(&ports_[e.a]);
      prefetch_line(&ports_[e.a].queue);
      if (e.b < pool_.size()) {
        prefetch_line(&pool_[e.b]);
        prefetch_line(&pool_[e.b].path);
      }
      return;
    }
    if (e.kind != EventKind::kArrive || e.b >= pool_.size()) return;
    prefetch_line(&pool_[e.b]);  // the frame's first line: all a switch reads
    prefetch_line(&ports_[e.a]);
    prefetch_line(&ports_[e.a ^ 1]);  // its peer: connect() makes ports in pairs
    const auto egress = static_cast<uint32_t>(e.c);  // chosen when the frame left (try_send)
    if (egress >= ports_.size()) return;
    // Its queue and ingress account at the priority it left with (most often its priority
    // here too).
    const auto prio = static_cast<uint8_t>(e.c >> 32) & (kPriorities - 1);
    prefetch_line(&ports_[egress]);
    prefetch_line(reinterpret_cast<const char*>(&ports_[egress]) + 64);
    prefetch_line(&ports_[egress].queue[prio]);
    prefetch_line(&ports_[e.a ^ 1].mmu[prio]);
  }

  uint32_t host_port(uint32_t node) const { return nodes_[node].ports.front(); }
  bool is_switch(uint32_t node) const { return nodes_[node].is_switch; }
  uint32_t ipv4_of(uint32_t node) const { return nodes_[node].ipv4; }
  // The egress ports a packet from host `src` to host `dst` leaves through, in order.
  std::vector<uint32_t> path(uint32_t src, uint32_t dst) const;
  const Port& port(uint32_t i) const { return ports_[i]; }
  size_t port_count() const { return ports_.size(); }
  uint64_t drops() const;
  uint64_t pause_frames() const;
  uint64_t nic_pause_frames() const;  // sent by hosts' NICs
  std::array<uint64_t, kPriorities> pause_frames_by_prio() const;
  uint64_t marked() const;
  uint64_t storms() const;
  const QosParams& qos_of(uint32_t node) const {  // inline: a port's every frame asks
    if (node < qos_.size() && qos_[node]) return *qos_[node];
    return find_qos(node);
  }
  const MmuSwitch& mmu_of(uint32_t node) const { return nodes_[node].mmu; }

 private:
  // A node; what routing a frame reads first shares the first cache line.
  struct alignas(64) Node {
    bool is_switch = false;
    uint32_t ipv4 = 0;
    std::vector<uint32_t> hop_at, hops;  // routes flattened (flatten_routes)
    SwitchParams sw;
    QosParams qos;  // a host's NIC (a switch's are sw.qos)
    NicRxParams nic;
    std::vector<uint64_t> drop_seen;  // per sw.drop rule: frames of its opcode so far
    MmuSwitch mmu;
    std::vector<uint32_t> ports;
    std::vector<std::vector<uint32_t>> routes;  // by destination host node: ECMP ports
    // A host's recent flows' paths (route_path): direct-mapped by addresses and ports.
    struct CachedPath {
      uint64_t addrs = 0;
      uint32_t ports = 0;
      bool used = false;
      std::array<uint32_t, Packet::kPathHops> path{};
    };
    std::vector<CachedPath> paths;
  };
  static constexpr int kPathCacheBits = 4;
  void route_path(Node& host, uint32_t host_port, Packet& p);
  std::array<uint32_t, Packet::kPathHops> walk_path(uint32_t first_switch, const Packet& p) const;
  const QosParams& settings_of(uint32_t node) const;  // qos_of, not kept
  const QosParams& find_qos(uint32_t node) const;     // qos_of's first look, kept
  void try_send(uint32_t port);
  void enqueue_held(uint32_t port, uint32_t frame);
  // The frames in the fabric's queues and links stay in one pool and move as indices; the
  // slots of frames that have left are taken again, last freed first.
  uint32_t hold(Packet&& p) {
    if (free_frames_.empty()) {
      pool_.push_back(std::move(p));
      return static_cast<uint32_t>(pool_.size() - 1);
    }
    const uint32_t i = free_frames_.back();
    free_frames_.pop_back();
    pool_[i] = std::move(p);
    return i;
  }
  Packet release(uint32_t frame) {
    free_frames_.push_back(frame);
    return std::move(pool_[frame]);
  }
  void flatten_routes(Node& n);
  uint32_t ecmp_port(uint32_t node, std::span<const uint32_t> ports, const Packet& p) const;
  // The port switch `node` sends a frame out of toward its destination; kNone: no route.
  uint32_t egress_port(uint32_t node, const Packet& p) const;
  void on_arrive(uint32_t from_port, uint32_t frame, uint32_t egress);
  void switch_receive(uint32_t port, uint32_t frame, uint32_t egress);
  bool dropped_by_rule(Node& sw, const Packet& p);
  void setup_mmu();
  bool mmu_ingress(Node& sw, uint32_t port, const Packet& p);
  void mmu_release(Node& sw, uint32_t port, const Packet& p);
  void leave_switch(Port& out, const Node& sw, Packet& p);
  void release_ingress(const Node& sw, const Packet& p);
  bool red_mark(const RedParams& red, uint64_t queue_left, double rate_bps);
  void send_pfc(uint32_t port, uint8_t prio, bool pause);
  void on_refresh(uint32_t port, uint8_t prio, uint64_t gen);
  void on_pause(uint32_t port, uint8_t prio, uint16_t quanta);
  void on_pause_expire(uint32_t port, uint8_t prio);
  void set_paused(uint32_t port, uint8_t prio, bool pause);
  void host_receive(uint32_t port, Packet&& p);
  void start_rx(uint32_t port);
  void on_nic_rx(uint32_t port);
  void on_watchdog(uint32_t port, uint8_t prio, uint64_t gen);
  void on_restore(uint32_t port, uint8_t prio);
  void drop_queue(uint32_t port, uint8_t prio);

  EventQueue& ev_;
  SimClock& clock_;
  Rng rng_;
  HostSink* sink_ = nullptr;
  FrameTap* tap_ = nullptr;
  std::vector<Node> nodes_;
  std::unordered_map<uint32_t, uint32_t> host_by_ipv4_;
  std::vector<Port> ports_;
  std::vector<Packet> pool_;  // hold / release
  std::vector<uint32_t> free_frames_;
  // qos_of per node, found on first use (the nodes and links do not change once running).
  mutable std::vector<const QosParams*> qos_;
  uint64_t stats_from_ = 0;
  std::vector<std::vector<uint8_t>> spare_;  // take_buffer / give_back
};

uint32_t ipv4_of_packet(const Packet& p);

}  // namespace vrnic::sim
