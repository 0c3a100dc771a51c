// Device: construction and the object tables (PD, MR, CQ, SRQ, MW, AH, multicast groups).
#include "engine/device_impl.h"

#include <cerrno>

#include "engine/odp.h"

namespace vrnic::engine {

Device::Device(const DeviceConfig& config, PacketPort& port, Clock& clock, HostMemory& host,
               EventSink& events)
    : impl_(std::make_unique<Impl>(config, port, clock, host, events)),
      counters_(&impl_->core.ctr) {}

Device::~Device() = default;

const DeviceConfig& Device::config() const { return impl_->core.config; }

// --- PD / MR --------------------------------------------------------------------------------

Pd* Device::alloc_pd() {
  if (impl_->pds.size() >= impl_->core.config.limits.max_pd) return nullptr;
  auto pd = std::make_unique<Pd>();
  pd->handle = impl_->next_pd_handle++;
  impl_->pds.push_back(std::move(pd));
  return impl_->pds.back().get();
}

Errno Device::dealloc_pd(Pd* pd) {
  auto& v = impl_->pds;
  auto it = std::find_if(v.begin(), v.end(), [&](auto& p) { return p.get() == pd; });
  if (it == v.end()) return EINVAL;
  if (pd->users > 0) return EBUSY;
  v.erase(it);
  return 0;
}

Errno Device::reg_mr(Pd* pd, void* addr, size_t length, uint64_t iova, uint32_t access,
                     MrInfo& out) {
  if (!impl_->has_pd(pd)) return EINVAL;
  // Implicit ODP: (NULL, SIZE_MAX) covers the whole address space with iova = va.
  const bool implicit = (access & kOnDemand) && addr == nullptr && length == SIZE_MAX;
  if (implicit && iova != 0) return EINVAL;
  // An empty region covers no byte (only a zero-length access finds it); it may be
  // registered zero-based, as the kernel allows for device memory (ibv_reg_dm_mr).
  const bool empty_ok = length != 0 || (access & kZeroBased);
  if (!implicit && (!empty_ok || addr == nullptr)) return EINVAL;
  if (length > impl_->core.config.limits.max_mr_size) return EINVAL;
  if (iova + length < iova) return EINVAL;
  // Remote write or atomic access requires local write access (IBA 11.2.8.1).
  if ((access & (kRemoteWrite | kRemoteAtomic)) && !(access & kLocalWrite)) return EINVAL;
  Mr* mr = impl_->core.mem.add(pd, addr, length, iova, access, impl_->core.config.limits.max_mr);
  if (mr == nullptr) return ENOMEM;
  ++pd->users;
  out.mr = mr;
  out.lkey = out.rkey = mr->key;
  impl_->core.publish_mr(*mr);
  return 0;
}

Errno Device::rereg_mr(Mr* mr, uint32_t flags, Pd* pd, void* addr, size_t length, uint64_t iova,
                       uint32_t access, MrInfo& out) {
  constexpr uint32_t kTranslation = 1, kChangePd = 2, kChangeAccess = 4;
  Impl& d = *impl_;
  d.drain_direct();
  if (!d.core.mem.has_mr(mr)) return EINVAL;
  if (flags == 0 || (flags & ~(kTranslation | kChangePd | kChangeAccess))) return EINVAL;
  if ((flags & kChangePd) && !d.has_pd(pd)) return EINVAL;
  if (mr->windows > 0) return EBUSY;  // windows bound to it would change under their users
  const uint32_t new_access = (flags & kChangeAccess) ? access : mr->access;
  if ((new_access & (kRemoteWrite | kRemoteAtomic)) && !(new_access & kLocalWrite)) return EINVAL;
  if (flags & kTranslation) {
    if (addr == nullptr || length == 0 || length > d.core.config.limits.max_mr_size ||
        iova + length < iova)
      return EINVAL;
  } else if ((flags & kChangeAccess) && (new_access & kOnDemand) != (mr->access & kOnDemand)) {
    return EINVAL;  // ODP or not is a property of the translation
  }
  // Everything checked: apply. The keys stay (IBA 10.6.4: a reregistered region keeps its
  // L_Key and R_Key here; requests already in flight see the new attributes). A direct
  // copy through the old translation finishes first.
  d.core.retract_mr(*mr);
  if (flags & kChangePd) {
    --mr->pd->users;
    mr->pd = pd;
    ++pd->users;
  }
  if (flags & kTranslation) {
    mr->host = static_cast<uint8_t*>(addr);
    mr->iova = iova;
    mr->length = length;
  }
  mr->access = new_access;
  out.mr = mr;
  out.lkey = out.rkey = mr->key;
  d.core.publish_mr(*mr);
  return 0;
}

Errno Device::advise_mr(Pd* pd, uint32_t advice, uint32_t flags, const Sge* sges, size_t n) {
  if (!impl_->has_pd(pd)) return EINVAL;
  return odp_advise(impl_->core.mem, pd, advice, flags, sges, n);
}

Errno Device::dereg_mr(Mr* mr) {
  impl_->drain_direct();  // copies submitted before the deregistration finish first
  if (!impl_->core.mem.has_mr(mr)) return EINVAL;
  if (mr->windows > 0) return EINVAL;  // windows still bound to it (as rxe)
  Pd* pd = mr->pd;
  impl_->core.retract_mr(*mr);  // no peer copies through it once this returns
  impl_->core.mem.remove(mr);
  --pd->users;
  return 0;
}

// --- CQ -------------------------------------------------------------------------------------

Cq* Device::create_cq(uint32_t& cqe, void* user_context, WorkCompletion* ring) {
  const DeviceLimits& l = impl_->core.config.limits;
  if (cqe == 0 || cqe > l.max_cqe || impl_->cqs.size() >= l.max_cq) return nullptr;
  impl_->cqs.push_back(std::make_unique<Cq>(cqe, user_context, ring));
  return impl_->cqs.back().get();
}

Errno Device::destroy_cq(Cq* cq) {
  auto& v = impl_->cqs;
  auto it = std::find_if(v.begin(), v.end(), [&](auto& c) { return c.get() == cq; });
  if (it == v.end()) return EINVAL;
  if (cq->users > 0) return EBUSY;
  impl_->core.forget_cq(cq);
  v.erase(it);
  return 0;
}

int Device::poll_cq(Cq* cq, WorkCompletion* out, int n) {
  if (cq == nullptr || n <= 0) return 0;
  // Held copies that would complete with a CQE are performed now; unsignaled ones may wait
  // for the rest of the burst, but not longer than kDirectHoldMaxNs (a peer may be waiting
  // for their data while this program polls).
  Core& c = impl_->core;
  if (!c.direct_ops.empty() &&
      (c.direct_signaled > 0 || c.now() - c.direct_first_ns >= kDirectHoldMaxNs))
    impl_->drain_direct();
  return cq->poll(out, n);
}

Errno Device::req_notify_cq(Cq* cq, bool solicited_only) {
  if (cq == nullptr) return EINVAL;
  cq->arm(solicited_only);
  return 0;
}

Errno Device::modify_cq(Cq* cq, uint32_t count, uint32_t period_us) {
  Core& c = impl_->core;
  if (!impl_->has_cq(cq)) return EINVAL;
  if (count > c.config.limits.max_cq_count || period_us > c.config.limits.max_cq_period_us)
    return EINVAL;
  cq->set_moderation(uint16_t(count), uint64_t(period_us) * 1000);
  // CQEs held back under the old values may be due under the new ones.
  if (cq->take_due_notification(c.now())) c.events.on_cq_event(cq, cq->user_context());
  c.watch_cq_deadline(cq);
  return 0;
}

Errno Device::resize_cq(Cq* cq, uint32_t& cqe, WorkCompletion* ring) {
  if (!impl_->has_cq(cq)) return EINVAL;
  if (cqe == 0 || cqe > impl_->core.config.limits.max_cqe) return EINVAL;
  return cq->resize(cqe, ring) ? 0 : EINVAL;
}

// --- SRQ (srq.cc holds the queue itself) -----------------------------------------------------

Srq* Device::create_srq(Pd* pd, SrqAttr& attr, void* user_context, Errno& err) {
  Impl& d = *impl_;
  err = d.has_pd(pd) ? srq_check_init(d.core.config.limits, attr) : EINVAL;
  if (err == 0 && d.srqs.size() >= d.core.config.limits.max_srq) err = ENOMEM;
  if (err != 0) return nullptr;
  auto srq = std::make_unique<Srq>();
  srq->pd = pd;
  srq->user_context = user_context;
  srq->max_wr = attr.max_wr;
  srq->max_sge = attr.max_sge;
  ++pd->users;
  d.srqs.push_back(std::move(srq));
  return d.srqs.back().get();
}

Errno Device::modify_srq(Srq* srq, const SrqAttr& attr, uint32_t mask) {
  if (!impl_->has_srq(srq)) return EINVAL;
  return srq_modify(impl_->core.config.limits, *srq, attr, mask);
}

Errno Device::query_srq(const Srq* srq, SrqAttr& attr) const {
  if (!impl_->has_srq(srq)) return EINVAL;
  attr.max_wr = srq->max_wr;
  attr.max_sge = srq->max_sge;
  attr.srq_limit = srq->limit;
  return 0;
}

Errno Device::destroy_srq(Srq* srq) {
  auto& v = impl_->srqs;
  auto it = std::find_if(v.begin(), v.end(), [&](auto& s) { return s.get() == srq; });
  if (it == v.end()) return EINVAL;
  if (srq->users > 0) return EBUSY;
  --srq->pd->users;
  if (srq->xrcd != nullptr) impl_->forget_xrc_srq(*srq);  // xrc.cc
  v.erase(it);
  return 0;
}

Errno Device::post_srq_recv(Srq* srq, const RecvWr* wrs, size_t n, size_t* bad) {
  if (!impl_->has_srq(srq)) return EINVAL;
  for (size_t i = 0; i < n; ++i) {
    if (Errno e = srq_post(*srq, wrs[i])) {
      if (bad) *bad = i;
      return e;
    }
  }
  return 0;
}

// --- memory windows (mw.cc executes binds and invalidations) ---------------------------------

Mw* Device::alloc_mw(Pd* pd, uint8_t type, uint32_t& rkey, Errno& err) {
  Impl& d = *impl_;
  err = 0;
  if (!d.has_pd(pd) || (type != 1 && type != 2)) {
    err = EINVAL;
    return nullptr;
  }
  Mw* mw = d.core.mem.add_mw(pd, type, d.core.config.limits.max_mw);
  if (mw == nullptr) {
    err = ENOMEM;
    return nullptr;
  }
  ++pd->users;
  rkey = mw->rkey;
  return mw;
}

Errno Device::dealloc_mw(Mw* mw) {
  if (!impl_->core.mem.has_mw(mw)) return EINVAL;
  Pd* pd = mw->pd;
  impl_->core.mem.remove_mw(mw);  // a bound window is unbound first
  --pd->users;
  return 0;
}
// --- address handles and multicast (ud.cc) -------------------------------------------------

Ah* Device::create_ah(Pd* pd, const AddressVector& av, Errno& err) {
  if (!impl_->has_pd(pd)) {
    err = EINVAL;
    return nullptr;
  }
  return ud_create_ah(impl_->core, pd, av, err);
}

Errno Device::destroy_ah(Ah* ah) { return ud_destroy_ah(impl_->core, ah); }

Errno Device::attach_mcast(Qp* qp, const Gid& gid, uint16_t) {
  if (qp == nullptr || impl_->find_qp(qp->qpn) != qp) return EINVAL;
  return ud_attach_mcast(impl_->core, *qp, gid);
}

Errno Device::detach_mcast(Qp* qp, const Gid& gid, uint16_t) {
  if (qp == nullptr || impl_->find_qp(qp->qpn) != qp) return EINVAL;
  return ud_detach_mcast(impl_->core, *qp, gid);
}

}  // namespace vrnic::engine
