// The live device's threads and the servicing they share with poll_cq: the progress thread,
// the receive-queue threads, and the moves of packets from the sockets into the engine. The
// decisions are the Scheduler's; this file holds the locks and makes the system calls.
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "live/live_nic_impl.h"

namespace vrnic::live {
namespace {

// The deferral sleeps are tens of µs: without this the default 50 µs timer slack would more
// than double them.
void tighten_timer_slack() { prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL); }

timespec to_timespec(uint64_t ns) {
  return {static_cast<time_t>(ns / 1000000000ull), static_cast<long>(ns % 1000000000ull)};
}

void drain_eventfd(int fd) {
  uint64_t v;
  ssize_t ignored = read(fd, &v, sizeof v);
  (void)ignored;
}

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

DeviceView LiveNic::Impl::view() const {
  DeviceView v;
  v.next_timer_ns = device->next_timer_ns();
  v.tx_queued = device->tx_queued();
  v.direct_queued = device->direct_queued();
  return v;
}

void LiveNic::Impl::kick() {
  uint64_t one = 1;
  ssize_t ignored = write(kick_fd, &one, sizeof one);
  (void)ignored;
}

// ---- servicing (mu_ held) -----------------------------------------------------------------

void LiveNic::Impl::flush(uint64_t now) {
  device->flush_tx();
  if (sched().acks_due(now, device->held_acks_deadline())) device->release_acks();
}

void LiveNic::Impl::deliver(std::span<const engine::WirePacket> packets, uint64_t now,
                            bool may_hold) {
  if (packets.empty()) return;
  const uint64_t hold_ns = may_hold ? sched().ack_hold_for_receive() : 0;
  const engine::Device::ReceiveResult r =
      device->receive(packets, hold_ns, sched().ack_hold_crossed());
  if (may_hold && (r.sent > 0 || r.acks_held)) sched().on_receive_made_packets(now);
}

bool LiveNic::Impl::service(int batches, uint64_t now, bool flush_direct) {
  if (flush_direct) device->direct_flush();  // direct copies held back for the program
  flush(now);  // a doorbell batch held back likewise
  bool more = false;
  serviced_datagrams = false;
  for (int i = 0; i < batches; ++i) {
    port->receive(batch);
    deliver(batch.packets(), now, true);
    // (A receive that asked for one datagram and got it is full: the next one, often
    // empty, must not hide that this service took packets.)
    serviced_datagrams |= batch.datagrams() > 0;
    more = batch.full();
    if (!more) break;
  }
  // The time at the start: a timer that fell due during the receive fires next time.
  if (device->next_timer_ns() <= now) device->on_timer();
  return more;
}

void LiveNic::Impl::publish_rates(uint64_t now) {
  constexpr uint64_t kRatesPeriodNs = 1000000;
  if (now - rates_ns < kRatesPeriodNs || device->counters().rp_cnp_handled == 0) return;
  rates_ns = now;
  device->qp_rates(rates);
  counters_file.set_rates(rates);
}

void LiveNic::Impl::progress(uint64_t now) {
  service(1, now, false);
  if (!rx_threads.empty()) poll_queue(now);
  publish_rates(now);
}

// A program polling an empty CQ reads one of the extra queues too, a different one each
// time: a QP whose flow the kernel put on another queue than the first gets its packets
// without a thread hand-off every few polls. A queue its thread is reading is skipped (the
// thread hands those packets over).
void LiveNic::Impl::poll_queue(uint64_t now) {
  RxThread& q = *rx_threads[poll_turn++ % rx_threads.size()];
  std::unique_lock<std::mutex> g(q.mu, std::try_to_lock);
  if (!g.owns_lock()) return;
  if (port->receive(q.batch, q.queue) > 0) deliver(q.batch.packets(), now, true);
}

// ---- the receive queues' threads -----------------------------------------------------------

bool LiveNic::Impl::queue_receive(RxThread& q) {
  // The kernel's copy into the batch runs without the device lock, beside the other queues'.
  if (port->receive(q.batch, q.queue) == 0) return false;
  std::lock_guard<DeviceMutex> g(nic.mu_);
  // Not held for an answer: that is the program's own poll's business (queue 0 or
  // poll_queue); what the engine makes here leaves at once.
  deliver(q.batch.packets(), clock.now_ns(), false);
  if (sched().timer_kick(device->next_timer_ns())) kick();
  return q.batch.full();
}

void LiveNic::Impl::queue_loop(RxThread& q) {
  tighten_timer_slack();
  uint64_t rx_at = 0;  // when this thread last received a packet
  while (!stop.load(std::memory_order_relaxed)) {
    bool more;
    {
      std::lock_guard<std::mutex> g(q.mu);
      more = queue_receive(q);
      if (q.batch.datagrams() > 0) rx_at = clock.now_ns();
    }
    if (more) continue;
    if (sched().queue_spins(clock.now_ns(), rx_at)) {
      cpu_relax();
      continue;
    }
    pollfd fds[2] = {{port->queue_fd(q.queue), POLLIN, 0}, {stop_fd, POLLIN, 0}};
    ppoll(fds, 2, nullptr, nullptr);
  }
}

// ---- the progress thread ------------------------------------------------------------------

// Sleeps on the socket and the kick eventfd until `deadline` (kNever: no timeout).
bool LiveNic::Impl::thread_sleep_until(uint64_t deadline) {
  pollfd fds[2] = {{port->fd(), POLLIN, 0}, {kick_fd, POLLIN, 0}};
  timespec ts, *timeout = nullptr;
  if (deadline != kNever) {
    const uint64_t now = clock.now_ns();
    ts = to_timespec(deadline > now ? deadline - now : 0);
    timeout = &ts;
  }
  const int r = ppoll(fds, 2, timeout, nullptr);
  if (r > 0 && (fds[1].revents & POLLIN)) drain_eventfd(kick_fd);
  return r > 0;
}

void LiveNic::Impl::progress_loop() {
  pthread_setname_np(pthread_self(), "vrnic-progress");
  tighten_timer_slack();
  for (;;) {
    const Scheduler::Defer d = sched().thread_defer(clock.now_ns());
    if (d.defer && !stop.load(std::memory_order_relaxed)) {
      // The program moves its own packets: sleep on the kick eventfd alone.
      pollfd kfd{kick_fd, POLLIN, 0};
      const timespec ts = to_timespec(d.wait_ns);
      const bool kicked = ppoll(&kfd, 1, &ts, nullptr) > 0;
      if (kicked) drain_eventfd(kick_fd);
      sched().thread_woke(kicked);
      continue;
    }
    uint64_t deadline;
    bool more;
    {
      std::lock_guard<DeviceMutex> g(nic.mu_);
      if (stop.load(std::memory_order_relaxed)) break;
      const uint64_t now = clock.now_ns();
      sched().on_thread_service(now);
      more = service(Scheduler::kBatchesPerHold, now);
      publish_rates(now);
      DeviceView v = view();
      v.pending_tx = v.next_timer_ns == kNever && device->has_pending_tx();  // a scan of the QPs
      deadline = sched().thread_deadline(now, serviced_datagrams, v);
    }
    if (more) continue;  // the socket still holds packets: no need to ask poll
    const uint64_t now = clock.now_ns();
    if (sched().thread_spins(now)) {
      // Spinning, the thread gives way every few µs to a thread waiting for its CPU: on a
      // machine whose cores the polling programs hold, the program it would keep off is most
      // often its own, which then cannot call, so the thread would find it gone and spin on
      // (docs/live.md, "The progress thread").
      if (sched().spin_yields(now)) sched_yield();
      else cpu_relax();
      continue;
    }
    thread_sleep_until(deadline);
  }
}

}  // namespace vrnic::live
