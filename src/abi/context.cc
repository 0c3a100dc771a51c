// Opening and closing the device (LiveNic::acquire/release), and the async event queue.
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "abi/identity.h"
#include "abi/objects.h"
#include "abi/ops.h"
#include "live/live_nic.h"

using namespace vrnic::abi;
using vrnic::engine::AsyncEventType;

namespace vrnic::abi {
namespace {

// Open contexts, for device-wide events (port, fatal) that belong to no object.
std::mutex g_contexts_mu;
std::vector<Context*> g_contexts;

void fill_ops(Context* c) {
  ibv_context_ops& ops = c->vctx.context.ops;
  ops.poll_cq = op_poll_cq;
  ops.req_notify_cq = op_req_notify_cq;
  ops.post_send = op_post_send;
  ops.post_recv = op_post_recv;
  ops.post_srq_recv = op_post_srq_recv;
  ops.alloc_mw = op_alloc_mw;
  ops.dealloc_mw = op_dealloc_mw;
  ops.bind_mw = op_bind_mw;
  c->vctx.query_port = op_query_port;
  c->vctx.advise_mr = op_advise_mr;
  c->vctx.query_device_ex = op_query_device_ex;
  c->vctx.create_qp_ex = op_create_qp_ex;
  c->vctx.create_cq_ex = op_create_cq_ex;
  c->vctx.query_rt_values = op_query_rt_values;
  c->vctx.modify_cq = op_modify_cq;
  c->vctx.alloc_td = op_alloc_td;
  c->vctx.dealloc_td = op_dealloc_td;
  c->vctx.alloc_parent_domain = op_alloc_parent_domain;
  c->vctx.alloc_dm = op_alloc_dm;
  c->vctx.free_dm = op_free_dm;
  c->vctx.reg_dm_mr = op_reg_dm_mr;
  c->vctx.open_xrcd = op_open_xrcd;
  c->vctx.close_xrcd = op_close_xrcd;
  c->vctx.create_srq_ex = op_create_srq_ex;
  c->vctx.get_srq_num = op_get_srq_num;
  // create_flow, create_wq, counters... stay null: the inline wrappers say EOPNOTSUPP.
}

ibv_async_event make_event(const engine::AsyncEvent& ev) {
  ibv_async_event out{};
  out.event_type = ibv_event_type(ev.type);
  switch (ev.type) {
    case AsyncEventType::kCqErr:
      out.element.cq = static_cast<ibv_cq*>(ev.user_context);
      break;
    case AsyncEventType::kSrqErr:
    case AsyncEventType::kSrqLimitReached:
      out.element.srq = static_cast<ibv_srq*>(ev.user_context);
      break;
    case AsyncEventType::kWqFatal:
      out.element.wq = static_cast<ibv_wq*>(ev.user_context);
      break;
    case AsyncEventType::kDeviceFatal:
    case AsyncEventType::kPortActive:
    case AsyncEventType::kPortErr:
    case AsyncEventType::kLidChange:
    case AsyncEventType::kPkeyChange:
    case AsyncEventType::kSmChange:
    case AsyncEventType::kClientReregister:
    case AsyncEventType::kGidChange:
      out.element.port_num = int(ev.port_num);
      break;
    default:
      out.element.qp = static_cast<ibv_qp*>(ev.user_context);
      break;
  }
  return out;
}

}  // namespace

int take_token(int fd) {
  uint64_t v;
  for (;;) {
    ssize_t n = read(fd, &v, sizeof(v));
    if (n == sizeof(v)) return 0;
    if (n < 0 && errno == EINTR) continue;
    return -1;
  }
}

void give_token(int fd) {
  const uint64_t one = 1;
  ssize_t n;
  do n = write(fd, &one, sizeof(one));
  while (n < 0 && errno == EINTR);
}

void push_async_event(Context* ctx, const ibv_async_event& ev) {
  {
    std::lock_guard g(ctx->async_mu);
    ctx->async_events.push_back(ev);
  }
  give_token(ctx->vctx.context.async_fd);
}

void on_async_event(const engine::AsyncEvent& ev) {
  const ibv_async_event out = make_event(ev);
  switch (ev.type) {
    case AsyncEventType::kCqErr:
      push_async_event(to_context(out.element.cq->context), out);
      return;
    case AsyncEventType::kSrqErr:
    case AsyncEventType::kSrqLimitReached:
      push_async_event(to_context(out.element.srq->context), out);
      return;
    case AsyncEventType::kWqFatal:
      push_async_event(to_context(out.element.wq->context), out);
      return;
    default:
      break;
  }
  if (ev.user_context) {
    push_async_event(to_context(out.element.qp->context), out);
    if (ev.type == AsyncEventType::kQpFatal) notify_qp_fatal(out.element.qp->qp_num);
    return;
  }
  std::lock_guard g(g_contexts_mu);  // a device or port event: every open context sees it
  for (Context* c : g_contexts) push_async_event(c, out);
}

void drop_async_events(Context* ctx, const void* element) {
  std::lock_guard g(ctx->async_mu);
  auto& q = ctx->async_events;
  q.erase(std::remove_if(q.begin(), q.end(),
                         [&](const ibv_async_event& e) { return e.element.qp == element; }),
          q.end());
}

}  // namespace vrnic::abi

