// LiveNic::Impl: what a live device holds beside the engine (port, capture, counters file,
// direct-mode table, threads) and the loops that move packets; shared by live_nic.cc (the
// verbs' entry points), device_setup.cc (open and close) and progress.cc (the threads).
//
// Locking: mu_ (the device lock) serialises every engine call and every use of the UdpPort
// (send happens inside engine calls; recvmmsg happens under mu_ so that packets enter the
// engine in the order the socket delivered them, whichever thread receives them). mu_ is
// never held across a blocking call: the threads sleep in ppoll() without it. g_mu (in
// live_nic.cc) guards the singleton and its reference count; it is taken before mu_.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "live/config.h"
#include "live/counters_file.h"
#include "live/direct_window.h"
#include "live/host_memory.h"
#include "live/live_nic.h"
#include "live/verb_clock.h"
#include "transport/udp/fault_injector.h"
#include "transport/udp/pcap_writer.h"
#include "transport/udp/udp_port.h"

namespace vrnic::live {

class WallClock final : public engine::Clock {
 public:
  uint64_t now_ns() const override { return monotonic_ns(); }
};

class CallbackSink final : public engine::EventSink {
 public:
  explicit CallbackSink(const LiveNicCallbacks& cb) : cb_(cb) {}
  void on_cq_event(engine::Cq* cq, void* ctx) override {
    if (cb_.on_cq_event) cb_.on_cq_event(cq, ctx);
  }
  void on_async_event(const engine::AsyncEvent& ev) override {
    if (cb_.on_async_event) cb_.on_async_event(ev);
  }
  bool on_gsi_mad(const wire::IpUdpInfo& from, std::span<const uint8_t> mad) override {
    return gsi_ && gsi_(from, mad);
  }
  LiveNic::GsiHandler gsi_;  // set under the device lock

 private:
  LiveNicCallbacks cb_;
};

struct LiveNic::Impl {
  Impl(const LiveConfig& c, const LiveNicCallbacks& cb, LiveNic& n)
      : config(c), engine_clock(&LiveNic::moved, &n), sink(cb), nic(n) {}

  const LiveConfig config;
  std::string name = "vrnic0";
  std::string ip_string;
  bool ipv6 = false;
  engine::Gid gid;
  WallClock clock;         // the live layer's own readings, any thread
  VerbClock engine_clock;  // the engine's (mu_ held)
  ProcessMemory host_memory;  // ODP page checks
  CallbackSink sink;
  LiveNic& nic;
  std::unique_ptr<transport::PcapWriter> pcap;
  std::unique_ptr<transport::FaultInjector> faults;
  std::unique_ptr<transport::UdpPort> port;
  std::unique_ptr<DirectWindow> direct;  // VRNIC_DIRECT=1 (outlives the engine)
  std::unique_ptr<engine::Device> device;
  CountersFile counters_file;
  // The QPs' DCQCN rates, published in the counters file at most every millisecond once a
  // CNP has been handled (`vrnic stats` shows them).
  std::vector<engine::QpRate> rates;
  uint64_t rates_ns = 0;
  transport::RecvBatch batch;  // used only under mu_
  int kick_fd = -1;
  int stop_fd = -1;  // receive queues: written once at shutdown, every queue thread returns
  pid_t owner_pid = 0;
  std::thread* thread = nullptr;  // heap: a forked child must never destroy the parent's
  std::atomic<bool> stop{false};
  bool finished = false;  // thread stopped, stats printed (mu_)

  // Receive queues after the first (VRNIC_RX_QUEUES): a thread each, which sleeps on its
  // socket and receives without the device lock, so the kernel's copies of several queues
  // run on several cores, then hands the batch to the engine under it. `mu` is held from
  // the receive to the engine: a queue's packets enter the engine in the order its socket
  // delivered them, whoever reads it (the thread, or a program's poll_cq with try_lock).
  struct RxThread {
    explicit RxThread(size_t q) : queue(q) {}
    size_t queue;
    std::mutex mu;
    transport::RecvBatch batch;
    std::thread* thread = nullptr;
  };
  std::vector<std::unique_ptr<RxThread>> rx_threads;
  size_t poll_turn = 0;  // the extra queue the next empty poll_cq reads (mu_)

  engine::Device& dev() { return *device; }
  Scheduler& sched() { return nic.sched_; }
  DeviceView view() const;  // mu_ held; pending_tx left false (a scan: the thread's alone)

  // ---- device_setup.cc ----
  int start();  // 0 or errno
  int open_port();
  int make_device();
  int start_threads();
  void stop_thread();
  // Stops the threads, flushes the capture, prints the counters (VRNIC_STATS), unlinks the
  // counters file. Idempotent; g_mu held, mu_ not.
  void finish();
  std::string stats_text();

  // ---- progress.cc (mu_ held unless said) ----
  // Sends the port's doorbell batch, and the held ACKs if their time has come.
  void flush(uint64_t now);
  // Moves up to `batches` receive batches from the socket into the engine, then runs the
  // timers if one is due. Returns true if the socket may still hold packets.
  bool service(int batches, uint64_t now, bool flush_direct = true);
  bool serviced_datagrams = false;  // the last service took datagrams
  // Hands received packets to the engine; their ACKs may be held for the program's answer
  // (Scheduler, "ACK hold") when `may_hold`.
  void deliver(std::span<const engine::WirePacket> packets, uint64_t now, bool may_hold);
  // A program thread's turn at the sockets (an empty poll_cq, a wait for an event): one
  // receive batch and the due timers, one extra receive queue, the published rates.
  void progress(uint64_t now);
  void poll_queue(uint64_t now);  // an extra receive queue, read by an empty poll_cq
  void publish_rates(uint64_t now);
  void kick();                                 // any thread
  void progress_loop();                        // the progress thread
  bool thread_sleep_until(uint64_t deadline);  // no lock: ppoll on socket and kick fd
  void queue_loop(RxThread& q);                // a receive-queue thread
  bool queue_receive(RxThread& q);  // q.mu held: one batch into the engine; true if full
};

}  // namespace vrnic::live
