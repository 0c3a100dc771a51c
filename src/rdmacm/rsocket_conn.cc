// An rsocket's connection resources (CQ, QP, slot buffers) and its datapath underneath the
// socket calls: posting messages, reposting slots, credits, and taking completions.
#include <arpa/inet.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "rdmacm/rsocket.h"
#include "rdmacm/state.h"

namespace vrnic::rdmacm::rs {
namespace {

constexpr uint64_t kTxData = 1ull << 32;
constexpr uint64_t kTxCtrl = 2ull << 32;

uint8_t* slots(uint32_t n, size_t slot_size) {
  void* p = nullptr;
  return posix_memalign(&p, 4096, n * slot_size) == 0 ? static_cast<uint8_t*>(p) : nullptr;
}

// A completion that failed: the connection is gone (a flush only follows an error or a
// disconnect that was seen already).
void on_wc_error(Socket& s, const ibv_wc& wc) {
  if (wc.status == IBV_WC_WR_FLUSH_ERR) return;
  if (!s.conn_error) s.conn_error = ECONNRESET;
  s.peer_fin = true;
  s.state = State::kError;
}

void on_recv(Socket& s, const ibv_wc& wc) {
  const uint32_t slot = static_cast<uint32_t>(wc.wr_id);
  const uint32_t imm = (wc.wc_flags & IBV_WC_WITH_IMM) ? ntohl(wc.imm_data) : 0;
  s.credits += imm & 0xffff;
  switch (static_cast<Msg>(imm >> 24)) {
    case Msg::kData:
      if (wc.byte_len > 0) {
        s.rx.push_back({slot, wc.byte_len, 0});
        return;
      }
      break;
    case Msg::kFin:
      s.peer_fin = true;
      break;
    case Msg::kCredit:
      break;
    case Msg::kIomap:
      if (wc.byte_len >= sizeof(IoMap)) {
        IoMap m;
        std::memcpy(&m, s.rx_buf + size_t(slot) * kSlotSize, sizeof m);
        m.local = nullptr;
        m.mr = nullptr;
        s.remote_maps.push_back(m);
      }
      repost_slot(s, slot, true);  // it took a data credit
      return;
  }
  repost_slot(s, slot, false);
}

}  // namespace

void conn_param(rdma_conn_param& p) {
  p = {};
  p.responder_resources = 1;
  p.initiator_depth = 1;
  p.retry_count = 7;
  p.rnr_retry_count = 7;  // infinite: a slot not yet reposted only delays a message
}

int setup_rings(Socket& s, ibv_context* ctx, uint32_t rx_slots, uint32_t tx_slots,
                size_t slot_size, int cq_entries) {
  ibv_pd* pd = Service::get().default_pd();
  s.rx_buf = slots(rx_slots, slot_size);
  s.tx_buf = slots(tx_slots, slot_size);
  if (!s.rx_buf || !s.tx_buf) return ENOMEM;
  s.rx_mr = ibv_reg_mr(pd, s.rx_buf, rx_slots * slot_size, IBV_ACCESS_LOCAL_WRITE);
  s.tx_mr = ibv_reg_mr(pd, s.tx_buf, tx_slots * slot_size, 0);
  s.comp = ibv_create_comp_channel(ctx);
  if (!s.rx_mr || !s.tx_mr || !s.comp) return errno ? errno : ENOMEM;
  s.cq = ibv_create_cq(ctx, cq_entries, serial_ctx(s.serial), s.comp, 0);
  return s.cq ? 0 : errno;
}

ibv_qp_init_attr ring_qp_attr(const Socket& s, ibv_qp_type type, uint32_t send_wr,
                              uint32_t recv_wr) {
  ibv_qp_init_attr qa{};
  qa.send_cq = qa.recv_cq = s.cq;
  qa.qp_type = type;
  qa.sq_sig_all = 1;
  qa.cap.max_send_wr = send_wr;
  qa.cap.max_recv_wr = recv_wr;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  return qa;
}

int setup_conn(Socket& s) {
  ibv_pd* pd = Service::get().default_pd();
  if (int err = setup_rings(s, s.id->verbs, kRxSlots, kTxSlots, kSlotSize, kRxSlots + kSqDepth))
    return err;
  ibv_qp_init_attr qa = ring_qp_attr(s, IBV_QPT_RC, kSqDepth, kRxSlots);
  if (rdma_create_qp(s.id, pd, &qa)) return errno;
  for (uint32_t i = 0; i < kRxSlots; ++i) repost_slot(s, i, false);
  for (uint32_t i = kTxSlots; i > 0; --i) s.free_tx.push_back(i - 1);
  s.credits = kCredits;
  ibv_req_notify_cq(s.cq, 0);
  return 0;
}

void repost_slot(Socket& s, uint32_t slot, bool data) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(s.rx_buf + size_t(slot) * kSlotSize), kSlotSize,
              s.rx_mr->lkey};
  ibv_recv_wr wr{}, *bad = nullptr;
  wr.wr_id = slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  if (ibv_post_recv(s.id->qp, &wr, &bad) == 0 && data) ++s.unreported;
}

