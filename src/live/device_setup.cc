// Opening and closing the live device: the port from the configuration, the engine, the
// counters file, the direct-mode table and the threads; at the end the counters printed.
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#include <sodium.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "live/address.h"
#include "live/live_nic_impl.h"
#include "live/log.h"

extern char* program_invocation_short_name;

namespace vrnic::live {
namespace {

const char* program_name() {
  const char* prog = program_invocation_short_name;
  return prog ? prog : "?";
}

// The seed of the engine's QPN and key generator (engine/names.h): the kernel's CSPRNG, so
// every device of every process draws names no other can foresee. 0 or an errno.
int name_seed(std::array<uint8_t, 32>& seed) {
  if (getrandom(seed.data(), seed.size(), 0) == static_cast<ssize_t>(seed.size())) return 0;
  const int e = errno;
  log_error("getrandom: %s: no seed for the QP numbers and memory keys", std::strerror(e));
  return e;
}

}  // namespace

int LiveNic::Impl::open_port() {
  transport::UdpPortOptions options;
  if (config.faults) {
    faults = std::make_unique<transport::FaultInjector>(*config.faults);
    options.faults = faults.get();
  }
  options.offload = config.offload;
  options.rx_queues = config.rx_queues;
  options.debug_log = &log_debug;
  if (!config.pcap.empty()) {
    int err = 0;
    pcap = transport::PcapWriter::open(config.pcap, err);
    if (!pcap) log_error("VRNIC_PCAP %s: %s (no capture)", config.pcap.c_str(), std::strerror(err));
    options.pcap = pcap.get();
  }
  int err = 0;
  std::string message;
  port = open_device_port(config.ip, config.reserved, options, err, message);
  if (!port) {
    log_error("cannot open %s: %s", name.c_str(), message.c_str());
    return err;
  }
  ip_string = port->address().to_string();
  ipv6 = port->address().ipv6;
  gid.raw = port->address().gid();
  return 0;
}

int LiveNic::Impl::make_device() {
  engine::DeviceConfig dc;
  dc.gid = gid;
  if (int mtu = interface_mtu(port->address()); mtu > 0)
    dc.limits.active_mtu = ib_mtu_for(mtu, ipv6, dc.limits.max_mtu);
  // The requester's window: a quarter of the receive buffer the kernel granted this socket
  // (its figure counts bookkeeping too), the peer having been granted the same; 1 MiB at
  // most. VRNIC_SEND_WINDOW_KB sets it.
  dc.send_window_bytes =
      static_cast<uint32_t>(std::clamp(port->granted_rcvbuf() / 4, 0, 1 << 20));
  if (config.send_window_bytes) dc.send_window_bytes = *config.send_window_bytes;
  dc.cc = config.cc;
  if (int e = name_seed(dc.name_seed)) return e;
  // libsodium's fastest code for this CPU (ChaCha20 for the names, the authenticated mode's
  // MAC); without it the portable one runs.
  if (sodium_init() < 0) log_error("sodium_init failed: the portable ChaCha20 and Poly1305 run");
  // What killed programs left in /dev/shm goes before this device adds its own.
  const size_t stale = remove_stale_counters_files() + DirectWindow::remove_stale_tables();
  if (stale != 0) log_debug("removed %zu files of exited programs from /dev/shm", stale);
  if (int e = counters_file.create(name, ip_string, program_name()); e != 0)
    log_debug("no counters file (%s): counting privately", std::strerror(e));
  dc.counters = counters_file.counters();
  if (config.direct) {
    const transport::IpAddress& a = port->address();
    int e = 0;
    direct.reset(DirectWindow::create(a.ipv6, a.bytes, e));
    if (!direct)
      log_error("VRNIC_DIRECT: cannot create the direct-mode table %s: %s (packets only)",
                DirectWindow::path_for(a.ipv6, a.bytes).c_str(), std::strerror(e));
    else
      log_debug("direct mode: table %s", direct->path().c_str());
    dc.direct = direct.get();
  }
  device = std::make_unique<engine::Device>(dc, *port, engine_clock, host_memory, sink);
  nic.device_ = device.get();
  log_debug("%s up: %s, gid index 0 %s, active mtu %u, counters %s", name.c_str(),
            ip_string.c_str(), ip_string.c_str(), dc.limits.active_mtu,
            counters_file.path().c_str());
  return 0;
}

int LiveNic::Impl::start_threads() {
  kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (kick_fd < 0) return errno;
  if (port->rx_queues() > 1) {
    stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (stop_fd < 0) return errno;
  }
  owner_pid = getpid();
  // The threads take no signals: the program's handlers (perftest's SIGALRM for -D) run on
  // the program's own threads.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  thread = new std::thread([this] { progress_loop(); });
  for (size_t i = 1; i < port->rx_queues(); ++i) {
    rx_threads.push_back(std::make_unique<RxThread>(i));
    RxThread* q = rx_threads.back().get();
    q->thread = new std::thread([this, q] { queue_loop(*q); });
    pthread_setname_np(q->thread->native_handle(), "vrnic-rxq");
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return 0;
}

int LiveNic::Impl::start() {
  if (int e = open_port()) return e;
  if (int e = make_device()) return e;
  return start_threads();
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
  kick();
  thread->join();
  delete thread;
  thread = nullptr;
}

std::string LiveNic::Impl::stats_text() {
  std::string text = format_nonzero(device->counters()) + counters_file.format_added_nonzero();
  if (text.empty()) text = "(all zero)\n";
  const transport::UdpPortStats ps = port->stats();
  if (ps.tx_dropped) text += "udp_tx_dropped " + std::to_string(ps.tx_dropped) + "\n";
  if (direct && direct->copy_calls())
    text += "direct_copy_calls " + std::to_string(direct->copy_calls()) + "\n";
  if (ps.rx_truncated) text += "udp_rx_truncated " + std::to_string(ps.rx_truncated) + "\n";
  if (ps.rx_fault_dropped)
    text += "udp_rx_fault_dropped " + std::to_string(ps.rx_fault_dropped) + "\n";
  device->qp_rates(rates);
  std::vector<CountersRate> shown;
  for (const engine::QpRate& r : rates) shown.push_back(to_counters_rate(r));
  return text + format_rates(shown);
}

void LiveNic::Impl::finish() {
  if (owner_pid != getpid()) return;  // a forked child: the thread and files are the parent's
  stop_thread();
  std::lock_guard<DeviceMutex> g(nic.mu_);
  if (finished) return;
  finished = true;
  device->direct_flush();  // releases the pins held in peers' tables
  device->release_acks();
  device->flush_tx();
  if (pcap) pcap->flush();
  if (config.stats)
    std::fprintf(stderr, "vrnic: %s %s (%s, pid %d) counters:\n%s", name.c_str(),
                 ip_string.c_str(), program_name(), static_cast<int>(getpid()),
                 stats_text().c_str());
  counters_file.unlink_file();  // `vrnic stats` stops listing this program
  if (direct) direct->close_table();
}

}  // namespace vrnic::live
