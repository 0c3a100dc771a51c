// LiveNic: the process-wide device — UDP port, wall clock, counters file, progress thread.
//
// Locking: mu_ (the device lock) serialises every engine call and every use of the UdpPort
// (send happens inside engine calls; recvmmsg happens under mu_ so that packets enter the
// engine in the order the socket delivered them, whichever thread receives them). mu_ is
// never held across a blocking call: the progress thread sleeps in ppoll() without it.
// g_mu guards the singleton pointer and its reference count; it is taken before mu_.
#include "live/cc_config.h"
#include "live/live_nic.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <thread>

#include "live/address.h"
#include "live/call_pattern.h"
#include "live/counters_file.h"
#include "live/direct_window.h"
#include "live/host_memory.h"
#include "transport/udp/fault_injector.h"
#include "transport/udp/log.h"
#include "transport/udp/pcap_writer.h"
#include "transport/udp/udp_port.h"

extern char* program_invocation_short_name;

namespace vrnic::live {
namespace {

constexpr uint64_t kNoTimer = UINT64_MAX;
// Receive batches handled per lock hold before the lock is offered to application threads.
constexpr int kBatchesPerHold = 8;
// While an application thread has called into the device within this many ns, it moves the
// packets itself (poll_cq receives) and the progress thread stays off the device lock and
// the CPU. A busy-polling thread calls every 1-2 us. With ACKs held for answers (below),
// measured on 2 cores (20,000 iterations, averages): 5 us: ib_send_lat 13-15 us, 64 B
// ib_send_bw 0.26 M msg/s; 20 us: 7-9 us, 0.64 M; 50 us: 4.9-5.1 us, 0.9-1.0 M; ib_write_lat
// 10-35, 10-11, 15-16 us. A program that leaves the CQ after completions is not waited for
// (CallPattern), nor one that arms its CQ to sleep (end_deferral).
constexpr uint64_t kDefaultDeferNs = 50000;
constexpr uint64_t kBurstGapNs = 2000;  // calls closer than this are one burst (direct mode)
constexpr uint64_t kQuietDeferNs = 50000;  // deferral at least, while only direct copies move
// While the program keeps calling, the deferring thread looks again after defer_ns, then
// twice as late each time it finds the program still there, up to this: each look is a
// wake-up that takes a CPU from a polling program on a small machine (VRNIC_RECHECK_MAX_US).
// It is also how late the thread takes over from a program that stops calling without a
// word (no completion, no ibv_req_notify_cq). 1 ms: ~2,500 preemptions a second of an
// ib_send_lat client; 4 ms: 563 (docs/live.md "The progress thread").
constexpr uint64_t kRecheckMaxNs = 4000000;
// After it received packets the thread keeps looking, without sleeping, this long before it
// sleeps on the socket (VRNIC_SPIN_US; 0: never): while packets keep coming (a passive
// responder, the receiver of a stream) no wake-up is paid per packet, by it or by the sender
// whose sendmmsg would wake it. Idle devices never spin.
constexpr uint64_t kSpinNs = 50000;
// An ACK a receive makes is held this long for the program's answer (CallPattern); only
// ACKs (and CNPs) are held, never responses that carry data. The answers of a program that
// has just started come late (its threads are still being scheduled onto the cores): with
// 20 us the pattern never settled and ib_write_lat averaged 60-130 us; with 100 us or more
// it settles within the first iterations (250 us: 9-12 us).
constexpr uint64_t kDefaultAckHoldNs = 250000;

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

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

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

std::mutex g_mu;
LiveNic* g_nic = nullptr;
int g_refs = 0;
bool g_atexit_registered = false;

}  // namespace

struct LiveNic::Impl {
  explicit Impl(const LiveNicCallbacks& cb) : sink(cb) {}