// Posts one message; a data message is tx slot `slot` with `len` bytes. Carries the grant.
int post_msg(Socket& s, Msg m, uint32_t slot, uint32_t len) {
  if (s.sq_used >= kSqDepth) return EAGAIN;
  ibv_sge sge{};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.imm_data = htonl(imm_of(m, s.unreported));
  wr.send_flags = IBV_SEND_SIGNALED;
  if (m == Msg::kData || m == Msg::kIomap) {
    sge = {reinterpret_cast<uintptr_t>(s.tx_buf + size_t(slot) * kSlotSize), len, s.tx_mr->lkey};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr_id = kTxData | slot;
  } else {
    wr.wr_id = kTxCtrl;
  }
  if (ibv_post_send(s.id->qp, &wr, &bad)) return errno ? errno : EIO;
  ++s.sq_used;
  s.unreported = 0;
  return 0;
}

void send_grant_if_due(Socket& s) {
  if (s.unreported >= kGrantThreshold && s.state == State::kConnected && !s.peer_gone) {
    post_msg(s, Msg::kCredit, 0, 0);
  }
}

void poll_cq(Socket& s) {
  if (s.closed || !s.cq) return;
  ibv_wc wcs[32];
  int n;
  while ((n = ibv_poll_cq(s.cq, 32, wcs)) > 0) {
    for (int i = 0; i < n; ++i) {
      const ibv_wc& wc = wcs[i];
      if (wc.opcode & IBV_WC_RECV) {
        if (wc.status == IBV_WC_SUCCESS) {
          on_recv(s, wc);
        } else {
          on_wc_error(s, wc);
        }
        continue;
      }
      --s.sq_used;
      if ((wc.wr_id & ~0xffffffffull) == kTxData) {
        s.free_tx.push_back(static_cast<uint32_t>(wc.wr_id));
      }
      if (wc.status != IBV_WC_SUCCESS) on_wc_error(s, wc);
    }
  }
  send_grant_if_due(s);
}

void teardown(Socket& s) {
  dgram_teardown(s);
  for (rdma_cm_id* id : s.pending) {
    rdma_reject(id, nullptr, 0);
    rdma_destroy_id(id);
  }
  s.pending.clear();
  for (IoMap& m : s.local_maps) ibv_dereg_mr(m.mr);
  s.local_maps.clear();
  if (s.id && s.id->qp) rdma_destroy_qp(s.id);
  if (s.id) rdma_destroy_id(s.id);
  s.id = nullptr;
  if (s.cq) ibv_destroy_cq(s.cq);
  if (s.comp) ibv_destroy_comp_channel(s.comp);
  if (s.rx_mr) ibv_dereg_mr(s.rx_mr);
  if (s.tx_mr) ibv_dereg_mr(s.tx_mr);
  free(s.rx_buf);
  free(s.tx_buf);
  s.cq = nullptr;
  s.comp = nullptr;
  s.rx_mr = s.tx_mr = nullptr;
  s.rx_buf = s.tx_buf = nullptr;
}

}  // namespace vrnic::rdmacm::rs
