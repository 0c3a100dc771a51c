// The process's rsockets: the fd table and the `vrnic-rsocket` thread, which takes CM events
// (connection setup, requests, disconnects), CQ events, datagram sockets' resolution
// datagrams and keepalive times, and turns them into socket state.
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "rdmacm/rsocket.h"
#include "rdmacm/state.h"

namespace vrnic::rdmacm::rs {
namespace {

constexpr int kResolveMs = 2000;

void set_nonblock(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

void fail_connect(Socket& s, int err) {
  s.so_error = s.conn_error = err;
  s.state = State::kError;
  s.wake();
}

// How a CM event that ends a connection attempt reads as a socket error.
int connect_errno(rdma_cm_event_type t) {
  switch (t) {
    case RDMA_CM_EVENT_REJECTED: return ECONNREFUSED;  // e.g. reason 8: nobody listens
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR: return EHOSTUNREACH;
    case RDMA_CM_EVENT_UNREACHABLE: return ETIMEDOUT;
    default: return ECONNABORTED;
  }
}

}  // namespace

void Socket::wake() {
  cv.notify_all();
  if (!closed) {
    const uint64_t one = 1;
    (void)!write(fd, &one, sizeof one);
  }
}

Runtime& Runtime::get() {
  static Runtime* r = new Runtime();  // its thread runs until the process ends
  return *r;
}

Runtime::Runtime() {
  channel_ = rdma_create_event_channel();
  if (!channel_) return;  // no device: every rsocket() fails with ENODEV (create)
  set_nonblock(channel_->fd);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  thread_ = std::thread([this] { run(); });
  thread_.detach();
}

Ptr Runtime::create(int type) {
  if (!channel_ || !Service::get().ok()) {
    errno = Service::get().ok() ? ENODEV : Service::get().failure();
    return nullptr;
  }
  auto s = std::make_shared<Socket>();
  s->type = type;
  s->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (s->fd < 0) return nullptr;
  std::lock_guard<std::mutex> g(mu_);
  s->serial = next_serial_++;
  by_fd_[s->fd] = s;
  by_serial_[s->serial] = s;
  return s;
}

Ptr Runtime::find(int fd) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = by_fd_.find(fd);
  return it == by_fd_.end() ? nullptr : it->second;
}

void Runtime::remove(const Ptr& s) {
  {
    std::lock_guard<std::mutex> g(mu_);
    by_fd_.erase(s->fd);
    by_serial_.erase(s->serial);
    graveyard_.push_back(s);
  }
  close(s->fd);
  watch();
}

void Runtime::watch() {
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
}

// Until the next keepalive is due (-1: none).
int Runtime::next_wait_ms(const std::vector<Ptr>& socks) {
  const auto now = Clock::now();
  int wait = -1;
  for (const Ptr& s : socks) {
    if (s->type != SOCK_STREAM) continue;  // the type never changes: no lock needed
    std::lock_guard<std::mutex> g(s->mu);
    if (!s->keepalive || !s->flow || s->state != State::kConnected) continue;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(s->next_keepalive - now);
    const int ms = std::max<int>(0, static_cast<int>(left.count()));
    wait = wait < 0 ? ms : std::min(wait, ms);
  }
  return wait;
}

void Runtime::run() {
  pthread_setname_np(pthread_self(), "vrnic-rsocket");
  for (;;) {
    std::vector<pollfd> fds{{wake_fd_, POLLIN, 0}, {channel_->fd, POLLIN, 0}};
    std::vector<Ptr> socks, udp;
    std::vector<Ptr> dead;
    {
      std::lock_guard<std::mutex> g(mu_);
      dead.swap(graveyard_);
      for (auto& [serial, s] : by_serial_) {
        std::lock_guard<std::mutex> sg(s->mu);
        if (!s->comp) continue;
        fds.push_back({s->comp->fd, POLLIN, 0});
        socks.push_back(s);
      }
      for (auto& [serial, s] : by_serial_) {
        std::lock_guard<std::mutex> sg(s->mu);
        if (s->udp_fd < 0) continue;
        fds.push_back({s->udp_fd, POLLIN, 0});
        udp.push_back(s);
      }
    }
    for (auto& s : dead) bury(s);
    dead.clear();
    if (poll(fds.data(), fds.size(), next_wait_ms(socks)) < 0) continue;
    if (fds[0].revents) {
      uint64_t v;
      (void)!read(wake_fd_, &v, sizeof v);
    }
    if (fds[1].revents) {
      rdma_cm_event* ev = nullptr;
      while (rdma_get_cm_event(channel_, &ev) == 0) on_cm_event(ev);
    }
    for (size_t i = 0; i < socks.size(); ++i) {
      if (fds[i + 2].revents) on_cq_channel(socks[i]);
    }
    for (size_t i = 0; i < udp.size(); ++i) {
      if (!fds[i + 2 + socks.size()].revents) continue;
      std::lock_guard<std::mutex> g(udp[i]->mu);
      if (!udp[i]->closed) on_udp_readable(*udp[i]);
    }
    const auto now = Clock::now();
    for (const Ptr& s : socks) {
      if (s->type != SOCK_STREAM) continue;
      std::lock_guard<std::mutex> g(s->mu);
      keepalive_due(*s, now);
    }
  }
}

void Runtime::bury(const Ptr& s) {
  std::lock_guard<std::mutex> g(s->mu);
  teardown(*s);
}

void Runtime::on_cq_channel(const Ptr& s) {
  std::lock_guard<std::mutex> g(s->mu);
  if (s->closed || !s->comp) return;
  set_nonblock(s->comp->fd);
  ibv_cq* cq = nullptr;
  void* ctx = nullptr;
  while (ibv_get_cq_event(s->comp, &cq, &ctx) == 0) ibv_ack_cq_events(cq, 1);
  s->armed = false;  // a waiter woken arms it again (arm_cq)
  take_completions(*s);
  s->wake();
}

// The CQ raises an event only when a thread is about to wait (the rsocket thread then polls
// it and wakes the waiters, who arm it again if they wait on): a program that keeps calling
// polls the CQ itself, and no event wakes the rsocket thread per message.
void arm_cq(Socket& s) {
  if (!s.armed && s.cq && !s.closed) {
    ibv_req_notify_cq(s.cq, 0);
    s.armed = true;
  }
  take_completions(s);  // what came before the CQ was armed raised no event
}

void take_completions(Socket& s) {
  if (s.type == SOCK_DGRAM) {
    dgram_poll_cq(s);
  } else {
    poll_cq(s);
  }
}

void Runtime::on_cm_event(rdma_cm_event* ev) {
  rdma_cm_id* id = ev->id;
  const rdma_cm_event_type type = ev->event;
  const bool request = type == RDMA_CM_EVENT_CONNECT_REQUEST;
  const auto serial = reinterpret_cast<uint64_t>(request ? ev->listen_id->context : id->context);
  const auto* pd = static_cast<const uint8_t*>(ev->param.conn.private_data);
  const std::vector<uint8_t> private_data(pd, pd ? pd + ev->param.conn.private_data_len : pd);
  rdma_ack_cm_event(ev);
  Ptr s;
  {
    std::lock_guard<std::mutex> g(mu_);
    auto it = by_serial_.find(serial);
    if (it != by_serial_.end()) s = it->second;
  }
  if (request) {
    id->context = nullptr;  // its own socket's serial once accepted
    // A request whose connection data rdma-core's rsockets would not take is refused.
    const bool ours = decode_conn_data(private_data).has_value();
    if (s && ours) {
      std::lock_guard<std::mutex> g(s->mu);
      if (!s->closed && s->state == State::kListening) {
        s->pending.push_back({id, private_data});
        s->wake();
        return;
      }
    }
    rdma_reject(id, nullptr, 0);
    rdma_destroy_id(id);
    return;
  }
  if (!s) return;
  std::lock_guard<std::mutex> g(s->mu);
  if (s->closed || s->id != id || s->type != SOCK_STREAM) return;
  on_stream_event(*s, id, type, private_data);
}

void Runtime::on_stream_event(Socket& s, rdma_cm_id* id, rdma_cm_event_type type,
                              std::span<const uint8_t> private_data) {
  switch (type) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (rdma_resolve_route(id, kResolveMs)) fail_connect(s, errno);
      break;
    case RDMA_CM_EVENT_ROUTE_RESOLVED: {
      int err = setup_conn(s);
      const auto mine = err ? std::array<uint8_t, kConnDataSize>{} : conn_data_of(s);
      rdma_conn_param p;
      conn_param(p, mine.data());
      if (!err && rdma_connect(id, &p)) err = errno;
      if (err) {
        fail_connect(s, err);
      } else {
        s.state = State::kConnecting;
        watch();
      }
      break;
    }
    case RDMA_CM_EVENT_ESTABLISHED:
      // The REP's connection data: a version rdma-core would not take fails the connect.
      if (s.state == State::kConnecting && !start_conn(s, private_data)) {
        rdma_disconnect(id);
        fail_connect(s, ENOTSUP);
        break;
      }
      s.state = State::kConnected;
      s.next_keepalive = Clock::now() + std::chrono::seconds(s.keepidle);
      poll_cq(s);  // what came before this event; the first credit update (the second half)
      watch();
      s.wake();
      break;
    case RDMA_CM_EVENT_DISCONNECTED:
      poll_cq(s);  // what arrived before the DREQ is read first
      s.peer_gone = s.peer_fin = true;
      if (s.state != State::kConnected) fail_connect(s, ECONNRESET);
      s.wake();
      break;
    case RDMA_CM_EVENT_TIMEWAIT_EXIT:
      break;
    default:
      if (s.state == State::kConnected) {
        s.conn_error = ECONNRESET;
        s.peer_gone = s.peer_fin = true;
        s.state = State::kError;
        s.wake();
      } else {
        fail_connect(s, connect_errno(type));
      }
  }
}

}  // namespace vrnic::rdmacm::rs