  std::string name = "vrnic0";
  std::string ip_string;
  bool ipv6 = false;
  engine::Gid gid;
  WallClock clock;
  ProcessMemory host_memory;  // ODP page checks
  CallbackSink sink;
  std::unique_ptr<transport::PcapWriter> pcap;
  std::unique_ptr<transport::FaultInjector> faults;
  std::unique_ptr<transport::UdpPort> port;
  std::unique_ptr<DirectWindow> direct;  // VRNIC_DIRECT=1 (outlives the engine)
  std::unique_ptr<engine::Device> device;
  CountersFile counters_file;
  // The QPs' DCQCN rates, published in the counters file at most every kRatesPeriodNs once
  // a CNP has been handled (`vrnic stats` shows them).
  std::vector<engine::QpRate> rates;
  uint64_t rates_ns = 0;
  void publish_rates_locked(uint64_t now);
  transport::RecvBatch batch;  // used only under mu_
  int kick_fd = -1;
  pid_t owner_pid = 0;
  std::thread* thread = nullptr;  // heap: a forked child must never destroy the parent's
  std::atomic<bool> stop{false};
  uint64_t defer_ns = kDefaultDeferNs;     // VRNIC_DEFER_US overrides
  uint64_t recheck_max_ns = kRecheckMaxNs;  // VRNIC_RECHECK_MAX_US overrides
  uint64_t spin_ns = kSpinNs;  // VRNIC_SPIN_US overrides
  uint64_t ack_hold_ns = kDefaultAckHoldNs;  // VRNIC_ACK_HOLD_US overrides (0: never hold)
  CallPattern pattern{kDefaultAckHoldNs, kDefaultDeferNs};  // mu_
  // Sends what the port queued, unless it is held for the program's answer (mu_).
  void flush_port(uint64_t now);
  // Moves up to `batches` receive batches from the socket into the engine, then runs the
  // timers if one is due. Returns true if the socket may still hold packets (mu_).
  bool service_locked(int batches, uint64_t now, bool flush_direct = true);
  bool serviced_datagrams = false;  // the last service_locked took datagrams (mu_)
  void receive_one_locked(uint64_t now);
  // Hands received packets to the engine; ACKs they make may be held for the program's
  // answer (CallPattern) when the program's own poll received them.
  void deliver_locked(std::span<const engine::WirePacket> packets, uint64_t now, bool may_hold);

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
  int stop_fd = -1;        // written once at shutdown: every queue thread returns
  size_t poll_turn = 0;    // the extra queue the next empty poll_cq reads (mu_)
  void queue_loop(RxThread& q);
  bool queue_receive(RxThread& q);  // q.mu held: one batch into the engine; true if full
  void poll_queue_locked(uint64_t now);
  std::atomic<uint64_t> last_poll_ns{0};  // last empty LiveNic::poll_cq; 0 after completions
  uint64_t prev_call_end_ns = 0;  // when the program's last post or poll ended (mu_)
  bool in_burst = false;      // the last call was held; until the next poll (mu_)
  bool prev_was_send = false;  // the program's last call was a post_send (mu_)
  uint64_t packets_at_poll = ~0ull;  // rx + tx packets at the last poll with completions; mu_
  std::atomic<bool> wire_quiet{false};  // that poll found no packet moved since the one before
  std::atomic<bool> deferring{false};     // the progress thread is in its deferral sleep
  uint64_t thread_deadline_ns = kNoTimer;  // what the progress thread sleeps towards; mu_
  bool finished = false;                   // thread stopped, stats printed; mu_
  LiveNic* nic = nullptr;

