// A stream rsocket peer for tests, built by hand from rdma-core v44's rsocket.c with plain
// verbs and rdma_cm calls: it reads and writes the protocol's bytes itself (connection data,
// immediates, SGL and I/O map entries), so a test sees exactly what vrnic's rsocket sends and
// gives it exactly what rdma-core's would.
#pragma once
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <rdma/rdma_cma.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

namespace vrnic::rdmacm::rs::test {

// The device's address, as the CM binds an id to it (no packet leaves).
inline sockaddr_in device_addr(uint16_t port) {
  rdma_cm_id* id = nullptr;
  sockaddr_in out{};
  if (rdma_create_id(nullptr, &id, nullptr, RDMA_PS_TCP)) return out;
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 1000) == 0) {
    std::memcpy(&out, rdma_get_local_addr(id), sizeof out);
  }
  rdma_destroy_id(id);
  out.sin_port = htons(port);
  return out;
}

// Registered memory of the peer: its receive buffer, its target table (two SGL entries, then
// I/O map entries), a buffer it writes from, and a window it maps for riowrite.
struct PeerMemory {
  static constexpr size_t kRbuf = 8192, kTable = 32 + 2 * 24, kSend = 65536, kWindow = 4096;
  uint8_t* rbuf = alloc(kRbuf);
  uint8_t* table = alloc(kTable);
  uint8_t* send = alloc(kSend);
  uint8_t* window = alloc(kWindow);
  ibv_mr *rbuf_mr = nullptr, *table_mr = nullptr, *send_mr = nullptr, *window_mr = nullptr;

  static uint8_t* alloc(size_t n) {
    void* p = nullptr;
    if (posix_memalign(&p, 4096, n)) return nullptr;
    std::memset(p, 0, n);
    return static_cast<uint8_t*>(p);
  }
  void reg(ibv_pd* pd) {
    const int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    rbuf_mr = ibv_reg_mr(pd, rbuf, kRbuf, rw);
    table_mr = ibv_reg_mr(pd, table, kTable, rw);
    send_mr = ibv_reg_mr(pd, send, kSend, IBV_ACCESS_LOCAL_WRITE);
    window_mr = ibv_reg_mr(pd, window, kWindow, rw);
  }
  ~PeerMemory() {
    for (ibv_mr* mr : {rbuf_mr, table_mr, send_mr, window_mr}) {
      if (mr) ibv_dereg_mr(mr);
    }
    for (uint8_t* p : {rbuf, table, send, window}) free(p);
  }
};

inline void put_be(uint8_t* p, uint64_t v, int n) {
  for (int i = n - 1; i >= 0; --i, v >>= 8) p[i] = static_cast<uint8_t>(v);
}
inline uint64_t get_be(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = v << 8 | p[i];
  return v;
}
inline uint64_t get_le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = v << 8 | p[i];
  return v;
}
inline void put_le(uint8_t* p, uint64_t v, int n) {
  for (int i = 0; i < n; ++i, v >>= 8) p[i] = static_cast<uint8_t>(v);
}

// struct rs_conn_data as rdma-core lays it out: version, flags, credits (be16), 3 reserved,
// target_iomap_size, target_sgl {addr be64, key be32, length be32}, data_buf {…}.
inline std::vector<uint8_t> conn_data(uint8_t version, uint8_t flags, uint16_t credits,
                                      uint8_t iomap, uint64_t sgl_addr, uint32_t sgl_key,
                                      uint32_t sgl_len, uint64_t buf_addr, uint32_t buf_key,
                                      uint32_t buf_len) {
  std::vector<uint8_t> b(40, 0);
  b[0] = version;
  b[1] = flags;
  put_be(&b[2], credits, 2);
  b[7] = iomap;
  put_be(&b[8], sgl_addr, 8);
  put_be(&b[16], sgl_key, 4);
  put_be(&b[20], sgl_len, 4);
  put_be(&b[24], buf_addr, 8);
  put_be(&b[32], buf_key, 4);
  put_be(&b[36], buf_len, 4);
  return b;
}

