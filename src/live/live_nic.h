// A live vrnic device in this process: the engine driven by a UDP port, the wall clock and a
// progress thread. One per device per process, shared by every ibv_context opened on it.
#pragma once
#include <atomic>
#include <cstdint>
#include <ctime>
#include <functional>
#include <mutex>
#include <string>
#include <type_traits>

#include "engine/device.h"
#include "live/scheduler.h"
#include "wire/icrc.h"

namespace vrnic::live {

struct LiveNicCallbacks {
  // Both called with the device lock held; must not call back into the LiveNic.
  std::function<void(engine::Cq*, void* cq_user_context)> on_cq_event;
  std::function<void(const engine::AsyncEvent&)> on_async_event;
};

// The device lock. Holds are a few microseconds, and a waiter that goes to sleep costs a
// futex wake-up (and, on a busy machine, a scheduling delay of up to milliseconds), so a
// waiter first spins briefly, then sleeps.
class DeviceMutex {
 public:
  void lock() {
    for (int i = 0; i < kSpins; ++i) {
      if (m_.try_lock()) return;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    m_.lock();
  }
  bool try_lock() { return m_.try_lock(); }
  void unlock() { m_.unlock(); }

 private:
  static constexpr int kSpins = 1000;
  std::mutex m_;
};

class LiveNic {
 public:
  // Opens (or returns the already open) device of this process. The address comes from
  // VRNIC_IP; without it the first free loopback address 127.0.0.1 .. 127.0.0.254 on
  // which UDP port 4791 can be bound is taken. On failure returns null and sets err
  // (errno value) and a message on stderr.
  static LiveNic* acquire(const LiveNicCallbacks& callbacks, int& err);
  // Drops one reference; the last one stops the thread, closes the socket, prints the
  // counters if VRNIC_STATS=1, and frees the device.
  static void release(LiveNic* nic);

  const std::string& name() const;      // "vrnic0"
  const engine::Gid& gid() const;
  const std::string& ip_string() const;  // "127.0.0.2" or an IPv6 literal
  bool is_ipv6() const;

  // Every engine call goes through here, under the device lock:
  //   nic->locked([&](engine::Device& d) { ... });
  // Afterwards the progress thread is woken if the call armed a timer earlier than the one
  // it sleeps towards (so callers need not kick() after a doorbell). While a thread of the
  // program polls the CQ, the packets of a doorbell are held back (corked) until its next
  // poll_cq, so a burst of posts leaves in one batch; the progress thread sends them if
  // that poll does not come.
  // post_send: the call posts send WRs (a run of them may leave as one batch).
  template <typename F>
  auto locked(F&& f, bool post_send = false) {
    const uint64_t start = note_app_call();
    std::lock_guard<DeviceMutex> g(mu_);
    before_call_locked(post_send, start);
    if constexpr (std::is_void_v<decltype(f(*device_))>) {
      f(*device_);
      after_call_locked();
    } else {
      auto r = f(*device_);
      after_call_locked();
      return r;
    }
  }

  // poll_cq with progress: when the CQ is empty, first receives and processes whatever
  // packets are waiting on the socket (no thread hand-off for busy-polling programs).
  int poll_cq(engine::Cq* cq, engine::WorkCompletion* out, int n);

  // A CQ was armed (ibv_req_notify_cq): the program may sleep on its channel next, and the
  // progress thread is told to watch the socket unless the program waits in
  // wait_for_event (Scheduler, "Armed").
  void cq_armed();
  // A program thread waits for a completion event (ibv_get_cq_event on a blocking channel):
  // while the scheduler lets it (Scheduler, "Event spin") it moves packets itself, as an
  // empty poll_cq does, until `arrived` says the event has come; then, if it has not, it
  // hands the socket to the progress thread before the caller sleeps on the channel.
  void wait_for_event(const std::function<bool()>& arrived);

  // Wakes the progress thread (after a doorbell that left work for later, e.g. a timer).
  void kick();
  // The program is about to sleep until a completion event (it armed a CQ): the progress
  // thread watches the socket from now on instead of after its deferral.
  void end_deferral();

  // The connection manager's datagrams (QP1). The handler runs with the device lock held,
  // from whichever thread receives: it must copy what it needs and return at once, without
  // calling back into the LiveNic; false drops the MAD as for an unknown QP. An empty
  // handler detaches.
  using GsiHandler = std::function<bool(const wire::IpUdpInfo& from, std::span<const uint8_t>)>;
  void set_gsi_handler(GsiHandler h);
  void send_gsi(const wire::IpUdpInfo& to, std::span<const uint8_t, 256> mad);

  // The counters as the engine keeps them (in the shared counters file when there is one;
  // read them under locked() for exact values).
  const engine::Counters& counters() const;
  // Counters a layer above keeps (the connection manager's): shown after the device's own,
  // in the counters file and the VRNIC_STATS text. add_counters returns the index of the
  // first of their slots for set_counters, or -1 if there is no room for them.
  int add_counters(std::span<const char* const> names);
  void set_counters(size_t first, std::span<const uint64_t> values);
  // "/dev/shm/vrnic.<pid>.vrnic0", or empty if the file could not be created.
  const std::string& counters_path() const;
  // VRNIC_AUTH: the connection manager agrees keys for every RC connection it sets up.
  bool auth_mode() const;

 private:
  explicit LiveNic(const Timing& timing);
  ~LiveNic();
  // mu_ held: holds the device's packets for a doorbell batch (cork); starts the engine's
  // verb clock at `start` (verb_clock.h).
  void before_call_locked(bool post_send, uint64_t start);
  // mu_ held: lets go of the hold, sends held ACKs that are due, wakes the thread if it must;
  // ends the verb clock.
  void after_call_locked();
  // poll_cq under the lock; `yield`: the scheduler asks the caller to offer its CPU after.
  int poll_cq_locked(engine::Cq* cq, engine::WorkCompletion* out, int n, bool& yield);
  // What the device has done that takes time (datagrams sent or received, direct copies):
  // a call that left it unchanged (an empty receive included, ~0.5 us) ended about when it
  // began, so its end time is its start, not a clock read (~10 % of a 64 B message).
  uint64_t syscall_mark() const;
  static uint64_t moved(const void* nic);  // syscall_mark() of a LiveNic: the VerbClock's count
  // An application thread is in the device: the progress thread keeps off for a while
  // (Scheduler, "Defer"), since such a thread posts and then polls, moving packets itself.
  uint64_t note_app_call() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const uint64_t now = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull +
                         static_cast<uint64_t>(ts.tv_nsec);
    sched_.on_program_entry(now);
    return now;
  }
  static void finish_at_exit();  // atexit: stop the thread, flush, unlink (device kept)
  struct Impl;
  friend struct Impl;
  Impl* impl_ = nullptr;
  DeviceMutex mu_;
  engine::Device* device_ = nullptr;
  Scheduler sched_;  // every timing rule; its methods named there say which lock they need
};

}  // namespace vrnic::live
