// The rsocket I/O-map calls: riomap opens a buffer to the peer's riowrite (the peer learns
// its address and key in a message that follows the data sent before), riounmap closes it,
// riowrite RDMA-writes into the peer's window at an offset.
#include <rdma/rsocket.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "rdmacm/rsocket.h"
#include "rdmacm/state.h"

using namespace vrnic::rdmacm;
using namespace vrnic::rdmacm::rs;

namespace {

// Blocks (unless nonblocking) until a send slot (and for `credit`, a data credit) is free.
int wait_slot(Socket& s, std::unique_lock<std::mutex>& g, bool credit, bool dontwait) {
  for (;;) {
    if (s.state != State::kConnected) return ENOTCONN;
    if (s.peer_gone || s.wr_shut) return EPIPE;
    if (!s.free_tx.empty() && s.sq_used < kSqDepth && (!credit || s.credits > 0)) return 0;
    if (dontwait) return EAGAIN;
    s.cv.wait(g);
  }
}

}  // namespace

// The offset is the caller's (or, for -1, the end of the windows opened so far); only
// PROT_WRITE windows exist, as riowrite is the only I/O-map transfer.
RDMACM_EXPORT off_t riomap(int fd, void* buf, size_t len, int prot, int, off_t offset) {
  Ptr p = Runtime::get().find(fd);
  if (!p) return fail(EBADF);
  if (!buf || !len || prot != PROT_WRITE) return fail(EINVAL);
  Socket& s = *p;
  std::unique_lock<std::mutex> g(s.mu);
  if (int err = wait_slot(s, g, true, false)) return fail(err);
  if (offset == -1) {
    offset = 0;
    for (const IoMap& m : s.local_maps) offset = std::max<off_t>(offset, m.offset + m.len);
  }
  IoMap m{uint64_t(offset), reinterpret_cast<uintptr_t>(buf), len, 0, buf, nullptr};
  m.mr = ibv_reg_mr(Service::get().default_pd(), buf, len,
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!m.mr) return -1;
  m.rkey = m.mr->rkey;
  const uint32_t slot = s.free_tx.back();
  IoMap wire = m;
  wire.local = nullptr;
  wire.mr = nullptr;
  std::memcpy(s.tx_buf + size_t(slot) * kSlotSize, &wire, sizeof wire);
  s.free_tx.pop_back();
  if (int err = post_msg(s, Msg::kIomap, slot, sizeof wire)) {
    s.free_tx.push_back(slot);
    ibv_dereg_mr(m.mr);
    return fail(err);
  }
  --s.credits;
  s.local_maps.push_back(m);
  return offset;
}

RDMACM_EXPORT int riounmap(int fd, void* buf, size_t len) {
  Ptr p = Runtime::get().find(fd);
  if (!p) return fail(EBADF);
  std::lock_guard<std::mutex> g(p->mu);
  for (auto it = p->local_maps.begin(); it != p->local_maps.end(); ++it) {
    if (it->local == buf && it->len == len) {
      ibv_dereg_mr(it->mr);
      p->local_maps.erase(it);
      return 0;
    }
  }
  return fail(EINVAL);
}

// Writes up to one slot's worth into the peer's window holding `offset`; returns the count.
RDMACM_EXPORT size_t riowrite(int fd, const void* buf, size_t count, off_t offset, int flags) {
  Ptr p = Runtime::get().find(fd);
  if (!p) return static_cast<size_t>(fail(EBADF));
  Socket& s = *p;
  std::unique_lock<std::mutex> g(s.mu);
  const IoMap* win = nullptr;
  for (const IoMap& m : s.remote_maps) {
    if (uint64_t(offset) >= m.offset && uint64_t(offset) < m.offset + m.len) win = &m;
  }
  if (!win) return static_cast<size_t>(fail(EINVAL));
  const bool dontwait = s.nonblock || (flags & MSG_DONTWAIT);
  if (int err = wait_slot(s, g, false, dontwait)) return static_cast<size_t>(fail(err));
  const auto n = static_cast<uint32_t>(
      std::min<uint64_t>({count, kSlotSize, win->offset + win->len - uint64_t(offset)}));
  const uint32_t slot = s.free_tx.back();
  std::memcpy(s.tx_buf + size_t(slot) * kSlotSize, buf, n);
  ibv_sge sge{reinterpret_cast<uintptr_t>(s.tx_buf + size_t(slot) * kSlotSize), n,
              s.tx_mr->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = (1ull << 32) | slot;  // completes like a data message: the slot is freed
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.wr.rdma.remote_addr = win->addr + (uint64_t(offset) - win->offset);
  wr.wr.rdma.rkey = win->rkey;
  if (ibv_post_send(s.id->qp, &wr, &bad)) return static_cast<size_t>(fail(errno ? errno : EIO));
  s.free_tx.pop_back();
  ++s.sq_used;
  return n;
}
