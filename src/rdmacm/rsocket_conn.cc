// A stream rsocket's connection: its buffers, CQ and QP, the connection data of the CM
// exchange, and the datapath underneath the socket calls: posting writes, taking
// completions, credit updates, control messages and keepalives (rdma-core v44's protocol).
#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "rdmacm/rsocket.h"
#include "rdmacm/state.h"

namespace vrnic::rdmacm::rs {
namespace {

constexpr uint64_t kWrRecv = 1ull << 62;
constexpr uint64_t kWrRing = 1;  // data, I/O map announcements, riowrite: a send-ring piece
constexpr uint64_t kWrCtrl = 2;  // credit updates, control messages, keepalives

size_t table_size(uint32_t iomap_entries) {
  return kTargetSgeCount * kSgeSize + size_t(iomap_entries) * kIomapEntrySize;
}

// A completion that failed: the connection is gone (a flush only follows an error or a
// disconnect that was seen already).
void on_wc_error(Socket& s, const ibv_wc& wc) {
  if (wc.status == IBV_WC_WR_FLUSH_ERR) return;
  if (!s.conn_error) s.conn_error = ECONNRESET;
  s.peer_fin = true;
  s.state = State::kError;
}

// A receive holds no buffer (the peer writes into the receive ring); one per message.
void post_recv(Socket& s) {
  ibv_recv_wr wr{}, *bad = nullptr;
  wr.wr_id = kWrRecv;
  ibv_post_recv(s.id->qp, &wr, &bad);
}

void on_recv(Socket& s, const ibv_wc& wc) {
  post_recv(s);
  if (!(wc.wc_flags & IBV_WC_WITH_IMM)) return;  // a SEND is no message of the protocol
  switch (s.flow->on_imm(ntohl(wc.imm_data))) {
    case Rx::kDisconnect:
      s.peer_gone = true;
      s.peer_fin = true;
      break;
    case Rx::kShutdown:  // with this side's writing done too, the connection is over
      s.peer_fin = true;
      s.peer_gone = s.peer_gone || s.wr_shut;
      break;
    case Rx::kBad:  // longer than the receive ring: the peer does not follow the protocol
      if (!s.conn_error) s.conn_error = EPROTO;
      s.peer_fin = true;
      s.state = State::kError;
      break;
    default: break;
  }
}

int clamp_queue(int want, uint32_t max_wr) {
  return std::clamp<int>(want, kMinQueue, std::min<int>(kMaxQueue, int(max_wr) - kCtrlWindow));
}

int setup_buffers(Socket& s) {
  ibv_pd* pd = Service::get().default_pd();
  s.rbuf_size = std::max<uint32_t>(uint32_t(s.sizes.rcvbuf), 2 * kSendLowWater) & ~63u;
  s.sbuf_size = std::max<uint32_t>(uint32_t(s.sizes.sndbuf), 2 * kSendLowWater);
  const size_t tsize = table_size(uint32_t(s.sizes.iomapsize));
  s.rbuf = alloc_pages(s.rbuf_size);
  s.table = alloc_pages(tsize);
  s.tx_buf = alloc_pages(s.sbuf_size + kCtrlWindow * kSgeSize);
  if (!s.rbuf || !s.table || !s.tx_buf) return ENOMEM;
  const int remote = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  s.rbuf_mr = ibv_reg_mr(pd, s.rbuf, s.rbuf_size, remote);
  s.table_mr = ibv_reg_mr(pd, s.table, tsize, remote);
  s.tx_mr = ibv_reg_mr(pd, s.tx_buf, s.sbuf_size + kCtrlWindow * kSgeSize, IBV_ACCESS_LOCAL_WRITE);
  if (!s.rbuf_mr || !s.table_mr || !s.tx_mr) return errno ? errno : ENOMEM;
  return 0;
}

// Shutdown and disconnect are RDMA WRITEs WITH IMMEDIATE of no data; a keepalive is a bare
// RDMA WRITE of no data (the peer sees no completion; its NIC acknowledges it).
int send_ctrl(Socket& s, Ctrl c) {  // EAGAIN while the control window is full
  if (!s.flow->ctrl_avail() || s.sq_used >= uint32_t(s.sizes.sqsize)) return EAGAIN;
  const Write w = s.flow->ctrl(c);
  return post_write(s, w, {}, c != Ctrl::kKeepalive, true);
}

}  // namespace

uint8_t* alloc_pages(size_t len) {
  void* p = nullptr;
  if (posix_memalign(&p, 4096, (len + 4095) & ~size_t(4095))) return nullptr;
  std::memset(p, 0, len);
  return static_cast<uint8_t*>(p);
}

int setup_cq(Socket& s, ibv_context* ctx, int entries) {
  s.comp = ibv_create_comp_channel(ctx);
  if (!s.comp) return errno ? errno : ENOMEM;
  s.cq = ibv_create_cq(ctx, entries, serial_ctx(s.serial), s.comp, 0);
  return s.cq ? 0 : errno;
}

// As rdma-core sizes them: queues of 16 .. 0xfffe (and what the device takes), an I/O map
// table of a size its scale can carry.
int setup_conn(Socket& s) {
  ibv_device_attr da{};
  ibv_query_device(s.id->verbs, &da);
  s.sizes.sqsize = clamp_queue(s.sizes.sqsize, uint32_t(da.max_qp_wr));
  s.sizes.rqsize = clamp_queue(s.sizes.rqsize, uint32_t(da.max_qp_wr));
  s.sizes.iomapsize = int(iomap_size_of(iomap_scale_of(uint32_t(s.sizes.iomapsize))));
  if (int err = setup_buffers(s)) return err;
  const auto rq = uint32_t(s.sizes.rqsize) + kCtrlWindow;  // the peer's control messages too
  if (int err = setup_cq(s, s.id->verbs, s.sizes.sqsize + int(rq))) return err;
  ibv_qp_init_attr qa{};
  qa.send_cq = qa.recv_cq = s.cq;
  qa.qp_type = IBV_QPT_RC;
  qa.sq_sig_all = 1;
  qa.cap.max_send_wr = uint32_t(s.sizes.sqsize);
  qa.cap.max_recv_wr = rq;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  if (rdma_create_qp(s.id, Service::get().default_pd(), &qa)) return errno;
  for (uint32_t i = 0; i < rq; ++i) post_recv(s);
  StreamFlow::Local l;
  l.rbuf_addr = reinterpret_cast<uintptr_t>(s.rbuf);
  l.rbuf_rkey = s.rbuf_mr->rkey;
  l.rbuf_size = s.rbuf_size;
  l.table_addr = reinterpret_cast<uintptr_t>(s.table);
  l.table_rkey = s.table_mr->rkey;
  l.iomap_entries = uint32_t(s.sizes.iomapsize);
  l.rq_size = uint16_t(s.sizes.rqsize);
  s.flow = std::make_unique<StreamFlow>(l, s.table);
  s.ring = std::make_unique<SendRing>(s.sbuf_size);
  ibv_req_notify_cq(s.cq, 0);
  s.armed = true;
  return 0;
}

std::array<uint8_t, kConnDataSize> conn_data_of(const Socket& s) {
  std::array<uint8_t, kConnDataSize> out;
  encode_conn_data(s.flow->conn_data(), out.data());
  return out;
}

bool start_conn(Socket& s, std::span<const uint8_t> peer_data) {
  const auto c = decode_conn_data(peer_data);
  return c && s.flow->start(*c);
}

// What rdma-core's rconnect offers: flow control, retries and RNR retries without end (a
// control message may meet a receive not yet posted again), no RDMA READ resources.
void conn_param(rdma_conn_param& p, const uint8_t* private_data) {
  p = {};
  p.private_data = private_data;
  p.private_data_len = kConnDataSize;
  p.flow_control = 1;
  p.retry_count = 7;
  p.rnr_retry_count = 7;
}

int post_write(Socket& s, const Write& w, Chunk c, bool imm, bool ctrl) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(s.tx_buf + c.offset), c.length, s.tx_mr->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = ctrl ? kWrCtrl : kWrRing;
  wr.opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  wr.imm_data = htonl(w.imm);
  wr.send_flags = IBV_SEND_SIGNALED;
  if (c.length) {
    wr.sg_list = &sge;
    wr.num_sge = 1;
  }
  wr.wr.rdma.remote_addr = w.remote_addr;
  wr.wr.rdma.rkey = w.rkey;
  if (ibv_post_send(s.id->qp, &wr, &bad)) return errno ? errno : EIO;
  ++s.sq_used;
  return 0;
}

