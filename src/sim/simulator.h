// A simulation run: builds a Scenario's hosts (real engines), switches and links, runs the
// flows in virtual time to completion or the scenario's duration, and summarises (FCTs and
// their slowdown, fairness, drops, pauses, CNPs, queues).
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/capture.h"
#include "sim/event_queue.h"
#include "sim/host.h"
#include "sim/network.h"
#include "sim/scenario.h"

namespace vrnic::sim {

struct Percentiles {
  double p50 = 0, p95 = 0, p99 = 0;
  uint64_t count = 0;
};

struct AtomicResult {
  uint32_t flow = 0;
  uint64_t fetched = 0;  // the original value the Fetch-and-Add returned
  uint64_t memory = 0;   // the target word after it
};

// One row of the time series: at time t, switch egress port `port` held `bytes`.
struct QueueSample {
  uint64_t t_ns = 0;
  uint32_t port = 0;
  uint64_t bytes = 0;
};

// What each flow was and did (fct.csv).
struct FlowRecord {
  uint32_t src = 0, dst = 0;
  uint64_t bytes = 0, start_ns = 0, fct_ns = 0, ideal_ns = 0;  // fct 0: not completed
  Verb verb = Verb::kWrite;
  Transport transport = Transport::kRc;
};

// PFC at one port and priority (pfc.csv): the frames it sent, and the pauses it honoured
// that ran out without an XON.
struct PfcRecord {
  uint32_t port = 0, node = 0, priority = 0;
  bool is_switch = false;
  uint64_t pause_frames = 0, resume_frames = 0, pauses_expired = 0;
};

struct Summary {
  std::string scenario;
  std::string scheme;  // the congestion control: "dcqcn", "dcqcn+w" or "hpcc"
  uint64_t seed = 0, sim_time_ns = 0, events = 0;
  double wall_s = 0;
  uint64_t flows_total = 0, flows_completed = 0, flows_failed = 0;
  uint64_t drops = 0, pfc_pause_frames = 0, cnps_sent = 0, ecn_marked = 0;
  uint64_t watchdog_storms = 0, watchdog_drops = 0, pauses_ignored = 0;
  // PAUSE frames (XOFF, refreshes included) sent by NICs, per priority (all senders), XON
  // frames, and PAUSEs that ran out without an XON.
  uint64_t nic_pause_frames = 0, pfc_resume_frames = 0, pfc_pauses_expired = 0;
  std::map<int, uint64_t> pfc_pause_frames_by_priority;  // priorities with any
  std::vector<std::string> dcbx_mismatches;  // one line per disagreement, at start
  std::map<int, double> ets_shares;  // traffic class -> share of the bottleneck's bytes
  uint64_t retransmitted_packets = 0, ack_timeouts = 0;
  double jain_fairness = -1;  // over the long flows' second half; -1: fewer than two
  std::vector<double> long_flow_gbps;  // each long flow's rate over that window
  std::map<std::string, Percentiles> fct_slowdown;  // size bucket -> FCT / ideal FCT
  uint64_t queue_max_bytes = 0;          // the longest any switch queue got
  uint64_t bottleneck_queue_mean_bytes = 0;  // mean at dequeue, busiest port, second half
  std::vector<uint64_t> fct_ns;  // per flow, 0 if it did not complete
  std::vector<AtomicResult> atomics;  // the Fetch-and-Add flows that completed
  // Responder NIC, per atomic request received in order: request in to atomic ACK out.
  std::vector<uint64_t> atomic_responder_ns;
  // With record_series(): every switch queue not empty, every sample_ns; and each long
  // flow's delivered rate per bin (bin_ns). Not in summary.json (write_outputs).
  std::vector<FlowRecord> flows;
  std::vector<PfcRecord> pfc_ports;  // every port and priority with any PFC frame
  std::vector<QueueSample> queue_series;
  uint64_t bin_ns = 0;
  std::vector<std::vector<double>> long_flow_series_gbps;  // per long flow, per bin
};

// The FCT size buckets, smallest first: "0-64KiB", "64KiB-1MiB", "1MiB-10MiB", "10MiB+".
const std::vector<std::string>& size_buckets();

// fct.csv, queues.csv, rates.csv and pfc.csv into `dir` (docs/sim.md "Outputs"); throws
// std::runtime_error if a file cannot be written.
void write_outputs(const Summary& s, const std::string& dir);

// The summary as JSON (docs/sim.md); without wall_s (and so events/s) when `with_wall` is
// false, which makes two runs of the same scenario and seed compare equal.
std::string summary_json(const Summary& s, bool with_wall);

// Host i's address: 10.0.0.1 onward.
inline uint32_t ipv4_of_host(uint32_t i) { return 0x0a000000u | (i + 1); }

class Simulator : private HostSink {
 public:
  explicit Simulator(const Scenario& sc);
  ~Simulator() override;
  // Runs to the end; `progress` (optional) is called every 2^20 events with (now, events).
  Summary run(const std::function<void(uint64_t, uint64_t)>& progress = {});
  // Samples the switch queues every `sample_ns` during run() (events not counted).
  void record_series(uint64_t sample_ns) { sample_ns_ = sample_ns; }
  // Writes DIR/host-<i>.pcap for each of `hosts` during run() (capture.h); throws
  // std::runtime_error if a file cannot be created.
  void capture(const std::string& dir, const std::vector<uint32_t>& hosts);
  uint32_t host_count() const { return static_cast<uint32_t>(hosts_.size()); }