// The connection data fields as read back from bytes.
struct ConnFields {
  uint8_t version, flags, iomap;
  uint16_t credits;
  uint64_t sgl_addr, buf_addr;
  uint32_t sgl_key, sgl_len, buf_key, buf_len;
  bool reserved_zero;
};
inline ConnFields fields_of(const uint8_t* b) {
  return {b[0], b[1], b[7], uint16_t(get_be(&b[2], 2)), get_be(&b[8], 8), get_be(&b[24], 8),
          uint32_t(get_be(&b[16], 4)), uint32_t(get_be(&b[20], 4)),
          uint32_t(get_be(&b[32], 4)), uint32_t(get_be(&b[36], 4)),
          b[4] == 0 && b[5] == 0 && b[6] == 0};
}

class StreamPeer {
 public:
  StreamPeer() { ch_ = rdma_create_event_channel(); }
  ~StreamPeer() {
    if (id_ && id_->qp) rdma_destroy_qp(id_);
    if (cq_) ibv_destroy_cq(cq_);
    mem_.reset();
    if (pd_) ibv_dealloc_pd(pd_);
    if (id_) rdma_destroy_id(id_);
    if (listen_) rdma_destroy_id(listen_);
    if (ch_) rdma_destroy_event_channel(ch_);
  }
  PeerMemory& mem() { return *mem_; }
  rdma_cm_id* id() { return id_; }

