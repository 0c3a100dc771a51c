// Shared receive queues: ibv_create_srq / ibv_modify_srq / ibv_query_srq / ibv_destroy_srq
// and the ibv_post_srq_recv doorbell (ibv_context.ops.post_srq_recv).
#include <new>
#include <vector>

#include "abi/convert.h"
#include "abi/objects.h"
#include "abi/ops.h"
#include "live/live_nic.h"

using namespace vrnic::abi;
using vrnic::engine::Device;

namespace {

vrnic::live::LiveNic* nic_of(ibv_srq* srq) { return to_context(srq->context)->nic; }

}  // namespace

VRNIC_EXPORT ibv_srq* ibv_create_srq(ibv_pd* ibv_pd, ibv_srq_init_attr* init) {
  if (!ibv_pd || !init) return fail_null<ibv_srq>(EINVAL);
  auto* srq = new (std::nothrow) Srq{};
  if (!srq) return fail_null<ibv_srq>(ENOMEM);
  Device::SrqAttr attr{init->attr.max_wr, init->attr.max_sge, init->attr.srq_limit};
  Pd* pd = to_pd(ibv_pd);
  int err = 0;
  srq->srq = to_context(ibv_pd->context)->nic->locked(
      [&](Device& d) { return d.create_srq(pd->pd, attr, &srq->ibv, err); });
  if (!srq->srq) {
    delete srq;
    return fail_null<ibv_srq>(err ? err : ENOMEM);
  }
  init->attr.max_wr = attr.max_wr;
  init->attr.max_sge = attr.max_sge;
  hold_domain(ibv_pd);
  ibv_srq& s = srq->ibv;
  s.context = ibv_pd->context;
  s.srq_context = init->srq_context;
  s.pd = ibv_pd;
  s.handle = 0;
  s.events_completed = 0;
  pthread_mutex_init(&s.mutex, nullptr);
  pthread_cond_init(&s.cond, nullptr);
  return &s;
}

VRNIC_EXPORT int ibv_modify_srq(ibv_srq* ibv, ibv_srq_attr* attr, int mask) {
  if (!ibv || !attr) return EINVAL;
  Device::SrqAttr a{attr->max_wr, attr->max_sge, attr->srq_limit};
  Srq* srq = to_srq(ibv);
  return nic_of(ibv)->locked([&](Device& d) { return d.modify_srq(srq->srq, a, uint32_t(mask)); });
}

VRNIC_EXPORT int ibv_query_srq(ibv_srq* ibv, ibv_srq_attr* attr) {
  if (!ibv || !attr) return EINVAL;
  Device::SrqAttr a;
  Srq* srq = to_srq(ibv);
  const int err = nic_of(ibv)->locked([&](Device& d) { return d.query_srq(srq->srq, a); });
  if (err) return err;
  attr->max_wr = a.max_wr;
  attr->max_sge = a.max_sge;
  attr->srq_limit = a.srq_limit;
  return 0;
}

VRNIC_EXPORT int ibv_destroy_srq(ibv_srq* ibv) {
  Srq* srq = to_srq(ibv);
  const int err = nic_of(ibv)->locked([&](Device& d) { return d.destroy_srq(srq->srq); });
  if (err) return err;
  // As for QPs: forget unread events, wait for the acks of those the program read.
  drop_async_events(to_context(ibv->context), ibv);
  pthread_mutex_lock(&ibv->mutex);
  while (ibv->events_completed != srq->async_events_delivered)
    pthread_cond_wait(&ibv->cond, &ibv->mutex);
  pthread_mutex_unlock(&ibv->mutex);
  pthread_mutex_destroy(&ibv->mutex);
  pthread_cond_destroy(&ibv->cond);
  release_domain(ibv->pd);
  delete srq;
  return 0;
}

int vrnic::abi::op_post_srq_recv(ibv_srq* ibv, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  thread_local std::vector<vrnic::engine::RecvWr> wrs;
  thread_local std::vector<ibv_recv_wr*> src;
  wrs.clear();
  src.clear();
  for (ibv_recv_wr* w = wr; w; w = w->next) {
    if (w->num_sge < 0) break;
    vrnic::engine::RecvWr out;
    to_engine_recv_wr(*w, out);
    wrs.push_back(out);
    src.push_back(w);
  }
  size_t bad = 0;
  Srq* srq = to_srq(ibv);
  int err = 0;
  if (!wrs.empty())
    err = nic_of(ibv)->locked(
        [&](Device& d) { return d.post_srq_recv(srq->srq, wrs.data(), wrs.size(), &bad); });
  if (err) {
    *bad_wr = src[bad < src.size() ? bad : 0];
    return err;
  }
  ibv_recv_wr* stop = src.empty() ? wr : src.back()->next;
  if (stop) {  // a WR with a negative num_sge
    *bad_wr = stop;
    return EINVAL;
  }
  return 0;
}
