// The process's CM service: the device, QP1's MADs into the cm::Manager, its timers, and its events turned into rdma_cm events.
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <chrono>
#include <cstdlib>
#include <ctime>

#include "abi/vrnic_private.h"
#include "cm/counters.h"
#include "rdmacm/settings.h"
#include "rdmacm/state.h"
#include "wire/gid.h"

namespace vrnic::rdmacm {
namespace {

class WallClock final : public engine::Clock {
 public:
  uint64_t now_ns() const override {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
  }
};

// The device's address: the one GID 0 stands for (RoCEv2, wire/gid.h).
bool address_of(ibv_context* ctx, cm::Endpoint& out) {
  ibv_gid gid;
  if (ibv_query_gid(ctx, 1, 0, &gid) != 0) return false;
  wire::GidBytes g;
  std::memcpy(g.data(), gid.raw, g.size());
  out = {};
  out.ip = wire::ip_of_gid(g, out.ipv6);
  return true;
}

bool debug() { return process_settings().debug; }

// VRNIC_CM_DEBUG=1: one line per MAD on stderr (direction, attribute, transaction ID).
void trace(const char* dir, const uint8_t* mad) {
  if (!debug()) return;
  const uint16_t attr = static_cast<uint16_t>(mad[16] << 8 | mad[17]);
  uint64_t tid = 0;
  for (int i = 8; i < 16; ++i) tid = tid << 8 | mad[i];
  std::fprintf(stderr, "vrnic cm[%d]: %s %s tid %llx\n", getpid(), dir,
               wire::cm::to_string(static_cast<wire::cm::Attr>(attr)),
               static_cast<unsigned long long>(tid));
}

}  // namespace

uint8_t default_ack_timeout() { return process_settings().ack_timeout; }

struct Service::Port : cm::MadPort {
  ibv_context* ctx = nullptr;
  void send_mad(const cm::Endpoint&, const cm::Endpoint& to,
                std::span<const uint8_t, wire::cm::kMadSize> mad) override {
    trace("tx", mad.data());
    vrnic_gsi_send(ctx, to.ipv6, to.ip.data(), mad.data());
  }
};

Service& Service::get() {
  static Service* s = new Service();  // never destroyed: ids may outlive static destructors
  return *s;
}

Service::Service() {
  std::string bad;
  const Settings& settings = process_settings(&bad);
  if (!bad.empty()) {
    std::fprintf(stderr, "vrnic librdmacm: %s; the RDMA CM does not start\n", bad.c_str());
    refused_ = EINVAL;
    return;
  }
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list && n > 0) ctx_ = ibv_open_device(list[0]);
  if (list) ibv_free_device_list(list);
  if (!ctx_ || !address_of(ctx_, addr_)) {
    std::fprintf(stderr, "vrnic librdmacm: no vrnic device (run the program with `vrnic run`)\n");
    ctx_ = nullptr;
    return;
  }
  ibv_device_attr attr{};
  ibv_query_device(ctx_, &attr);
  cm::Config cfg;
  cfg.ca_guid = be64toh(attr.node_guid);
  cfg.cm_response_timeout = settings.response_timeout;
  cfg.max_cm_retries = settings.retries;
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  cfg.seed = static_cast<uint32_t>(ts.tv_nsec ^ (getpid() << 16));
  next_port_ = static_cast<uint16_t>(32768 + (cfg.seed % 28000));
  port_ = std::make_unique<Port>();
  port_->ctx = ctx_;
  clock_ = std::make_unique<WallClock>();
  manager_ = std::make_unique<cm::Manager>(cfg, *port_, *clock_);
  guard_ = GuardLink::from_env();
  if (guard_) manager_->set_witness(guard_.get());
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  vrnic_gsi_attach(ctx_, &Service::on_mad, this);
  counters_first_ = vrnic_counters_add(ctx_, cm::kCounterNames, cm::kCounterCount);
  vrnic_qp_fatal_attach(&Service::on_qp_fatal, this);
  thread_ = std::thread([this] { run(); });
  thread_.detach();
  std::atexit([] { Service::get().finish_connections(); });
}

// At exit the process's connections end as the kernel's CM ends them when the rdma_cm file
// closes (ucma_close destroys every id): a DREQ for each still established, the DREP for a
// DREQ not yet answered, a REJ for a set-up in progress, so no peer is left waiting on this
// process. The CM's timers stop with the process, where the kernel's CM would go on resending
// a lost DREQ: the unanswered ones are resent a few times, 20 ms apart, while DREPs may come.
void Service::finish_connections() {
  {
    std::lock_guard<std::mutex> g(mu);
    by_conn.clear();  // no more events for the program
    manager_->shutdown();
    if (manager_->unanswered_disconnects() == 0) return;
  }
  kick();
  for (int round = 0; round < 5; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::lock_guard<std::mutex> g(mu);
    if (manager_->unanswered_disconnects() == 0) return;
    manager_->resend_pending_disconnects();
  }
}