  bool listen(const sockaddr_in& at) {
    return !rdma_create_id(ch_, &listen_, nullptr, RDMA_PS_TCP) &&
           !rdma_bind_addr(listen_, reinterpret_cast<sockaddr*>(const_cast<sockaddr_in*>(&at))) &&
           !rdma_listen(listen_, 4);
  }
  // The next event of the type wanted (others are acknowledged and skipped); its private data.
  std::optional<std::vector<uint8_t>> wait(rdma_cm_event_type want, int ms = 5000) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    pollfd p{ch_->fd, POLLIN, 0};
    while (std::chrono::steady_clock::now() < end) {
      if (poll(&p, 1, 50) <= 0) continue;
      rdma_cm_event* ev = nullptr;
      if (rdma_get_cm_event(ch_, &ev)) continue;
      const auto* pd = static_cast<const uint8_t*>(ev->param.conn.private_data);
      std::vector<uint8_t> data(pd, pd ? pd + ev->param.conn.private_data_len : pd);
      const bool hit = ev->event == want;
      if (hit && want == RDMA_CM_EVENT_CONNECT_REQUEST) id_ = ev->id;
      last_event_ = ev->event;
      rdma_ack_cm_event(ev);
      if (hit) return data;
    }
    return std::nullopt;
  }
  rdma_cm_event_type last_event() const { return last_event_; }

  // The QP on the id with receives that hold no buffer, as rdma-core posts them.
  bool make_qp(int recvs = 64) {
    pd_ = ibv_alloc_pd(id_->verbs);
    cq_ = ibv_create_cq(id_->verbs, 256, nullptr, nullptr, 0);
    if (!pd_ || !cq_) return false;
    mem_ = std::make_unique<PeerMemory>();
    mem_->reg(pd_);
    ibv_qp_init_attr qa{};
    qa.send_cq = qa.recv_cq = cq_;
    qa.qp_type = IBV_QPT_RC;
    qa.sq_sig_all = 1;
    qa.cap.max_send_wr = 64;
    qa.cap.max_recv_wr = uint32_t(recvs);
    qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
    if (rdma_create_qp(id_, pd_, &qa)) return false;
    for (int i = 0; i < recvs; ++i) {
      ibv_recv_wr wr{}, *bad = nullptr;
      if (ibv_post_recv(id_->qp, &wr, &bad)) return false;
    }
    return true;
  }
  // This peer's connection data: its table, the first half of its buffer, `credits`.
  std::vector<uint8_t> my_conn_data(uint16_t credits, uint8_t version = 1) {
    return conn_data(version, 0x02, credits, 2, uintptr_t(mem_->table), mem_->table_mr->rkey, 2,
                     uintptr_t(mem_->rbuf), mem_->rbuf_mr->rkey, PeerMemory::kRbuf / 2);
  }
  static rdma_conn_param param(const std::vector<uint8_t>& data) {
    rdma_conn_param p{};
    p.private_data = data.data();
    p.private_data_len = uint8_t(data.size());
    p.flow_control = 1;
    p.retry_count = 7;
    p.rnr_retry_count = 7;
    return p;
  }
  bool accept(const std::vector<uint8_t>& data) {
    rdma_conn_param p = param(data);
    return !rdma_accept(id_, &p);
  }
  // Active side: address, route, QP, then the REQ with `data` (built after the QP when
  // empty: this peer's own).
  bool connect(const sockaddr_in& to, uint16_t credits, uint8_t version = 1) {
    if (rdma_create_id(ch_, &id_, nullptr, RDMA_PS_TCP) ||
        rdma_resolve_addr(id_, nullptr, reinterpret_cast<sockaddr*>(const_cast<sockaddr_in*>(&to)),
                          2000) ||
        !wait(RDMA_CM_EVENT_ADDR_RESOLVED) || rdma_resolve_route(id_, 2000) ||
        !wait(RDMA_CM_EVENT_ROUTE_RESOLVED) || !make_qp()) {
      return false;
    }
    req_ = my_conn_data(credits, version);
    rdma_conn_param p = param(req_);
    return !rdma_connect(id_, &p);
  }

  // The next completion (5 s at most).
  std::optional<ibv_wc> completion(int ms = 5000) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    ibv_wc wc{};
    while (std::chrono::steady_clock::now() < end) {
      if (ibv_poll_cq(cq_, 1, &wc) == 1) return wc;
      std::this_thread::yield();
    }
    return std::nullopt;
  }
  // The next receive completion, with its immediate in host order (send completions skipped).
  std::optional<uint32_t> next_imm(ibv_wc* out = nullptr, int ms = 5000) {
    for (;;) {
      std::optional<ibv_wc> wc;
      if (!pending_.empty()) {
        wc = pending_.front();
        pending_.erase(pending_.begin());
      } else {
        wc = completion(ms);
      }
      if (!wc) return std::nullopt;
      if (!(wc->opcode & IBV_WC_RECV)) continue;
      ibv_recv_wr wr{}, *bad = nullptr;
      ibv_post_recv(id_->qp, &wr, &bad);  // as rdma-core: a receive back for each
      if (out) *out = *wc;
      return ntohl(wc->imm_data);
    }
  }
  // An RDMA WRITE (WITH IMMEDIATE if `imm`) of `bytes` from the send buffer; waits for it.
  bool write(uint64_t addr, uint32_t rkey, const std::vector<uint8_t>& bytes,
             std::optional<uint32_t> imm) {
    if (!bytes.empty()) std::memcpy(mem_->send, bytes.data(), bytes.size());
    ibv_sge sge{uintptr_t(mem_->send), uint32_t(bytes.size()), mem_->send_mr->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    wr.imm_data = imm ? htonl(*imm) : 0;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (!bytes.empty()) {
      wr.sg_list = &sge;
      wr.num_sge = 1;
    }
    wr.wr.rdma.remote_addr = addr;
    wr.wr.rdma.rkey = rkey;
    if (ibv_post_send(id_->qp, &wr, &bad)) return false;
    for (;;) {
      auto wc = completion();
      if (!wc) return false;
      if (!(wc->opcode & IBV_WC_RECV)) return wc->status == IBV_WC_SUCCESS;
      pending_.push_back(*wc);  // a receive that came meanwhile is not lost
    }
  }

 private:
  std::vector<ibv_wc> pending_;
  rdma_event_channel* ch_ = nullptr;
  rdma_cm_id* listen_ = nullptr;
  rdma_cm_id* id_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  std::unique_ptr<PeerMemory> mem_;
  std::vector<uint8_t> req_;
  rdma_cm_event_type last_event_ = RDMA_CM_EVENT_ADDR_ERROR;
};

}  // namespace vrnic::rdmacm::rs::test
