// The process's rsockets: the fd table and the `vrnic-rsocket` thread, which takes CM events
// (connection setup, requests, disconnects; datagram sockets' SIDR requests and resolutions)
// and CQ events and turns them into socket state.
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

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
  if (channel_) set_nonblock(channel_->fd);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  thread_ = std::thread([this] { run(); });
  thread_.detach();
}

Ptr Runtime::create(int type) {
  if (!channel_ || !Service::get().ok()) {
    errno = ENODEV;
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

void Runtime::run() {
  pthread_setname_np(pthread_self(), "vrnic-rsocket");
  for (;;) {
    std::vector<pollfd> fds{{wake_fd_, POLLIN, 0}, {channel_->fd, POLLIN, 0}};
    std::vector<Ptr> socks;
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
    }
    for (auto& s : dead) bury(s);
    dead.clear();
    if (poll(fds.data(), fds.size(), -1) < 0) continue;
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
  if (s->type == SOCK_DGRAM) {
    s->armed = false;  // a waiter woken arms it again (dgram_arm)
    dgram_poll_cq(*s);
  } else {
    ibv_req_notify_cq(s->cq, 0);
    poll_cq(*s);
  }
  s->wake();
}

void Runtime::on_cm_event(rdma_cm_event* ev) {
  rdma_cm_id* id = ev->id;
  const rdma_cm_event_type type = ev->event;
  const bool request = type == RDMA_CM_EVENT_CONNECT_REQUEST;
  const auto serial = reinterpret_cast<uint64_t>(request ? ev->listen_id->context : id->context);
  const int status = ev->status;
  const rdma_ud_param ud = ev->param.ud;
  rdma_ack_cm_event(ev);
  Ptr s;
  {
    std::lock_guard<std::mutex> g(mu_);
    auto it = by_serial_.find(serial);
    if (it != by_serial_.end()) s = it->second;
  }
  if (request) {
    id->context = nullptr;  // its own socket's serial once accepted
    if (s) {
      std::lock_guard<std::mutex> g(s->mu);
      if (!s->closed && s->type == SOCK_DGRAM && s->ud_qp) {
        dgram_answer(*s, id);
        return;
      }
      if (!s->closed && s->state == State::kListening) {
        s->pending.push_back(id);
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
  if (!s->closed && s->type == SOCK_DGRAM) return dgram_cm_event(*s, id, type, status, ud);
  if (s->closed || s->id != id) return;
  switch (type) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (rdma_resolve_route(id, kResolveMs)) fail_connect(*s, errno);
      break;
    case RDMA_CM_EVENT_ROUTE_RESOLVED: {
      rdma_conn_param p;
      conn_param(p);
      int err = setup_conn(*s);
      if (!err && rdma_connect(id, &p)) err = errno;
      if (err) {
        fail_connect(*s, err);
      } else {
        s->state = State::kConnecting;
        watch();
      }
      break;
    }
    case RDMA_CM_EVENT_ESTABLISHED:
      s->state = State::kConnected;
      s->wake();
      break;
    case RDMA_CM_EVENT_DISCONNECTED:
      poll_cq(*s);  // what arrived before the DREQ is read first
      s->peer_gone = s->peer_fin = true;
      if (s->state != State::kConnected) fail_connect(*s, ECONNRESET);
      s->wake();
      break;
    case RDMA_CM_EVENT_TIMEWAIT_EXIT:
      break;
    default:
      if (s->state == State::kConnected) {
        s->conn_error = ECONNRESET;
        s->peer_gone = s->peer_fin = true;
        s->state = State::kError;
        s->wake();
      } else {
        fail_connect(*s, connect_errno(type));
      }
  }
}

}  // namespace vrnic::rdmacm::rs