// Room for a data message: a credit, a window, a send-queue entry (the control window's are
// kept apart) and buffer.
bool can_send(const Socket& s) {
  return s.flow && s.flow->can_send() && s.sq_used + kCtrlWindow < uint32_t(s.sizes.sqsize) &&
         s.ring->place(kSendLowWater, kSendLowWater).length != 0;
}

// Nothing follows a DISCONNECT: rdma-core's receiver stops taking messages at it.
void pump(Socket& s) {
  if (!s.flow || s.closed) return;
  const bool live = s.state == State::kConnected && !s.peer_gone && !s.disconnect_sent;
  while (s.sq_used < uint32_t(s.sizes.sqsize)) {
    auto g = s.flow->grant(live);
    if (!g) return;
    Chunk c;
    if (g->with_sge) {  // at most kCtrlWindow in flight, completed in order: slots in turn
      static_assert((kCtrlWindow & (kCtrlWindow - 1)) == 0);
      c = {s.sbuf_size + (s.flow->ctrl_posted() % kCtrlWindow) * uint32_t(kSgeSize),
           uint32_t(kSgeSize)};
      std::memcpy(s.tx_buf + c.offset, g->bytes.data(), kSgeSize);
    }
    if (post_write(s, g->write, c, true, true)) return;
  }
}

