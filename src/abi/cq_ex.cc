// ibv_create_cq_ex with the ibv_start_poll / ibv_next_poll / ibv_end_poll API and the
// ibv_wc_read_* callbacks, completion timestamps (ibv_query_rt_values_ex), ibv_resize_cq.
// An extended CQ is an ordinary vrnic CQ (ibv_poll_cq and the completion channel work on it
// too); the polling API moves one CQE at a time into Cq::polled, where the callbacks read it.
#include <time.h>

#include <cstddef>
#include <cstring>
#include <new>

#include "abi/objects.h"
#include "abi/ops.h"
#include "live/live_nic.h"

using namespace vrnic::abi;
using vrnic::engine::Device;

namespace {

// The device clock: CLOCK_MONOTONIC in ns (the live NIC's engine::Clock), so a completion
// timestamp is in ns and hca_core_clock is 1 GHz (query.cc reports it).
constexpr uint64_t kStandardWcFlags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM |
                                      IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP |
                                      IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |
                                      IBV_WC_EX_WITH_DLID_PATH_BITS;
// Every field rxe (the standard ones) or mlx5 (IBV_CREATE_CQ_SUP_WC_FLAGS: also timestamps,
// CVLAN, flow tag, tag matching) can report, in any combination. vrnic has no VLANs, flow
// steering or tag matching: those readers give what mlx5 reports for a CQE none of them
// touched (0).
constexpr uint64_t kSupportedWcFlags = kStandardWcFlags | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
                                       IBV_WC_EX_WITH_CVLAN | IBV_WC_EX_WITH_FLOW_TAG |
                                       IBV_WC_EX_WITH_TM_INFO |
                                       IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;

uint64_t clock_ns(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

Cq* cq_of(ibv_cq_ex* c) { return to_cq(c); }
const vrnic::engine::WorkCompletion& cur(ibv_cq_ex* c) { return to_cq(c)->polled; }

// Moves the next CQE into polled: 0, or ENOENT if the CQ is empty.
int fetch(ibv_cq_ex* c) {
  Cq* cq = cq_of(c);
  const int got = to_context(c->context)->nic->poll_cq(cq->cq, &cq->polled, 1);
  if (got != 1) return ENOENT;
  c->status = ibv_wc_status(cq->polled.status);
  c->wr_id = cq->polled.wr_id;
  return 0;
}

int start_poll(ibv_cq_ex* c, ibv_poll_cq_attr* attr) {
  if (attr && attr->comp_mask) return EINVAL;
  Cq* cq = cq_of(c);
  if (cq->poll_locks) cq->poll_mu.lock();
  const int err = fetch(c);
  // Empty: the program must not call ibv_end_poll, so release here.
  if (err && cq->poll_locks) cq->poll_mu.unlock();
  return err;
}

int next_poll(ibv_cq_ex* c) { return fetch(c); }

void end_poll(ibv_cq_ex* c) {
  Cq* cq = cq_of(c);
  if (cq->poll_locks) cq->poll_mu.unlock();
}

ibv_wc_opcode read_opcode(ibv_cq_ex* c) { return ibv_wc_opcode(cur(c).opcode); }
uint32_t read_vendor_err(ibv_cq_ex* c) { return cur(c).vendor_err; }
uint32_t read_byte_len(ibv_cq_ex* c) { return cur(c).byte_len; }
__be32 read_imm_data(ibv_cq_ex* c) { return cur(c).imm_data; }  // or the invalidated rkey
uint32_t read_qp_num(ibv_cq_ex* c) { return cur(c).qp_num; }
uint32_t read_src_qp(ibv_cq_ex* c) { return cur(c).src_qp; }
unsigned int read_wc_flags(ibv_cq_ex* c) { return cur(c).wc_flags; }
uint32_t read_slid(ibv_cq_ex* c) { return cur(c).slid; }
uint8_t read_sl(ibv_cq_ex* c) { return cur(c).sl; }
uint8_t read_dlid_path_bits(ibv_cq_ex* c) { return cur(c).dlid_path_bits; }
uint64_t read_completion_ts(ibv_cq_ex* c) { return cur(c).completion_ts_ns; }
uint16_t read_cvlan(ibv_cq_ex*) { return 0; }
uint32_t read_flow_tag(ibv_cq_ex*) { return 0; }
void read_tm_info(ibv_cq_ex*, ibv_wc_tm_info* info) { *info = ibv_wc_tm_info{}; }
// The device clock is CLOCK_MONOTONIC: shift by the current REALTIME - MONOTONIC offset.
uint64_t read_completion_wallclock_ns(ibv_cq_ex* c) {
  const uint64_t mono = clock_ns(CLOCK_MONOTONIC);
  const uint64_t real = clock_ns(CLOCK_REALTIME);
  return cur(c).completion_ts_ns + (real - mono);
}

}  // namespace

ibv_cq_ex* vrnic::abi::op_create_cq_ex(ibv_context* context, ibv_cq_init_attr_ex* attr) {
  // An unknown comp_mask bit or creation flag is EINVAL (as mlx5); a known request the device
  // cannot honour is EOPNOTSUPP: a completion field it cannot report (mlx5 and rxe), the
  // IGNORE_OVERRUN flag (rxe's kernel driver refuses creation flags so).
  if (attr->comp_mask & ~uint32_t(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD)) {
    return fail_null<ibv_cq_ex>(EINVAL);
  }
  bool single_threaded = false;
  if (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) {
    constexpr uint32_t kKnown =
        IBV_CREATE_CQ_ATTR_SINGLE_THREADED | IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
    if (attr->flags & ~kKnown) return fail_null<ibv_cq_ex>(EINVAL);
    // Overruns are always reported (CQ_ERR), so IGNORE_OVERRUN cannot be honoured.
    if (attr->flags & IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN) return fail_null<ibv_cq_ex>(EOPNOTSUPP);
    single_threaded = attr->flags & IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
  }
  if (attr->wc_flags & ~kSupportedWcFlags) return fail_null<ibv_cq_ex>(EOPNOTSUPP);
  // IBV_CQ_INIT_ATTR_MASK_PD names a parent domain of this context; none, or a plain PD,
  // is EINVAL (mlx5).
  ibv_pd* parent_domain = nullptr;
  if (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) {
    parent_domain = attr->parent_domain;
    if (!parent_domain || !to_pd(parent_domain)->base || parent_domain->context != context) {
      return fail_null<ibv_cq_ex>(EINVAL);
    }
  }
  if (attr->cqe > uint32_t(INT32_MAX)) return fail_null<ibv_cq_ex>(EINVAL);
  if (attr->comp_vector > uint32_t(INT32_MAX)) return fail_null<ibv_cq_ex>(EINVAL);
  ibv_cq* ibv = create_cq(context, int(attr->cqe), attr->cq_context, attr->channel,
                          int(attr->comp_vector), parent_domain);
  if (!ibv) return nullptr;  // errno set by create_cq
  Cq* cq = to_cq(ibv);
  cq->poll_locks = !single_threaded;
  ibv_cq_ex& ex = cq->ex;
  std::memset(reinterpret_cast<char*>(&ex) + offsetof(ibv_cq_ex, comp_mask), 0,
              sizeof(ibv_cq_ex) - offsetof(ibv_cq_ex, comp_mask));
  ex.start_poll = start_poll;
  ex.next_poll = next_poll;
  ex.end_poll = end_poll;
  ex.read_opcode = read_opcode;
  ex.read_vendor_err = read_vendor_err;
  ex.read_wc_flags = read_wc_flags;
  const uint64_t f = attr->wc_flags;
  if (f & IBV_WC_EX_WITH_BYTE_LEN) ex.read_byte_len = read_byte_len;
  if (f & IBV_WC_EX_WITH_IMM) ex.read_imm_data = read_imm_data;
  if (f & IBV_WC_EX_WITH_QP_NUM) ex.read_qp_num = read_qp_num;
  if (f & IBV_WC_EX_WITH_SRC_QP) ex.read_src_qp = read_src_qp;
  if (f & IBV_WC_EX_WITH_SLID) ex.read_slid = read_slid;
  if (f & IBV_WC_EX_WITH_SL) ex.read_sl = read_sl;
  if (f & IBV_WC_EX_WITH_DLID_PATH_BITS) ex.read_dlid_path_bits = read_dlid_path_bits;
  if (f & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP) ex.read_completion_ts = read_completion_ts;
  if (f & IBV_WC_EX_WITH_CVLAN) ex.read_cvlan = read_cvlan;
  if (f & IBV_WC_EX_WITH_FLOW_TAG) ex.read_flow_tag = read_flow_tag;
  if (f & IBV_WC_EX_WITH_TM_INFO) ex.read_tm_info = read_tm_info;
  if (f & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK) {
    ex.read_completion_wallclock_ns = read_completion_wallclock_ns;
  }
  return &ex;
}

// The raw device clock, in the units of completion timestamps (ns of CLOCK_MONOTONIC), laid
// out as mlx5_query_rt_values does: tv_sec 0, the whole counter in tv_nsec, so a program
// that takes tv_nsec as the cycle count (as it must for mlx5) compares it with completion
// timestamps directly; the ticks are ns since hca_core_clock is 1 GHz. comp_mask comes back
// as what was filled in.
int vrnic::abi::op_query_rt_values(ibv_context*, ibv_values_ex* values) {
  if (values->comp_mask & ~uint32_t(IBV_VALUES_MASK_RAW_CLOCK)) return EINVAL;
  if (values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) {
    values->raw_clock.tv_sec = 0;
    values->raw_clock.tv_nsec = long(clock_ns(CLOCK_MONOTONIC));
  }
  return 0;
}

VRNIC_EXPORT int ibv_resize_cq(ibv_cq* ibv, int cqe) {
  if (cqe <= 0) return EINVAL;
  Cq* cq = to_cq(ibv);
  uint32_t depth = uint32_t(cqe);
  vrnic::live::LiveNic* nic = to_context(ibv->context)->nic;
  if (depth > nic->locked([](Device& d) { return d.config().limits.max_cqe; })) return EINVAL;
  // A CQ whose ring came from its parent domain's allocator gets the new one from it too.
  CqRing ring;
  if (cq->ring.mem) {
    if (int err = alloc_cq_ring(cq->parent_domain, depth, ring)) return err;
  }
  const int err = nic->locked([&](Device& d) { return d.resize_cq(cq->cq, depth, ring.mem); });
  free_cq_ring(cq->parent_domain, err ? ring : cq->ring);  // the ring no longer in use
  if (err) return err;
  if (ring.mem) cq->ring = ring;
  pthread_mutex_lock(&ibv->mutex);
  ibv->cqe = int(depth);
  pthread_mutex_unlock(&ibv->mutex);
  return 0;
}
