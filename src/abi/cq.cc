// Completion queues and completion channels (eventfd-backed), polling and arming.
#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <new>

#include "abi/convert.h"
#include "abi/objects.h"
#include "abi/ops.h"
#include "live/live_nic.h"

using namespace vrnic::abi;
using vrnic::engine::Device;

VRNIC_EXPORT ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
  auto* ch = new (std::nothrow) Channel;
  if (!ch) return fail_null<ibv_comp_channel>(ENOMEM);
  ch->ibv.context = context;
  ch->ibv.refcnt = 0;
  ch->ibv.fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (ch->ibv.fd < 0) {
    const int err = errno;
    delete ch;
    return fail_null<ibv_comp_channel>(err);
  }
  return &ch->ibv;
}

VRNIC_EXPORT int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  Channel* ch = to_channel(channel);
  {
    std::lock_guard g(ch->mu);
    if (channel->refcnt) return EBUSY;  // CQs still use it
  }
  close(channel->fd);
  delete ch;
  return 0;
}

// An armed CQ got a completion: queue it on its channel and wake ibv_get_cq_event (no
// token while a thread of this process waits for it moving packets: it takes it as is).
void vrnic::abi::on_cq_event(vrnic::engine::Cq*, void* cq_user_context) {
  auto* cq = static_cast<ibv_cq*>(cq_user_context);
  Channel* ch = cq->channel ? to_channel(cq->channel) : nullptr;
  if (!ch) return;
  {
    std::lock_guard g(ch->mu);
    ch->events.push_back(cq);
    if (ch->spinners > 0) {
      ++ch->untokened;
      return;
    }
  }
  give_token(ch->ibv.fd);
}

namespace {

// A blocking channel: the event is most often on its way (a ping-pong's answer), and the
// device moves its packets in this thread for a while before it sleeps (docs/live.md,
// "Completion events"). Returns an event that came without a token, or null: then the
// caller reads a token as usual.
ibv_cq* wait_moving_packets(ibv_comp_channel* channel, Channel* ch) {
  {
    std::lock_guard g(ch->mu);
    ++ch->spinners;
  }
  to_context(channel->context)->nic->wait_for_event([ch] {
    std::lock_guard g(ch->mu);
    return !ch->events.empty();
  });
  std::lock_guard g(ch->mu);
  --ch->spinners;
  if (ch->untokened > 0) {  // the front event needs no token: the fd's count stays right
    // (untokened <= events.size(): ibv_destroy_cq keeps it so)
    --ch->untokened;
    ibv_cq* cq = ch->events.front();
    ch->events.pop_front();
    if (ch->spinners == 0 && ch->untokened > 0) {
      const uint64_t n = ch->untokened;
      ch->untokened = 0;
      ssize_t ignored = write(channel->fd, &n, sizeof n);
      (void)ignored;
    }
    return cq;
  }
  return nullptr;
}

}  // namespace

VRNIC_EXPORT int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq_out, void** cq_context) {
  Channel* ch = to_channel(channel);
  // A non-blocking channel answers EAGAIN at once when no event is queued, as rdma-core's.
  ibv_cq* cq = nullptr;
  if (channel->context != nullptr && !(fcntl(channel->fd, F_GETFL) & O_NONBLOCK))
    cq = wait_moving_packets(channel, ch);
  while (cq == nullptr) {
    if (take_token(channel->fd) != 0) return -1;
    std::lock_guard g(ch->mu);
    if (ch->events.empty()) continue;  // its CQ was destroyed before the event was read
    cq = ch->events.front();
    ch->events.pop_front();
    break;
  }
  Cq* c = to_cq(cq);
  pthread_mutex_lock(&cq->mutex);
  ++c->comp_events_delivered;
  pthread_mutex_unlock(&cq->mutex);
  *cq_out = cq;
  *cq_context = cq->cq_context;
  return 0;
}

VRNIC_EXPORT void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += nevents;
  pthread_cond_signal(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}