ibv_context* vrnic::abi::new_context(ibv_device* device, int cmd_fd,
                                     std::shared_ptr<CmdFile> file) {
  auto* c = new (std::nothrow) Context;
  if (!c) {
    if (cmd_fd >= 0) close(cmd_fd);
    return fail_null<ibv_context>(ENOMEM);
  }
  std::memset(&c->vctx, 0, sizeof(c->vctx));
  c->vctx.sz = sizeof(verbs_context);
  c->file = std::move(file);
  ibv_context& ctx = c->vctx.context;
  ctx.device = device;
  ctx.cmd_fd = cmd_fd;  // every command is served in process; the fd is what imports name
  ctx.num_comp_vectors = 1;
  ctx.abi_compat = __VERBS_ABI_IS_EXTENDED;
  pthread_mutex_init(&ctx.mutex, nullptr);
  fill_ops(c);

  ctx.async_fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  int err = errno;
  if (ctx.async_fd >= 0) {
    vrnic::live::LiveNicCallbacks cb{on_cq_event, on_async_event};
    err = 0;
    c->nic = vrnic::live::LiveNic::acquire(cb, err);
    if (!c->nic) close(ctx.async_fd);
  }
  if (!c->nic) {
    if (cmd_fd >= 0) close(cmd_fd);
    delete c;
    return fail_null<ibv_context>(err ? err : ENODEV);
  }
  set_current_gid(c->nic->gid());
  {
    std::lock_guard g(g_contexts_mu);
    g_contexts.push_back(c);
  }
  return &ctx;
}

VRNIC_EXPORT ibv_context* ibv_open_device(ibv_device* device) {
  if (device != the_device()) return fail_null<ibv_context>(ENODEV);
  int cmd_fd = -1;
  std::shared_ptr<CmdFile> file = CmdFile::create(cmd_fd);
  return new_context(device, cmd_fd, std::move(file));
}

VRNIC_EXPORT int ibv_close_device(ibv_context* context) {
  Context* c = to_context(context);
  {
    std::lock_guard g(g_contexts_mu);
    g_contexts.erase(std::remove(g_contexts.begin(), g_contexts.end(), c), g_contexts.end());
  }
  vrnic::live::LiveNic::release(c->nic);
  close(context->async_fd);
  if (context->cmd_fd >= 0) close(context->cmd_fd);
  pthread_mutex_destroy(&context->mutex);
  delete c;
  return 0;
}

VRNIC_EXPORT int ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
  Context* c = to_context(context);
  for (;;) {
    if (take_token(context->async_fd) != 0) return -1;
    std::lock_guard g(c->async_mu);
    // A token without an event: its object was destroyed before the event was read.
    if (c->async_events.empty()) continue;
    *event = c->async_events.front();
    c->async_events.pop_front();
    break;
  }
  // Count deliveries, so destroying the object waits for the matching acks.
  switch (event->event_type) {
    case IBV_EVENT_CQ_ERR: {
      Cq* cq = to_cq(event->element.cq);
      pthread_mutex_lock(&cq->ibv.mutex);
      ++cq->async_events_delivered;
      pthread_mutex_unlock(&cq->ibv.mutex);
      break;
    }
    case IBV_EVENT_SRQ_ERR: case IBV_EVENT_SRQ_LIMIT_REACHED: {
      Srq* srq = to_srq(event->element.srq);
      pthread_mutex_lock(&srq->ibv.mutex);
      ++srq->async_events_delivered;
      pthread_mutex_unlock(&srq->ibv.mutex);
      break;
    }
    case IBV_EVENT_QP_FATAL: case IBV_EVENT_QP_REQ_ERR: case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST: case IBV_EVENT_SQ_DRAINED: case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR: case IBV_EVENT_QP_LAST_WQE_REACHED: {
      Qp* qp = to_qp(event->element.qp);
      pthread_mutex_lock(&qp->ibv.mutex);
      ++qp->async_events_delivered;
      pthread_mutex_unlock(&qp->ibv.mutex);
      break;
    }
    default:
      break;
  }
  return 0;
}

VRNIC_EXPORT void ibv_ack_async_event(ibv_async_event* event) {
  switch (event->event_type) {
    case IBV_EVENT_CQ_ERR: {
      ibv_cq* cq = event->element.cq;
      pthread_mutex_lock(&cq->mutex);
      ++cq->async_events_completed;
      pthread_cond_signal(&cq->cond);
      pthread_mutex_unlock(&cq->mutex);
      break;
    }
    case IBV_EVENT_SRQ_ERR: case IBV_EVENT_SRQ_LIMIT_REACHED: {
      ibv_srq* srq = event->element.srq;
      pthread_mutex_lock(&srq->mutex);
      ++srq->events_completed;
      pthread_cond_signal(&srq->cond);
      pthread_mutex_unlock(&srq->mutex);
      break;
    }
    case IBV_EVENT_QP_FATAL: case IBV_EVENT_QP_REQ_ERR: case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST: case IBV_EVENT_SQ_DRAINED: case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR: case IBV_EVENT_QP_LAST_WQE_REACHED: {
      ibv_qp* qp = event->element.qp;
      pthread_mutex_lock(&qp->mutex);
      ++qp->events_completed;
      pthread_cond_signal(&qp->cond);
      pthread_mutex_unlock(&qp->mutex);
      break;
    }
    default:
      break;
  }
}
