// XRC verbs: ibv_open_xrcd / ibv_close_xrcd, ibv_create_srq_ex (IBV_SRQT_XRC), ibv_get_srq_num
// and the XRC target QP of ibv_create_qp_ex (IBV_QPT_XRC_RECV), as verbs_context ops.
#include <fcntl.h>
#include <sys/stat.h>

#include <map>
#include <mutex>
#include <new>
#include <utility>

#include "abi/convert.h"
#include "abi/objects.h"
#include "abi/ops.h"
#include "live/live_nic.h"

using namespace vrnic::abi;
using vrnic::engine::Device;

namespace {

// A domain opened through a file: (device, inode) of the file. Every open of it returns a
// handle of its own on the one engine domain, which is closed with the last handle.
using FileKey = std::pair<dev_t, ino_t>;
struct Shared {
  vrnic::engine::Xrcd* xrcd = nullptr;
  unsigned opens = 0;
};

struct Xrcd {
  ibv_xrcd ibv;
  vrnic::engine::Xrcd* xrcd = nullptr;
  bool by_file = false;
  FileKey file{};
};
Xrcd* to_xrcd(ibv_xrcd* x) { return reinterpret_cast<Xrcd*>(x); }

vrnic::live::LiveNic* nic_of(ibv_context* c) { return to_context(c)->nic; }

// Per device (one LiveNic per device in a process): the domains opened through files.
std::mutex g_files_mu;
std::map<std::pair<vrnic::live::LiveNic*, FileKey>, Shared> g_files;

// The uverbs rules for a domain named by a file: an fd that is not open is EBADF; no domain
// for that file yet needs O_CREAT (EAGAIN), an existing one refuses O_EXCL (EINVAL).
int open_by_file(ibv_context* context, int fd, int oflags, Xrcd& x) {
  struct stat st;
  if (fstat(fd, &st) != 0) return EBADF;
  x.by_file = true;
  x.file = {st.st_dev, st.st_ino};
  std::lock_guard g(g_files_mu);
  Shared& s = g_files[{nic_of(context), x.file}];
  if (s.opens == 0 && !(oflags & O_CREAT)) {
    g_files.erase({nic_of(context), x.file});
    return EAGAIN;
  }
  if (s.opens > 0 && (oflags & O_EXCL)) return EINVAL;
  if (s.opens == 0) s.xrcd = nic_of(context)->locked([](Device& d) { return d.open_xrcd(); });
  ++s.opens;
  x.xrcd = s.xrcd;
  return 0;
}

void init_srq(ibv_srq& s, ibv_context* context, const ibv_srq_init_attr_ex& a) {
  s.context = context;
  s.srq_context = a.srq_context;
  s.pd = a.pd;
  s.handle = 0;
  s.events_completed = 0;
  pthread_mutex_init(&s.mutex, nullptr);
  pthread_cond_init(&s.cond, nullptr);
}

}  // namespace

// The kernel's rules (uverbs open_xrcd): FD and OFLAGS must be given, only O_CREAT / O_EXCL
// are flags; fd -1 is a new domain. A file names a domain shared by every open of that file
// in this process (the kernel shares it between processes too; vrnic's QPs and SRQs live in
// the process that made them, so across processes each has its own, and ibv_open_qp stays
// EOPNOTSUPP).
ibv_xrcd* vrnic::abi::op_open_xrcd(ibv_context* context, ibv_xrcd_init_attr* attr) {
  if (!attr) return fail_null<ibv_xrcd>(EINVAL);
  if (attr->comp_mask >= IBV_XRCD_INIT_ATTR_RESERVED) return fail_null<ibv_xrcd>(EOPNOTSUPP);
  if (!(attr->comp_mask & IBV_XRCD_INIT_ATTR_FD) || !(attr->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS))
    return fail_null<ibv_xrcd>(EINVAL);
  if (attr->oflags & ~(O_CREAT | O_EXCL)) return fail_null<ibv_xrcd>(EINVAL);
  auto* x = new (std::nothrow) Xrcd{};
  if (!x) return fail_null<ibv_xrcd>(ENOMEM);
  if (attr->fd == -1) {
    x->xrcd = nic_of(context)->locked([](Device& d) { return d.open_xrcd(); });
  } else if (int err = open_by_file(context, attr->fd, attr->oflags, *x)) {
    delete x;
    return fail_null<ibv_xrcd>(err);
  }
  x->ibv.context = context;
  return &x->ibv;
}