// As rdma-core's rshutdown: SHUTDOWN once this side stops writing but still reads, DISCONNECT
// once it does neither (reading ends with SHUT_RD or the peer's SHUTDOWN), nothing after the
// peer's DISCONNECT.
int send_close_ctrl(Socket& s) {
  if (!s.flow || s.state != State::kConnected || s.peer_gone || s.disconnect_sent || !s.wr_shut) {
    return 0;
  }
  const bool readable = !s.rd_shut && !s.peer_fin;
  if (readable && s.shutdown_sent) return 0;
  if (int err = send_ctrl(s, readable ? Ctrl::kShutdown : Ctrl::kDisconnect)) return err;
  (readable ? s.shutdown_sent : s.disconnect_sent) = true;
  return 0;
}

void keepalive_due(Socket& s, Clock::time_point now) {
  if (!s.keepalive || !s.flow || s.closed || now < s.next_keepalive) return;
  if (s.state == State::kConnected && !s.peer_gone && !s.disconnect_sent) {
    send_ctrl(s, Ctrl::kKeepalive);
  }
  s.next_keepalive = now + std::chrono::seconds(s.keepidle);
}

// Nothing is taken before the peer's connection data (an active socket's completions wait
// in the CQ for the REP's, which ESTABLISHED brings).
void poll_cq(Socket& s) {
  if (s.closed || !s.cq || !s.flow || !s.flow->started()) return;
  ibv_wc wcs[32];
  int n;
  while ((n = ibv_poll_cq(s.cq, 32, wcs)) > 0) {
    for (int i = 0; i < n; ++i) {
      const ibv_wc& wc = wcs[i];
      if (wc.wr_id == kWrRecv) {  // (a failed completion's opcode is undefined)
        if (wc.status == IBV_WC_SUCCESS) {
          on_recv(s, wc);
        } else {
          on_wc_error(s, wc);
        }
        continue;
      }
      --s.sq_used;
      if (wc.wr_id == kWrRing) {
        s.ring->release_oldest();
      } else {
        s.flow->ctrl_completed();
      }
      if (wc.status != IBV_WC_SUCCESS) on_wc_error(s, wc);
    }
  }
  pump(s);
}

void teardown(Socket& s) {
  dgram_teardown(s);
  for (Pending& p : s.pending) {
    rdma_reject(p.id, nullptr, 0);
    rdma_destroy_id(p.id);
  }
  s.pending.clear();
  for (LocalMap& m : s.maps) ibv_dereg_mr(m.mr);
  s.maps.clear();
  if (s.id && s.id->qp) rdma_destroy_qp(s.id);
  if (s.id) rdma_destroy_id(s.id);
  s.id = nullptr;
  if (s.cq) ibv_destroy_cq(s.cq);
  if (s.comp) ibv_destroy_comp_channel(s.comp);
  for (ibv_mr* mr : {s.rbuf_mr, s.tx_mr, s.table_mr}) {
    if (mr) ibv_dereg_mr(mr);
  }
  free(s.rbuf);
  free(s.tx_buf);
  free(s.table);
  s.cq = nullptr;
  s.comp = nullptr;
  s.rbuf_mr = s.tx_mr = s.table_mr = nullptr;
  s.rbuf = s.tx_buf = s.table = nullptr;
  s.flow.reset();
  s.ring.reset();
}

}  // namespace vrnic::rdmacm::rs
