// LiveNic: the process-wide device's entry points — the verbs' calls and polls with the
// scheduler's decisions around them, CM datagrams, acquire / release / exit.
#include "live/live_nic.h"

#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>

#include "live/live_nic_impl.h"
#include "live/log.h"

namespace vrnic::live {
namespace {

std::mutex g_mu;
LiveNic* g_nic = nullptr;
int g_refs = 0;
bool g_atexit_registered = false;

}  // namespace

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

LiveNic::LiveNic(const Timing& timing) : sched_(timing) {}

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
const std::string& LiveNic::counters_path() const { return impl_->counters_file.path(); }
bool LiveNic::auth_mode() const { return impl_->config.auth; }

int LiveNic::add_counters(std::span<const char* const> names) {
  return locked([&](engine::Device&) { return impl_->counters_file.add_counters(names); });
}

void LiveNic::set_counters(size_t first, std::span<const uint64_t> values) {
  locked([&](engine::Device&) { impl_->counters_file.set_added(first, values); });
}

void LiveNic::set_gsi_handler(GsiHandler h) {
  locked([&](engine::Device&) { impl_->sink.gsi_ = std::move(h); });
}

void LiveNic::send_gsi(const wire::IpUdpInfo& to, std::span<const uint8_t, 256> mad) {
  locked([&](engine::Device& d) { d.send_gsi(to, mad); });
  // The answer to a CM MAD is an event the program waits for on its channel: the progress
  // thread receives it, so it watches the socket now rather than after its deferral.
  end_deferral();
}

void LiveNic::end_deferral() {
  if (sched_.on_end_deferral()) kick();
}

void LiveNic::kick() { impl_->kick(); }

uint64_t LiveNic::syscall_mark() const {
  const engine::Counters& c = device_->counters();
  return impl_->port->packets_moved() + c.direct_writes + c.direct_reads + c.direct_fallbacks;
}

uint64_t LiveNic::moved(const void* nic) {
  return static_cast<const LiveNic*>(nic)->syscall_mark();
}

void LiveNic::before_call_locked(bool post_send, uint64_t now) {
  const Scheduler::CallStart s = sched_.on_call_start(now, post_send);
  device_->set_direct_hold(s.hold_direct);
  device_->set_tx_hold(s.cork);
  impl_->engine_clock.begin(now, syscall_mark());
}

void LiveNic::after_call_locked() {
  // The verb's start, unless it moved packets (then a reading taken since).
  const uint64_t end = impl_->engine_clock.now_ns();
  device_->set_tx_hold(false);
  device_->set_direct_hold(false);
  const Scheduler::CallEnd e = sched_.on_call_end(end, device_->held_acks_deadline(), impl_->view());
  if (e.release_acks) {
    device_->flush_tx();
    device_->release_acks();
  }
  if (e.kick) kick();
  impl_->engine_clock.end();
}

void LiveNic::cq_armed() {
  if (sched_.on_cq_armed()) end_deferral();
}

void LiveNic::wait_for_event(const std::function<bool()>& arrived) {
  sched_.on_event_wait();
  const uint64_t start = monotonic_ns();
  while (!arrived()) {
    const uint64_t now = note_app_call();  // keeps the progress thread off the lock
    if (!sched_.event_wait_spins(now, start)) {
      end_deferral();  // the caller sleeps now: the progress thread watches the socket
      return;
    }
    std::lock_guard<DeviceMutex> g(mu_);
    impl_->progress(now);
  }
}

int LiveNic::poll_cq(engine::Cq* cq, engine::WorkCompletion* out, int n) {
  bool yield = false;
  const int got = poll_cq_locked(cq, out, n, yield);
  if (yield) {  // "Idle yield": outside the lock, so that whoever runs meanwhile may take it
    const uint64_t start = monotonic_ns();
    sched_yield();
    sched_.on_idle_yield(start, monotonic_ns());
  }
  return got;
}

int LiveNic::poll_cq_locked(engine::Cq* cq, engine::WorkCompletion* out, int n, bool& yield) {
  const uint64_t t = note_app_call();  // keeps the progress thread off the lock
  std::lock_guard<DeviceMutex> g(mu_);
  impl_->engine_clock.begin(t, syscall_mark());
  sched_.on_poll_start(t);
  impl_->flush(t);  // the posts before this poll leave now, in one batch
  int got = device_->poll_cq(cq, out, n);
  if (got == 0) {
    // Busy-polling programs make progress here without waiting for the thread.
    impl_->progress(t);
    got = device_->poll_cq(cq, out, n);
  }
  const engine::Counters& c = device_->counters();
  if (sched_.on_poll_end(t, got, c.rx_packets + c.tx_packets)) kick();
  yield = sched_.idle_poll_yields(t, got, c.rx_packets + c.tx_packets);
  after_call_locked();
  return got;
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
  LiveConfig config;
  std::string why;
  if (!LiveConfig::from_environment(config, why)) {
    log_error("%s", why.c_str());
    err = EINVAL;
    return nullptr;
  }
  set_debug_log(config.debug);
  auto* nic = new LiveNic(config.timing);
  nic->impl_ = new Impl(config, callbacks, *nic);
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