// EBUSY while SRQs or target QPs are in the domain, once its last handle is closed.
int vrnic::abi::op_close_xrcd(ibv_xrcd* ibv) {
  if (!ibv) return EINVAL;
  Xrcd* x = to_xrcd(ibv);
  vrnic::live::LiveNic* nic = nic_of(ibv->context);
  std::unique_lock g(g_files_mu, std::defer_lock);
  Shared* s = nullptr;
  if (x->by_file) {
    g.lock();
    s = &g_files[{nic, x->file}];
  }
  if (!s || s->opens == 1) {
    const int err = nic->locked([&](Device& d) { return d.close_xrcd(x->xrcd); });
    if (err) return err;
    if (s) g_files.erase({nic, x->file});
  } else {
    --s->opens;
  }
  delete x;
  return 0;
}

// Basic SRQs come here only with comp_mask bits beyond PD and TYPE (rdma-core's inline
// ibv_create_srq_ex sends the plain ones to ibv_create_srq); XRCD and CQ mean nothing to them.
ibv_srq* vrnic::abi::op_create_srq_ex(ibv_context* context, ibv_srq_init_attr_ex* a) {
  constexpr uint32_t kKnown = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
                              IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
  if (!a) return fail_null<ibv_srq>(EINVAL);
  if (a->comp_mask & ~kKnown) return fail_null<ibv_srq>(EOPNOTSUPP);  // tag matching
  const ibv_srq_type type = (a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ? a->srq_type : IBV_SRQT_BASIC;
  if (type != IBV_SRQT_BASIC && type != IBV_SRQT_XRC) return fail_null<ibv_srq>(EOPNOTSUPP);
  if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !a->pd || a->pd->context != context)
    return fail_null<ibv_srq>(EINVAL);
  if (type == IBV_SRQT_BASIC) {
    ibv_srq_init_attr basic{a->srq_context, a->attr};
    ibv_srq* s = ibv_create_srq(a->pd, &basic);
    if (s) a->attr = basic.attr;
    return s;
  }
  const uint32_t kNeed = IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
  if ((a->comp_mask & kNeed) != kNeed || !a->xrcd || !a->cq) return fail_null<ibv_srq>(EINVAL);
  auto* srq = new (std::nothrow) Srq{};
  if (!srq) return fail_null<ibv_srq>(ENOMEM);
  Device::SrqAttr attr{a->attr.max_wr, a->attr.max_sge, a->attr.srq_limit};
  int err = 0;
  srq->srq = nic_of(context)->locked([&](Device& d) {
    return d.create_xrc_srq(to_pd(a->pd)->pd, to_xrcd(a->xrcd)->xrcd, to_cq(a->cq)->cq, attr,
                            &srq->ibv, err);
  });
  if (!srq->srq) {
    delete srq;
    return fail_null<ibv_srq>(err ? err : ENOMEM);
  }
  a->attr.max_wr = attr.max_wr;
  a->attr.max_sge = attr.max_sge;
  hold_domain(a->pd);  // ibv_destroy_srq releases it
  init_srq(srq->ibv, context, *a);
  return &srq->ibv;
}

int vrnic::abi::op_get_srq_num(ibv_srq* ibv, uint32_t* srq_num) {
  if (!ibv || !srq_num) return EINVAL;
  Srq* srq = to_srq(ibv);
  return nic_of(ibv->context)->locked([&](Device& d) { return d.srq_num(srq->srq, *srq_num); });
}

// An XRC target QP: no PD, CQs or work queues of its own (IBA 10.2.10; mlx5 ignores them).
ibv_qp* vrnic::abi::create_xrc_tgt_qp(ibv_context* context, ibv_qp_init_attr_ex* attr) {
  if (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd ||
      attr->xrcd->context != context)
    return fail_null<ibv_qp>(EINVAL);
  auto* qp = new_object<Qp>(nullptr, kResTypeQp);  // no PD: from the heap
  if (!qp) return fail_null<ibv_qp>(ENOMEM);
  vrnic::engine::QpInitAttr init;
  init.type = vrnic::engine::QpType::kXrcTgt;
  init.xrcd = to_xrcd(attr->xrcd)->xrcd;
  if (int err = make_qp(context, qp, init, attr->qp_context, IBV_QPT_XRC_RECV)) {
    delete_object(qp, nullptr, kResTypeQp);
    return fail_null<ibv_qp>(err);
  }
  attr->cap = ibv_qp_cap{};
  return &qp->ibv;
}