ibv_cq* vrnic::abi::create_cq(ibv_context* context, int cqe, void* cq_context,
                              ibv_comp_channel* channel, int comp_vector,
                              ibv_pd* parent_domain) {
  if (cqe <= 0 || comp_vector < 0 || comp_vector >= context->num_comp_vectors) {
    return fail_null<ibv_cq>(EINVAL);
  }
  // On a parent domain with allocators, the CQ's memory comes from the program.
  auto* cq = new_object<Cq>(parent_domain, kResTypeCq);
  if (!cq) return fail_null<ibv_cq>(ENOMEM);
  uint32_t depth = uint32_t(cqe);
  vrnic::live::LiveNic* nic = to_context(context)->nic;
  int err = depth > nic->locked([](Device& d) { return d.config().limits.max_cqe; })
                ? EINVAL
                : alloc_cq_ring(parent_domain, depth, cq->ring);
  if (!err) {
    cq->cq = nic->locked([&](Device& d) { return d.create_cq(depth, &cq->ibv, cq->ring.mem); });
    if (!cq->cq) err = ENOMEM;
  }
  if (err) {
    free_cq_ring(parent_domain, cq->ring);
    delete_object(cq, parent_domain, kResTypeCq);
    return fail_null<ibv_cq>(err);
  }
  if (parent_domain) {
    cq->parent_domain = parent_domain;
    hold_domain(parent_domain);
  }
  ibv_cq& c = cq->ibv;
  c.context = context;
  c.channel = channel;
  c.cq_context = cq_context;
  c.cqe = int(depth);
  pthread_mutex_init(&c.mutex, nullptr);
  pthread_cond_init(&c.cond, nullptr);
  if (channel) {
    std::lock_guard g(to_channel(channel)->mu);
    ++channel->refcnt;
  }
  return &c;
}

VRNIC_EXPORT ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cq_context,
                                   ibv_comp_channel* channel, int comp_vector) {
  return create_cq(context, cqe, cq_context, channel, comp_vector, nullptr);
}

VRNIC_EXPORT int ibv_destroy_cq(ibv_cq* ibv) {
  Cq* cq = to_cq(ibv);
  Context* ctx = to_context(ibv->context);
  const int err = ctx->nic->locked([&](Device& d) { return d.destroy_cq(cq->cq); });
  if (err) return err;
  // No event for it can come any more; forget the unread ones, then wait for the acks of
  // those the program read (the ibv_destroy_cq contract).
  if (ibv->channel) {
    Channel* ch = to_channel(ibv->channel);
    std::lock_guard g(ch->mu);
    ch->events.erase(std::remove(ch->events.begin(), ch->events.end(), ibv), ch->events.end());
    // A token left without its event is skipped by ibv_get_cq_event; an untokened event
    // must still exist.
    ch->untokened = std::min(ch->untokened, ch->events.size());
    --ibv->channel->refcnt;
  }
  drop_async_events(ctx, ibv);
  pthread_mutex_lock(&ibv->mutex);
  while (ibv->comp_events_completed != cq->comp_events_delivered ||
         ibv->async_events_completed != cq->async_events_delivered) {
    pthread_cond_wait(&ibv->cond, &ibv->mutex);
  }
  pthread_mutex_unlock(&ibv->mutex);
  pthread_mutex_destroy(&ibv->mutex);
  pthread_cond_destroy(&ibv->cond);
  ibv_pd* parent_domain = cq->parent_domain;
  free_cq_ring(parent_domain, cq->ring);
  delete_object(cq, parent_domain, kResTypeCq);
  if (parent_domain) release_domain(parent_domain);
  return 0;
}

int vrnic::abi::op_poll_cq(ibv_cq* ibv, int num_entries, ibv_wc* wc) {
  if (num_entries < 0) return -1;
  Cq* cq = to_cq(ibv);
  vrnic::live::LiveNic* nic = to_context(ibv->context)->nic;
  constexpr int kBatch = 32;
  // Per thread, so a busy-polling program does not re-initialise it on every empty poll.
  thread_local vrnic::engine::WorkCompletion batch[kBatch];
  int total = 0;
  while (total < num_entries) {
    const int want = std::min(kBatch, num_entries - total);
    const int got = nic->poll_cq(cq->cq, batch, want);
    if (got < 0) return total ? total : -1;
    for (int i = 0; i < got; ++i) to_ibv_wc(batch[i], wc[total + i]);
    total += got;
    if (got < want) break;
  }
  return total;
}

// ibv_modify_cq: CQ moderation. rdma-core refuses a mask bit at or past IBV_CQ_ATTR_RESERVED
// and the kernel an empty mask (EINVAL); mlx5 a period over its 12 bits (EINVAL).
int vrnic::abi::op_modify_cq(ibv_cq* ibv, ibv_modify_cq_attr* attr) {
  if (attr->attr_mask == 0 || attr->attr_mask >= IBV_CQ_ATTR_RESERVED) return EINVAL;
  return to_context(ibv->context)->nic->locked([&](Device& d) {
    return d.modify_cq(to_cq(ibv)->cq, attr->moderate.cq_count, attr->moderate.cq_period);
  });
}

int vrnic::abi::op_req_notify_cq(ibv_cq* ibv, int solicited_only) {
  vrnic::live::LiveNic* nic = to_context(ibv->context)->nic;
  const int err =
      nic->locked([&](Device& d) { return d.req_notify_cq(to_cq(ibv)->cq, solicited_only != 0); });
  nic->cq_armed();  // the program may sleep on its channel next
  return err;
}