 private:
  struct Flow {
    FlowSpec spec;
    engine::Qp* qp = nullptr;   // the sender's (a READ's requester), while under way
    engine::Qp* rqp = nullptr;  // the receiver's (a READ's responder)
    uint32_t sqpn = 0, rqpn = 0;
    PathParams path;
    uint32_t msg_bytes = kChunkBytes;  // one message (UD: one MTU)
    uint64_t chunks = 0, posted = 0, done = 0;  // messages
    uint64_t recv_posted = 0, recv_done = 0;
    uint64_t fct_ns = 0, ideal_ns = 0;
    bool finished = false, failed = false;
    std::vector<uint64_t> bins;  // long flows: bytes delivered per bin
  };
  void build_topology();
  void build_ring();
  void build_clos();
  void build_hosts();
  CcPath cc_path() const;
  void build_flows();
  uint64_t ideal_fct(const Flow& f) const;
  uint64_t nic_cost(const Flow& f) const;
  uint64_t leg_ns(uint32_t from, uint32_t to, uint64_t wire_bytes) const;
  void deliver(uint32_t node, Packet&& p) override;
  void count_delivered(uint32_t host, const Packet& p);
  void open_flow(uint32_t i);
  void close_flow(Flow& f, bool failed);
  void finish_flow(Flow& f);
  uint64_t recvs_needed(const Flow& f) const;
  uint64_t data_key(const Flow& f) const;
  void post_recvs(Flow& f);
  uint64_t post_more(Flow& f);  // returns how many WQEs it posted
  void hold_posted(Flow& f, uint64_t posted);
  uint64_t post_cost(const Flow& f, uint64_t posted) const;
  void defer_cqe(uint32_t host, const engine::WorkCompletion& wc);
  void on_cqe_visible(uint32_t host);
  void record_atomic(const Flow& f);
  void service(uint32_t host, bool after_timer);
  void on_completion(const engine::WorkCompletion& wc);
  Summary summarise(uint64_t events, double wall_s);
  void summarise_fabric(Summary& s) const;
  void summarise_ets(Summary& s) const;

  Scenario sc_;
  EventQueue ev_;
  SimClock clock_;
  Network net_;
  Payload payload_;  // every host's message bytes (before hosts_: it outlives them)
  std::vector<std::unique_ptr<Host>> hosts_;
  std::vector<uint32_t> host_node_;   // host index -> network node
  std::vector<uint32_t> host_of_node_;  // network node -> host index (kNone: a switch)
  // Long flows: where their data arrives (host << 32 | QPN, data_key) -> flow.
  std::unordered_map<uint64_t, uint32_t> flow_by_rqp_;
  std::vector<Flow> flows_;
  uint64_t finished_ = 0;
  std::map<uint32_t, std::vector<uint64_t>> atomic_in_;  // host -> atomic requests' arrivals
  std::vector<AtomicResult> atomics_;
  uint64_t bin_ns_ = 0;
  uint64_t sample_ns_ = 0;  // 0: no time series
  std::vector<QueueSample> queue_series_;
  std::vector<bool> sampled_;  // per port: its last sample was not empty
  std::unique_ptr<HostCaptures> captures_;
  // NIC model: CQEs the engine wrote, visible to the client from the time given.
  std::vector<std::deque<std::pair<uint64_t, engine::WorkCompletion>>> pending_cqes_;
  void sample_queues();
  CcPath cc_path_;  // DCQCN+w, HPCC: base RTT and BDP (cc_path)
  std::unique_ptr<SchemeFactory> rate_control_;  // the engines' controllers (not DCQCN)
  void feed_int(Host& host, const Packet& p);
  std::vector<engine::WorkCompletion> wc_buf_ = std::vector<engine::WorkCompletion>(64);
};

}  // namespace vrnic::sim
