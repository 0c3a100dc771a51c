// Event channels: rdma_create/destroy_event_channel, rdma_get_cm_event, rdma_ack_cm_event,
// rdma_event_str.
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <vector>

#include "rdmacm/state.h"

using namespace vrnic::rdmacm;

RDMACM_EXPORT rdma_event_channel* rdma_create_event_channel() {
  Service& s = Service::get();
  if (!s.ok()) {
    errno = s.failure();
    return nullptr;
  }
  auto* ch = new Channel();
  ch->ch.fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (ch->ch.fd < 0) {
    delete ch;
    return nullptr;
  }
  return &ch->ch;
}

namespace {
// Destroyed program channels, kept (and reachable, so no leak checker counts them) for
// threads that still call rdma_get_cm_event on them.
void keep_destroyed(Channel* ch) {
  static auto* kept = new std::vector<Channel*>;  // never freed: outlives every thread
  std::lock_guard<std::mutex> g(Service::get().mu);
  std::deque<EventBox*>().swap(ch->queue);  // its memory back; the struct stays
  kept->push_back(ch);
}
}  // namespace

// A thread still blocked in rdma_get_cm_event on this channel (rping's CM thread, as the
// program exits) stays blocked, as a read of the kernel's rdma_cm file does when another
// thread closes it: the fd and the channel are then left open rather than pulled from under
// that read, so it can neither see EBADF nor touch freed memory, nor read another file that
// reused the number. A program's own channel (not an id's private one) is never freed: a
// thread that calls rdma_get_cm_event on it just after this (the same CM thread, a moment
// later in its loop) blocks the same way instead of reading a closed descriptor.
RDMACM_EXPORT void rdma_destroy_event_channel(rdma_event_channel* channel) {
  if (!channel) return;
  Channel* ch = to_channel(channel);
  {
    std::lock_guard<std::mutex> g(Service::get().mu);
    for (EventBox* b : ch->queue) delete b;
    ch->queue.clear();
    ch->destroyed = true;
    if (ch->readers > 0) return;
  }
  close(ch->ch.fd);
  if (ch->sync) {
    delete ch;
  } else {
    keep_destroyed(ch);
  }
}

// Blocks until an event is queued (or fails with EAGAIN on a non-blocking fd). Each queued
// event added one to the semaphore; an event of an id destroyed meanwhile left its count
// behind, so an empty queue after a read means: read again.
RDMACM_EXPORT int rdma_get_cm_event(rdma_event_channel* channel, rdma_cm_event** event) {
  if (!channel || !event) return fail(EINVAL);
  Channel* ch = to_channel(channel);
  Service& s = Service::get();
  std::unique_lock<std::mutex> g(s.mu);
  if (ch->destroyed) {  // called after rdma_destroy_event_channel: blocks for good
    std::condition_variable never;
    for (;;) never.wait(g);
  }
  ++ch->readers;
  for (;;) {
    g.unlock();
    uint64_t v;
    const ssize_t n = read(ch->ch.fd, &v, sizeof v);
    const int err = errno;
    g.lock();
    if (n != sizeof v && err != EINTR) {
      if (--ch->readers == 0 && ch->destroyed) {
        close(ch->ch.fd);  // the last reader of a destroyed (non-blocking) channel
        if (ch->sync) {
          delete ch;
        } else {
          g.unlock();
          keep_destroyed(ch);
          g.lock();
        }
      }
      return fail(err);  // EAGAIN with O_NONBLOCK
    }
    if (n != sizeof v || ch->queue.empty()) continue;
    EventBox* b = ch->queue.front();
    ch->queue.pop_front();
    --ch->readers;
    // A request read leaves its listener's backlog (ucma counts those not yet read).
    if (b->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST) {
      s.manager().request_taken(to_id(b->ev.id)->conn);
    }
    s.outstanding.insert(&b->ev);
    *event = &b->ev;
    return 0;
  }
}