ibv_pd* Service::default_pd() {
  if (!pd_) pd_ = ibv_alloc_pd(ctx_);
  return pd_;
}

ibv_xrcd* Service::default_xrcd() {
  if (!xrcd_) {
    ibv_xrcd_init_attr a{};
    a.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
    a.fd = -1;
    a.oflags = O_CREAT;
    xrcd_ = ibv_open_xrcd(ctx_, &a);
  }
  return xrcd_;
}

uint16_t Service::ephemeral_port() {
  if (++next_port_ < 32768) next_port_ = 32768;
  return next_port_;
}

void Service::kick() {
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
}

// Called by the device with its lock held: hand the MAD over and wake the thread.
int Service::on_mad(void* self, int ipv6, const uint8_t* src, const uint8_t* dst,
                    const uint8_t* mad) {
  auto* s = static_cast<Service*>(self);
  InMad m;
  m.from.ipv6 = m.to.ipv6 = ipv6 != 0;
  std::memcpy(m.from.ip.data(), src, 16);
  std::memcpy(m.to.ip.data(), dst, 16);
  std::memcpy(m.mad.data(), mad, 256);
  {
    std::lock_guard<std::mutex> g(s->in_mu_);
    s->inbox_.push_back(m);
  }
  s->kick();
  return 1;
}

// Called by the device with its lock held: a QP failed on its own.
void Service::on_qp_fatal(void* self, uint32_t qp_num) {
  auto* s = static_cast<Service*>(self);
  {
    std::lock_guard<std::mutex> g(s->in_mu_);
    s->lost_qps_.push_back(qp_num);
  }
  s->kick();
}

// A connected id whose QP failed: in vrnic the peer's CM lives and dies with the peer's
// process, so no DREQ will come from a peer that was killed; the survivor learns of the end
// from its own QP (RC retries exhausted) and gets DISCONNECTED then. Service lock held.
void Service::end_lost_connections(const std::vector<uint32_t>& qpns) {
  for (uint32_t qpn : qpns) {
    for (auto& [conn, id] : by_conn) {
      const uint32_t mine = id->id.qp ? id->id.qp->qp_num : id->mine.qpn;
      if (mine == qpn && id->state == IdState::kConnected) manager_->transport_lost(conn);
    }
  }
}

void Service::run() {
  std::vector<InMad> batch;
  std::vector<uint32_t> lost;
  for (;;) {
    uint64_t next;
    {
      std::lock_guard<std::mutex> g(mu);
      next = manager_->next_timer_ns();
    }
    int timeout_ms = -1;
    if (next != UINT64_MAX) {
      const uint64_t now = clock_->now_ns();
      timeout_ms = next <= now ? 0 : static_cast<int>(std::min<uint64_t>((next - now) / 1000000 + 1, 60000));
    }
    pollfd p{wake_fd_, POLLIN, 0};
    poll(&p, 1, timeout_ms);
    uint64_t v;
    (void)!read(wake_fd_, &v, sizeof v);
    {
      std::lock_guard<std::mutex> g(in_mu_);
      batch.swap(inbox_);
      lost.swap(lost_qps_);
    }
    std::lock_guard<std::mutex> g(mu);
    end_lost_connections(lost);
    lost.clear();
    for (const InMad& m : batch) {
      trace("rx", m.mad.data());
      manager_->receive(m.from, m.to, m.mad);
    }
    batch.clear();
    manager_->on_timer();
    publish_counters();
    cm::Event ev;
    while (manager_->poll_event(ev)) {
      if (debug()) {
        std::fprintf(stderr, "vrnic cm[%d]: event %s conn %x\n", getpid(), cm::to_string(ev.type),
                     ev.conn);
      }
      on_event(ev);
    }
    publish_counters();  // and what the events did (a REJ sent for a refused request)
  }
}

// The Manager's counters into those the device shows (cm/counters.h).
void Service::publish_counters() {
  if (counters_first_ < 0) return;
  uint64_t v[cm::kCounterCount];
  cm::counter_values(manager_->counters(), v);
  vrnic_counters_set(ctx_, counters_first_, v, cm::kCounterCount);
}

void Service::deliver(Id* id, EventBox* box) {
  // What led to the event (a REJ this side sent, say) is in the counters before the program
  // sees it: a program that exits on the event leaves them complete.
  publish_counters();
  box->ev.id = &id->id;
  if (!box->private_data.empty()) {
    box->ev.param.conn.private_data = box->private_data.data();
    box->ev.param.conn.private_data_len = static_cast<uint8_t>(box->private_data.size());
  }
  Channel* ch = id->channel;
  ch->queue.push_back(box);
  ++id->pending_events;
  const uint64_t one = 1;
  (void)!write(ch->ch.fd, &one, sizeof one);
}

}  // namespace vrnic::rdmacm
