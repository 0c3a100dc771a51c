// XRC (IBA 9.2 XRCETH, 10.2.10 XRC domains): domains, XRC SRQs and their numbers, and the
// target QP's per-request choice of the XRC SRQ that receives.
#include <cerrno>

#include "engine/device_impl.h"

namespace vrnic::engine {

Xrcd* Device::open_xrcd() {
  impl_->xrcds.push_back(std::make_unique<Xrcd>());
  return impl_->xrcds.back().get();
}

Errno Device::close_xrcd(Xrcd* xrcd) {
  auto& v = impl_->xrcds;
  auto it = std::find_if(v.begin(), v.end(), [&](auto& x) { return x.get() == xrcd; });
  if (it == v.end()) return EINVAL;
  if (xrcd->users > 0) return EBUSY;
  v.erase(it);
  return 0;
}

Srq* Device::create_xrc_srq(Pd* pd, Xrcd* xrcd, Cq* cq, SrqAttr& attr, void* user_context,
                            Errno& err) {
  Impl& d = *impl_;
  if (!d.has_xrcd(xrcd) || !d.has_cq(cq)) {
    err = EINVAL;
    return nullptr;
  }
  Srq* srq = create_srq(pd, attr, user_context, err);
  if (srq == nullptr) return nullptr;
  while (d.core.xrc_srqs.count(d.next_srqn) || d.next_srqn == 0)
    d.next_srqn = (d.next_srqn + 1) & 0xffffff;
  srq->srqn = d.next_srqn;
  d.next_srqn = (d.next_srqn + 1) & 0xffffff;
  srq->xrcd = xrcd;
  srq->cq = cq;
  ++xrcd->users;
  ++cq->users;
  d.core.xrc_srqs.emplace(srq->srqn, srq);
  return srq;
}

Errno Device::srq_num(const Srq* srq, uint32_t& srqn) const {
  if (!impl_->has_srq(srq) || srq->xrcd == nullptr) return EINVAL;
  srqn = srq->srqn;
  return 0;
}

void Device::Impl::forget_xrc_srq(Srq& srq) {
  core.xrc_srqs.erase(srq.srqn);
  --srq.xrcd->users;
  --srq.cq->users;
  for (auto& [qpn, qp] : qps) {
    if (qp->type != QpType::kXrcTgt || qp->srq != &srq) continue;
    // A message in progress into this SRQ can never complete: its WQE goes with the SRQ.
    qp->resp.have_recv = false;
    qp->srq = nullptr;
    qp->pd = nullptr;
    qp->recv_cq = nullptr;
  }
}

// IBA 9.2 / 10.2.10: a request on an XRC target QP names its XRC SRQ in the XRCETH; it must
// exist and belong to the target's XRC domain. Its PD is the one the memory keys are checked
// in, its CQ the one the receive completes to.
bool xrc_bind_srq(Core& c, Qp& qp, uint32_t srqn) {
  auto it = c.xrc_srqs.find(srqn);
  if (it == c.xrc_srqs.end() || it->second->xrcd != qp.xrcd) return false;
  Srq* srq = it->second;
  // A message in progress stays with the SRQ its first packet named.
  if (qp.resp.have_recv && qp.srq != srq) return false;
  qp.srq = srq;
  qp.pd = srq->pd;
  qp.recv_cq = srq->cq;
  return true;
}

}  // namespace vrnic::engine