// librdmacm frees the event: acknowledging it twice is a double free, which glibc stops with
// an abort. vrnic aborts the same way, saying why.
RDMACM_EXPORT int rdma_ack_cm_event(rdma_cm_event* event) {
  if (!event) return fail(EINVAL);
  Service& s = Service::get();
  {
    std::lock_guard<std::mutex> g(s.mu);
    if (s.outstanding.erase(event) == 0) {
      std::fprintf(stderr, "vrnic librdmacm: rdma_ack_cm_event(%p): not an event "
                   "rdma_get_cm_event returned, or acknowledged already (rdma-core frees it "
                   "twice)\n", static_cast<void*>(event));
      std::abort();
    }
    Id* id = to_id(event->id);
    --id->pending_events;
    if (id->id.event == event) id->id.event = nullptr;
  }
  s.cv.notify_all();
  delete reinterpret_cast<EventBox*>(event);
  return 0;
}

namespace vrnic::rdmacm {

Channel* new_private_channel() {
  rdma_event_channel* ch = rdma_create_event_channel();
  if (!ch) return nullptr;
  to_channel(ch)->sync = true;
  return to_channel(ch);
}

int wait_sync(Id* id) {
  if (id->id.event) rdma_ack_cm_event(id->id.event);
  rdma_cm_event* ev = nullptr;
  if (rdma_get_cm_event(&id->channel->ch, &ev) != 0) return -1;
  // Only a synchronous id keeps its last event: an asynchronous program's fetched events are
  // its own to acknowledge (rdma_destroy_id must not acknowledge one a thread still reads).
  ev->id->event = ev;
  if (ev->status == 0) return 0;
  if (ev->event == RDMA_CM_EVENT_REJECTED) return fail(ECONNREFUSED);
  return fail(ev->status < 0 ? -ev->status : ev->status);
}

}  // namespace vrnic::rdmacm

RDMACM_EXPORT const char* rdma_event_str(rdma_cm_event_type event) {
  switch (event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED: return "RDMA_CM_EVENT_ADDR_RESOLVED";
    case RDMA_CM_EVENT_ADDR_ERROR: return "RDMA_CM_EVENT_ADDR_ERROR";
    case RDMA_CM_EVENT_ROUTE_RESOLVED: return "RDMA_CM_EVENT_ROUTE_RESOLVED";
    case RDMA_CM_EVENT_ROUTE_ERROR: return "RDMA_CM_EVENT_ROUTE_ERROR";
    case RDMA_CM_EVENT_CONNECT_REQUEST: return "RDMA_CM_EVENT_CONNECT_REQUEST";
    case RDMA_CM_EVENT_CONNECT_RESPONSE: return "RDMA_CM_EVENT_CONNECT_RESPONSE";
    case RDMA_CM_EVENT_CONNECT_ERROR: return "RDMA_CM_EVENT_CONNECT_ERROR";
    case RDMA_CM_EVENT_UNREACHABLE: return "RDMA_CM_EVENT_UNREACHABLE";
    case RDMA_CM_EVENT_REJECTED: return "RDMA_CM_EVENT_REJECTED";
    case RDMA_CM_EVENT_ESTABLISHED: return "RDMA_CM_EVENT_ESTABLISHED";
    case RDMA_CM_EVENT_DISCONNECTED: return "RDMA_CM_EVENT_DISCONNECTED";
    case RDMA_CM_EVENT_DEVICE_REMOVAL: return "RDMA_CM_EVENT_DEVICE_REMOVAL";
    case RDMA_CM_EVENT_MULTICAST_JOIN: return "RDMA_CM_EVENT_MULTICAST_JOIN";
    case RDMA_CM_EVENT_MULTICAST_ERROR: return "RDMA_CM_EVENT_MULTICAST_ERROR";
    case RDMA_CM_EVENT_ADDR_CHANGE: return "RDMA_CM_EVENT_ADDR_CHANGE";
    case RDMA_CM_EVENT_TIMEWAIT_EXIT: return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
  }
  return "UNKNOWN EVENT";
}