  int start();  // 0 or errno
  void progress_loop();
  void stop_thread();
  // Stops the thread, flushes the capture, prints the counters (VRNIC_STATS), unlinks the
  // counters file. Idempotent; g_mu held, mu_ not.
  void finish();
};

LiveNic::LiveNic() = default;

LiveNic::~LiveNic() {
  if (!impl_) return;
  impl_->device.reset();  // before the port and the counters mapping it points to
  device_ = nullptr;
  if (impl_->kick_fd >= 0) close(impl_->kick_fd);
  if (impl_->stop_fd >= 0) close(impl_->stop_fd);
  delete impl_;
}

const std::string& LiveNic::name() const { return impl_->name; }
const engine::Gid& LiveNic::gid() const { return impl_->gid; }
const std::string& LiveNic::ip_string() const { return impl_->ip_string; }
bool LiveNic::is_ipv6() const { return impl_->ipv6; }
const engine::Counters& LiveNic::counters() const { return device_->counters(); }

void LiveNic::set_gsi_handler(GsiHandler h) {
  locked([&](engine::Device&) { impl_->sink.gsi_ = std::move(h); });
}

void LiveNic::send_gsi(const wire::IpUdpInfo& to, std::span<const uint8_t, 256> mad) {
  locked([&](engine::Device& d) { d.send_gsi(to, mad); });
  // The answer to a CM MAD is an event the program waits for on its channel: the progress
  // thread receives it, so it watches the socket now rather than after its deferral.
  end_deferral();
}
const std::string& LiveNic::counters_path() const { return impl_->counters_file.path(); }

void LiveNic::end_deferral() {
  last_app_ns_.store(0, std::memory_order_relaxed);
  if (impl_->deferring.load(std::memory_order_relaxed)) kick();
}

void LiveNic::kick() {
  uint64_t one = 1;
  ssize_t ignored = write(impl_->kick_fd, &one, sizeof one);
  (void)ignored;
}

uint64_t LiveNic::syscall_mark() const {
  const transport::UdpPortStats s = impl_->port->stats();
  const engine::Counters& c = device_->counters();
  return s.tx_packets + s.rx_packets + c.direct_writes + c.direct_reads + c.direct_fallbacks;
}

uint64_t LiveNic::before_call_locked(bool post_send, uint64_t now) {
  // Cork for a program busy-polling its CQ: its next poll_cq (within defer_ns) flushes.
  impl_->pattern.on_call(now);
  if (post_send) impl_->pattern.on_post_send(now);  // a held ACK leaves with this post
  const bool busy_polling = impl_->defer_ns != 0 &&
      now - impl_->last_poll_ns.load(std::memory_order_relaxed) < impl_->defer_ns;
  // Direct copies: a call that comes within kBurstGapNs of the END of the program's previous
  // call (a post or a poll) starts a burst, which lasts until the program's next poll: the
  // burst's copies are held and that poll performs them in one system call (a full batch
  // goes at once; the progress thread performs what is left if the program goes quiet). A
  // lone post, as in a latency test, is copied at once. Measured from the end, so the time
  // a copy itself takes never breaks a burst (else one copy made the next gap long, whose
  // copy made the next one long, and so on: two copies per call instead of thirty).
  const bool hold = impl_->defer_ns != 0 &&
                    (impl_->in_burst || now - impl_->prev_call_end_ns < kBurstGapNs);
  impl_->in_burst = hold;
  device_->set_direct_hold(hold);
  // Packets likewise, for a post_send that closely follows another post_send: a run of
  // them (ib_write_bw between polls that return completions) leaves in one sendmmsg at the
  // next poll_cq instead of one system call per post, while the one post a latency test
  // makes after its poll leaves at once.
  const bool send_run = hold && post_send && impl_->prev_was_send;
  impl_->prev_was_send = post_send;
  impl_->port->set_cork(busy_polling || send_run);
  return syscall_mark();
}

void LiveNic::after_call_locked(uint64_t start, uint64_t mark) {
  const uint64_t now = syscall_mark() == mark ? start : monotonic_ns();
  impl_->prev_call_end_ns = now;
  impl_->port->set_cork(false);
  device_->set_direct_hold(false);
  const uint64_t held_until = impl_->pattern.held_until();
  if (held_until != 0 && now >= held_until) impl_->flush_port(now);  // no answer came
  // Held-back packets or copies: the program's next call sends them, or a deferring progress
  // thread at its next look (within its backoff, VRNIC_RECHECK_MAX_US at most); a sleeping
  // one must be woken, unless it wakes before a held ACK is due anyway.
  const bool due_late = held_until == 0 || held_until < impl_->thread_deadline_ns;
  if (((impl_->port->queued() > 0 && due_late) || device_->direct_queued()) &&
      !impl_->deferring.load(std::memory_order_relaxed)) {
    impl_->thread_deadline_ns = 0;
    kick();
    return;
  }
  // An earlier timer: a sleeping thread must recompute its deadline. A deferring one need
  // not: while the program calls, its polls run the timers, and the thread computes its
  // deadline afresh when it stops deferring (a kick would only take a CPU from the program
  // and start its backoff again).
  if (device_->next_timer_ns() < impl_->thread_deadline_ns &&
      !impl_->deferring.load(std::memory_order_relaxed)) {
    impl_->thread_deadline_ns = 0;  // the thread recomputes it; one kick is enough
    kick();
  }
}

// ---- servicing (mu_ held) -----------------------------------------------------------------

void LiveNic::Impl::flush_port(uint64_t now) {
  if (port->queued() == 0) {
    pattern.release();  // what was held left with other packets
    return;
  }
  if (pattern.keep_held(now)) return;
  port->flush();
}

// One receive batch. If the program answers what it receives, the ACKs the receive makes
// are held to leave with the answer (CallPattern), unless it made other packets too.
void LiveNic::Impl::receive_one_locked(uint64_t now) {
  port->receive(batch);
  deliver_locked(batch.packets(), now, true);
}

void LiveNic::Impl::deliver_locked(std::span<const engine::WirePacket> packets, uint64_t now,
                                   bool may_hold) {
  if (packets.empty()) return;
  engine::Device& device = *nic->device_;
  const bool hold = may_hold && pattern.hold_receives();
  const uint64_t tx_before = device.counters().tx_packets;
  const uint64_t sent_before = port->stats().tx_packets;
  // Only ACKs wait in the port: data the receive lets go (an ACK that opened a window)
  // leaves at once from the engine's buffers, with no copy into the port's queue.
  if (hold) port->set_hold_acks(true);
  device.receive(packets);
  if (hold) port->set_hold_acks(false);
  if (!may_hold) return;
  if (device.counters().tx_packets == tx_before) return;
  const bool held = hold && port->queued_acks_only() && port->stats().tx_packets == sent_before;
  pattern.on_receive_made_packets(now, held);
  if (hold && !held) {
    pattern.release();
    port->flush();
  }
}

bool LiveNic::Impl::service_locked(int batches, uint64_t now, bool flush_direct) {
  engine::Device& device = *nic->device_;
  if (flush_direct) device.direct_flush();  // direct copies held back for the program
  flush_port(now);  // a doorbell batch held back likewise
  bool more = false;
  serviced_datagrams = false;
  for (int i = 0; i < batches; ++i) {
    receive_one_locked(now);
    // (A receive that asked for one datagram and got it is full: the next one, often
    // empty, must not hide that this service took packets.)
    serviced_datagrams |= batch.datagrams() > 0;
    more = batch.full();
    if (!more) break;
  }
  // The time at the start: a timer that fell due during the receive fires next time.
  if (device.next_timer_ns() <= now) device.on_timer();
  return more;
}

void LiveNic::Impl::publish_rates_locked(uint64_t now) {
  constexpr uint64_t kRatesPeriodNs = 1000000;
  if (now - rates_ns < kRatesPeriodNs || nic->device_->counters().rp_cnp_handled == 0) return;
  rates_ns = now;
  nic->device_->qp_rates(rates);
  counters_file.set_rates(rates);
}

int LiveNic::poll_cq(engine::Cq* cq, engine::WorkCompletion* out, int n) {
  const uint64_t t = monotonic_ns();
  last_app_ns_.store(t, std::memory_order_relaxed);  // keeps the progress thread off the lock
  std::lock_guard<DeviceMutex> g(mu_);
  const uint64_t mark = syscall_mark();
  impl_->in_burst = false;
  impl_->prev_was_send = false;
  impl_->pattern.on_call(t);
  impl_->flush_port(t);  // the posts before this poll leave now, in one batch
  int got = device_->poll_cq(cq, out, n);
  if (got == 0) {
    // Busy-polling programs make progress here without waiting for the thread.
    impl_->service_locked(1, t, false);
    if (!impl_->rx_threads.empty()) impl_->poll_queue_locked(t);
    impl_->publish_rates_locked(t);
    got = device_->poll_cq(cq, out, n);
  }
  if (got == 0) {
    impl_->last_poll_ns.store(t, std::memory_order_relaxed);  // a busy poll in progress
  } else {
    // Completions: the program may now leave the CQ (ib_write_lat spins on memory next), so
    // the progress thread must watch the socket again at once rather than after defer_ns,
    // unless the program came straight back last time (CallPattern).
    // Not when the device moved no packet since the last such poll (every completion came
    // from a direct copy): then there is nothing for the thread to watch, and it would only
    // take the lock from the program (it still looks within defer_ns of the last call).
    impl_->last_poll_ns.store(0, std::memory_order_relaxed);
    const engine::Counters& c = device_->counters();
    const uint64_t packets = c.rx_packets + c.tx_packets;
    impl_->wire_quiet.store(packets == impl_->packets_at_poll, std::memory_order_relaxed);
    if (packets != impl_->packets_at_poll) {
      impl_->packets_at_poll = packets;
      if (!impl_->pattern.on_completions(t)) {
        last_app_ns_.store(0, std::memory_order_relaxed);
        if (impl_->deferring.load(std::memory_order_relaxed)) kick();
      }
    }
  }
  after_call_locked(t, mark);
  return got;
}

// ---- the receive queues' threads -----------------------------------------------------------

bool LiveNic::Impl::queue_receive(RxThread& q) {
  // The kernel's copy into the batch runs without the device lock, beside the other queues'.
  if (port->receive(q.batch, q.queue) == 0) return false;
  std::lock_guard<DeviceMutex> g(nic->mu_);
  engine::Device& device = *nic->device_;
  // Not held for an answer: that is the program's own poll's business (queue 0 or
  // poll_queue_locked); what the engine makes here leaves at once.
  deliver_locked(q.batch.packets(), clock.now_ns(), false);
  // A timer the packets armed earlier than the one the progress thread sleeps towards.
  if (device.next_timer_ns() < thread_deadline_ns && !deferring.load(std::memory_order_relaxed)) {
    thread_deadline_ns = 0;
    nic->kick();
  }
  return q.batch.full();
}

void LiveNic::Impl::queue_loop(RxThread& q) {
  prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
  uint64_t rx_at = 0;  // when this thread last received a packet
  while (!stop.load(std::memory_order_relaxed)) {
    bool more;
    {
      std::lock_guard<std::mutex> g(q.mu);
      more = queue_receive(q);
      if (q.batch.datagrams() > 0) rx_at = clock.now_ns();
    }
    if (more) continue;
    // As the progress thread: keep looking a while after packets came (no wake-up each).
    if (spin_ns != 0 && clock.now_ns() - rx_at < spin_ns) {
      __builtin_ia32_pause();
      continue;
    }
    pollfd fds[2] = {{port->queue_fd(q.queue), POLLIN, 0}, {stop_fd, POLLIN, 0}};
    ppoll(fds, 2, nullptr, nullptr);
  }
}

// A program polling an empty CQ reads one of the extra queues too, a different one each
// time: a QP whose flow the kernel put on another queue than the first gets its packets
// without a thread hand-off every few polls. A queue its thread is reading is skipped (the
// thread hands those packets over).
void LiveNic::Impl::poll_queue_locked(uint64_t now) {
  RxThread& q = *rx_threads[poll_turn++ % rx_threads.size()];
  std::unique_lock<std::mutex> g(q.mu, std::try_to_lock);
  if (!g.owns_lock()) return;
  if (port->receive(q.batch, q.queue) > 0) deliver_locked(q.batch.packets(), now, true);
}

// ---- the progress thread ------------------------------------------------------------------

void LiveNic::Impl::progress_loop() {
  pthread_setname_np(pthread_self(), "vrnic-progress");
  // The deferral sleeps are tens of µs: without this the default 50 µs timer slack would
  // more than double them.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
  engine::Device& device = *nic->device_;
  const int kick_only = 1;  // ppoll on the kick eventfd alone (fds + 1)
  uint64_t backoff = 0;     // the next look, while the program stays (0: at defer_ns)
  uint64_t rx_at = 0;       // when the thread last received a packet
  for (;;) {
    uint64_t deadline;
    bool more;
    bool polls_back = false;  // the program polls and is expected back (CallPattern)
    // A thread busy-polling the CQ receives and runs timers itself (LiveNic::poll_cq): taking
    // the lock now would only make it wait, and on a small machine take its CPU. Sleep
    // until it has been quiet for defer_ns (or a kick), then look again.
    if (defer_ns != 0) {
      deferring.store(true, std::memory_order_relaxed);
      uint64_t now = clock.now_ns();
      uint64_t last = nic->last_app_ns_.load(std::memory_order_relaxed);
      // Only direct copies lately (no packet): nothing on the socket to take over, so keep
      // off longer; waking every defer_ns would take the lock from the program's bursts.
      const uint64_t defer =
          wire_quiet.load(std::memory_order_relaxed) ? std::max(defer_ns, kQuietDeferNs) : defer_ns;
      if (now - last < defer && !stop.load(std::memory_order_relaxed)) {
        const uint64_t wait = std::max(last + defer - now, backoff);
        timespec ts{static_cast<time_t>(wait / 1000000000ull),
                    static_cast<long>(wait % 1000000000ull)};
        pollfd kfd{kick_fd, POLLIN, 0};
        const int pr = ppoll(&kfd, kick_only, &ts, nullptr);
        // Kicked: the program wants the thread (look at defer_ns again); else it stayed.
        backoff = pr > 0 ? 0 : std::clamp(2 * backoff, defer, std::max(defer, recheck_max_ns));
        if (pr > 0) {
          uint64_t v;
          ssize_t ignored = read(kick_fd, &v, sizeof v);
          (void)ignored;
        }
        continue;
      }
      deferring.store(false, std::memory_order_relaxed);
      backoff = 0;
    }
    {
      std::lock_guard<DeviceMutex> g(nic->mu_);
      if (stop.load(std::memory_order_relaxed)) break;
      const uint64_t now = clock.now_ns();
      pattern.on_quiet(now);
      more = service_locked(kBatchesPerHold, now);
      publish_rates_locked(now);
      if (serviced_datagrams) {
        wire_quiet.store(false, std::memory_order_relaxed);
        rx_at = now;
      }
      deadline = device.next_timer_ns();
      // Work the engine holds back (window, pacing) without a timer: look again soon.
      if (deadline == kNoTimer && device.has_pending_tx()) deadline = clock.now_ns() + 1000000;
      if (port->queued() > 0 && pattern.held_until() != 0)
        deadline = std::min(deadline, pattern.held_until());  // an ACK held for an answer
      thread_deadline_ns = deadline;
      polls_back = pattern.comes_back();
    }
    if (more) continue;  // the socket still holds packets: no need to ask poll
    if (spin_ns != 0 && !polls_back && clock.now_ns() - rx_at < spin_ns) {
      // Packets came lately and the program is not in the device: look again without
      // sleeping (a wake-up costs tens of µs; a passive responder answers sooner). Not when
      // the program is a poller expected back: it most likely lost its CPU, and on a small
      // machine a spinning thread keeps it from getting one back (docs/live.md).
      __builtin_ia32_pause();
      continue;
    }
    pollfd fds[2] = {{port->fd(), POLLIN, 0}, {kick_fd, POLLIN, 0}};
    timespec ts, *timeout = nullptr;
    if (deadline != kNoTimer) {
      uint64_t now = clock.now_ns();
      uint64_t wait = deadline > now ? deadline - now : 0;
      ts.tv_sec = static_cast<time_t>(wait / 1000000000ull);
      ts.tv_nsec = static_cast<long>(wait % 1000000000ull);
      timeout = &ts;
    }
    int r = ppoll(fds, 2, timeout, nullptr);
    if (r > 0 && (fds[1].revents & POLLIN)) {
      uint64_t v;
      ssize_t ignored = read(kick_fd, &v, sizeof v);
      (void)ignored;
    }
  }
}

int LiveNic::Impl::start() {
  const char* faults_env = std::getenv("VRNIC_FAULTS");
  transport::UdpPortOptions options;
  if (faults_env && *faults_env) {
    transport::FaultConfig fc;
    std::string why;
    if (!transport::parse_fault_config(faults_env, fc, why)) {
      transport::error_log("VRNIC_FAULTS: %s", why.c_str());
      return EINVAL;
    }
    faults = std::make_unique<transport::FaultInjector>(fc);
    options.faults = faults.get();
  }
  // VRNIC_OFFLOAD=0: no UDP_SEGMENT / UDP_GRO (comparisons, kernels without them).
  if (const char* o = std::getenv("VRNIC_OFFLOAD"); o && std::strcmp(o, "0") == 0)
    options.offload = false;
  if (const char* q = std::getenv("VRNIC_RX_QUEUES"); q && *q) {
    char* end = nullptr;
    const unsigned long n = std::strtoul(q, &end, 10);
    if (*end != '\0' || n < 1 || n > transport::UdpPortOptions::kMaxRxQueues) {
      transport::error_log("VRNIC_RX_QUEUES: '%s' is not a number of queues from 1 to %zu", q,
                           transport::UdpPortOptions::kMaxRxQueues);
      return EINVAL;
    }
    options.rx_queues = n;
  }
  const char* pcap_env = std::getenv("VRNIC_PCAP");
  if (pcap_env && *pcap_env) {
    int err = 0;
    pcap = transport::PcapWriter::open(pcap_env, err);
    if (!pcap) transport::error_log("VRNIC_PCAP %s: %s (no capture)", pcap_env, std::strerror(err));
    options.pcap = pcap.get();
  }

  const char* ip_env = std::getenv("VRNIC_IP");
  int err = 0;
  std::string message;
  port = open_device_port(ip_env ? ip_env : "", options, err, message);
  if (!port) {
    transport::error_log("cannot open %s: %s", name.c_str(), message.c_str());
    return err;
  }
  ip_string = port->address().to_string();
  ipv6 = port->address().ipv6;
  gid.raw = port->address().gid();

  engine::DeviceConfig config;
  config.gid = gid;
  if (int mtu = interface_mtu(port->address()); mtu > 0)
    config.limits.active_mtu = ib_mtu_for(mtu, ipv6, config.limits.max_mtu);
  // The requester's window: a quarter of the receive buffer the kernel granted this socket
  // (its figure counts bookkeeping too), the peer having been granted the same; 1 MiB at
  // most. VRNIC_SEND_WINDOW_KB sets it.
  config.send_window_bytes =
      static_cast<uint32_t>(std::clamp(port->granted_rcvbuf() / 4, 0, 1 << 20));
  if (const char* w = std::getenv("VRNIC_SEND_WINDOW_KB"); w && *w)
    config.send_window_bytes = static_cast<uint32_t>(std::strtoul(w, nullptr, 10) * 1024);
  if (const char* cc = std::getenv("VRNIC_CC"); cc && *cc) {
    std::string why;
    if (!parse_cc_spec(cc, config.cc, why)) {
      transport::error_log("VRNIC_CC: %s", why.c_str());
      return EINVAL;
    }
  }
  const char* prog = program_invocation_short_name;
  if (int e = counters_file.create(name, ip_string, prog ? prog : "?"); e != 0)
    transport::debug_log("no counters file (%s): counting privately", std::strerror(e));
  config.counters = counters_file.counters();
  if (env_flag("VRNIC_DIRECT")) {
    std::array<uint8_t, 16> ip{};
    const auto& g = gid.raw;
    if (ipv6) std::memcpy(ip.data(), g.data(), 16);
    else std::memcpy(ip.data(), g.data() + 12, 4);
    int e = 0;
    direct.reset(DirectWindow::create(ipv6, ip, e));
    if (!direct)
      transport::error_log("VRNIC_DIRECT: cannot create the direct-mode table %s: %s "
                           "(packets only)", DirectWindow::path_for(ipv6, ip).c_str(),
                           std::strerror(e));
    else
      transport::debug_log("direct mode: table %s", direct->path().c_str());
    config.direct = direct.get();
  }

  nic->device_ = new engine::Device(config, *port, clock, host_memory, sink);
  device.reset(nic->device_);
  if (const char* d = std::getenv("VRNIC_DEFER_US"); d && *d)
    defer_ns = std::strtoull(d, nullptr, 10) * 1000;
  if (const char* r = std::getenv("VRNIC_SPIN_US"); r && *r)
    spin_ns = std::strtoull(r, nullptr, 10) * 1000;
  if (const char* r = std::getenv("VRNIC_RECHECK_MAX_US"); r && *r)
    recheck_max_ns = std::strtoull(r, nullptr, 10) * 1000;
  if (const char* h = std::getenv("VRNIC_ACK_HOLD_US"); h && *h)
    ack_hold_ns = std::strtoull(h, nullptr, 10) * 1000;
  pattern = CallPattern(ack_hold_ns, defer_ns);
  kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (kick_fd < 0) return errno;
  owner_pid = getpid();

  // The thread takes no signals: the program's handlers (perftest's SIGALRM for -D) run on
  // the program's own threads.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  thread = new std::thread([this] { progress_loop(); });
  if (port->rx_queues() > 1) {
    stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (stop_fd < 0) {
      pthread_sigmask(SIG_SETMASK, &old, nullptr);
      return errno;
    }
    for (size_t i = 1; i < port->rx_queues(); ++i) {
      rx_threads.push_back(std::make_unique<RxThread>(i));
      RxThread* q = rx_threads.back().get();
      q->thread = new std::thread([this, q] { queue_loop(*q); });
      pthread_setname_np(q->thread->native_handle(), "vrnic-rxq");
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  transport::debug_log("%s up: %s, gid index 0 %s, active mtu %u, counters %s", name.c_str(),
                       ip_string.c_str(), ip_string.c_str(), config.limits.active_mtu,
                       counters_file.path().c_str());
  return 0;
}

void LiveNic::Impl::stop_thread() {
  stop.store(true);
  uint64_t one = 1;
  if (stop_fd >= 0) {
    ssize_t ignored = write(stop_fd, &one, sizeof one);
    (void)ignored;
  }
  for (auto& q : rx_threads) {
    if (!q->thread) continue;
    q->thread->join();
    delete q->thread;
    q->thread = nullptr;
  }
  if (!thread) return;
  ssize_t ignored = write(kick_fd, &one, sizeof one);
  (void)ignored;
  thread->join();
  delete thread;
  thread = nullptr;
}

void LiveNic::Impl::finish() {
  if (owner_pid != getpid()) return;  // a forked child: the thread and files are the parent's
  stop_thread();
  std::lock_guard<DeviceMutex> g(nic->mu_);
  if (finished) return;
  finished = true;
  nic->device_->direct_flush();  // releases the pins held in peers' tables
  port->flush();
  if (pcap) pcap->flush();
  if (env_flag("VRNIC_STATS")) {
    std::string text = format_nonzero(nic->device_->counters());
    if (text.empty()) text = "(all zero)\n";
    const transport::UdpPortStats ps = port->stats();
    if (ps.tx_dropped) text += "udp_tx_dropped " + std::to_string(ps.tx_dropped) + "\n";
    if (direct && direct->copy_calls())
      text += "direct_copy_calls " + std::to_string(direct->copy_calls()) + "\n";
    if (ps.rx_truncated) text += "udp_rx_truncated " + std::to_string(ps.rx_truncated) + "\n";
    if (ps.rx_fault_dropped)
      text += "udp_rx_fault_dropped " + std::to_string(ps.rx_fault_dropped) + "\n";
    nic->device_->qp_rates(rates);
    std::vector<CountersRate> shown;
    for (const engine::QpRate& r : rates) shown.push_back(to_counters_rate(r));
    text += format_rates(shown);
    const char* prog = program_invocation_short_name;
    std::fprintf(stderr, "vrnic: %s %s (%s, pid %d) counters:\n%s", name.c_str(),
                 ip_string.c_str(), prog ? prog : "?", static_cast<int>(getpid()), text.c_str());
  }
  counters_file.unlink_file();  // `vrnic stats` stops listing this program
  if (direct) direct->close_table();
}

// ---- acquire / release / exit -------------------------------------------------------------

void LiveNic::finish_at_exit() {
  std::lock_guard<std::mutex> g(g_mu);
  // The device is not freed here: other threads of the program may still be inside a verb
  // (and count into the counters mapping). Stop the thread, flush, unlink; the kernel
  // closes the sockets.
  if (g_nic) g_nic->impl_->finish();
}

LiveNic* LiveNic::acquire(const LiveNicCallbacks& callbacks, int& err) {
  std::lock_guard<std::mutex> g(g_mu);
  if (g_nic) {
    ++g_refs;
    err = 0;
    return g_nic;
  }
  auto* nic = new LiveNic();
  nic->impl_ = new Impl(callbacks);
  nic->impl_->nic = nic;
  err = nic->impl_->start();
  if (err != 0) {
    nic->impl_->stop_thread();
    delete nic;
    return nullptr;
  }
  if (!g_atexit_registered) {
    std::atexit(&LiveNic::finish_at_exit);
    g_atexit_registered = true;
  }
  g_nic = nic;
  g_refs = 1;
  return nic;
}

void LiveNic::release(LiveNic* nic) {
  std::lock_guard<std::mutex> g(g_mu);
  if (!nic || nic != g_nic || g_refs <= 0) return;
  if (--g_refs > 0) return;
  g_nic = nullptr;
  nic->impl_->finish();
  delete nic;  // the engine first, then the port and the counters mapping
}

}  // namespace vrnic::live
