// The doorbells: ibv_post_send / ibv_post_recv (through ibv_context.ops), WR list conversion.
#include <vector>

#include "abi/convert.h"
#include "abi/objects.h"
#include "abi/ops.h"
#include "live/live_nic.h"

using namespace vrnic::abi;
using vrnic::engine::Device;

namespace {

// Per-thread scratch, so a post costs no allocation once warm.
struct SendScratch {
  std::vector<vrnic::engine::SendWr> wrs;
  std::vector<ibv_send_wr*> src;
};
struct RecvScratch {
  std::vector<vrnic::engine::RecvWr> wrs;
  std::vector<ibv_recv_wr*> src;
};

// Rings the doorbell. LiveNic::locked wakes the progress thread itself when the post armed
// an earlier timer, and the thread revisits work the engine holds back (window, pacing).
template <typename Post>
int ring(vrnic::live::LiveNic* nic, Post&& post, bool post_send = false) {
  return nic->locked([&](Device& d) { return post(d); }, post_send);
}

}  // namespace

int vrnic::abi::op_post_send(ibv_qp* ibv, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  thread_local SendScratch s;
  s.wrs.clear();
  s.src.clear();
  for (ibv_send_wr* w = wr; w; w = w->next) {
    vrnic::engine::SendWr out;
    if (int err = to_engine_send_wr(*w, out)) {
      // Nothing is posted past a bad WR; the good ones before it still go.
      if (s.wrs.empty()) {
        *bad_wr = w;
        return err;
      }
      break;
    }
    if (ibv->qp_type == IBV_QPT_UD) {
      // wr.ud shares its union with wr.rdma / wr.atomic: read it on UD QPs only.
      out.ah = w->wr.ud.ah ? to_ah(w->wr.ud.ah)->ah : nullptr;
      out.remote_qpn = w->wr.ud.remote_qpn;
      out.remote_qkey = w->wr.ud.remote_qkey;
    } else if (ibv->qp_type == IBV_QPT_XRC_SEND) {
      out.xrc_remote_srqn = w->qp_type.xrc.remote_srqn;  // the XRCETH of its packets
    }
    s.wrs.push_back(out);
    s.src.push_back(w);
  }
  size_t bad = 0;
  Qp* qp = to_qp(ibv);
  int err = ring(to_context(ibv->context)->nic,
                 [&](Device& d) { return d.post_send(qp->qp, s.wrs.data(), s.wrs.size(), &bad); },
                 true);
  if (err) {
    *bad_wr = s.src[bad < s.src.size() ? bad : 0];
    return err;
  }
  // The list stopped at an unconvertible WR: report it now that the ones before it are posted.
  if (s.src.size() && s.src.back()->next) {
    ibv_send_wr* stop = s.src.back()->next;
    vrnic::engine::SendWr out;
    *bad_wr = stop;
    return to_engine_send_wr(*stop, out);
  }
  return 0;
}

int vrnic::abi::op_post_recv(ibv_qp* ibv, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  thread_local RecvScratch s;
  s.wrs.clear();
  s.src.clear();
  for (ibv_recv_wr* w = wr; w; w = w->next) {
    if (w->num_sge < 0) {
      if (s.wrs.empty()) {
        *bad_wr = w;
        return EINVAL;
      }
      break;
    }
    vrnic::engine::RecvWr out;
    to_engine_recv_wr(*w, out);
    s.wrs.push_back(out);
    s.src.push_back(w);
  }
  size_t bad = 0;
  Qp* qp = to_qp(ibv);
  int err = ring(to_context(ibv->context)->nic,
                 [&](Device& d) { return d.post_recv(qp->qp, s.wrs.data(), s.wrs.size(), &bad); });
  if (err) {
    *bad_wr = s.src[bad < s.src.size() ? bad : 0];
    return err;
  }
  if (s.src.size() && s.src.back()->next) {
    *bad_wr = s.src.back()->next;
    return EINVAL;
  }
  return 0;
}
