// The rsocket I/O-map calls: riomap opens a buffer to the peer's riowrite (its address and
// key go into an entry of the peer's I/O map table before any data sent after), riounmap
// closes it, riowrite RDMA-writes into the peer's window at an offset.
#include <rdma/rsocket.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "rdmacm/rsocket.h"
#include "rdmacm/state.h"

using namespace vrnic::rdmacm;
using namespace vrnic::rdmacm::rs;

namespace vrnic::rdmacm::rs {

// Each announcement is an RDMA WRITE WITH IMMEDIATE of the 24-byte entry into the peer's
// table, and takes a message credit as a data message does.
int announce_maps(Socket& s) {
  for (LocalMap& m : s.maps) {
    if (m.index < 0 || m.announced) continue;
    if (!can_send(s)) return EAGAIN;
    const Chunk c = s.ring->take(uint32_t(kIomapEntrySize), uint32_t(kIomapEntrySize));
    if (c.length == 0) return EAGAIN;
    const IomapEntry e{m.offset, {reinterpret_cast<uintptr_t>(m.buf), m.mr->rkey, uint32_t(m.len)}};
    const Write w = s.flow->iomap(uint32_t(m.index), e, s.tx_buf + c.offset);
    if (int err = post_write(s, w, c, true, false)) return err;
    m.announced = true;
  }
  return 0;
}

}  // namespace vrnic::rdmacm::rs

namespace {

// The first entry of the peer's table no mapping holds (-1 if all are taken).
int free_index(const Socket& s) {
  for (uint32_t i = 0; i < s.flow->peer_iomap_entries(); ++i) {
    const bool taken = std::any_of(s.maps.begin(), s.maps.end(),
                                   [&](const LocalMap& m) { return m.index == int(i); });
    if (!taken) return int(i);
  }
  return -1;
}

}  // namespace

// PROT_WRITE takes an entry of the peer's table (its size the peer's RDMA_IOMAPSIZE; none
// free: ENOMEM, as rdma-core); PROT_NONE registers the buffer only. Offset -1 picks the end of
// the windows opened so far.
RDMACM_EXPORT off_t riomap(int fd, void* buf, size_t len, int prot, int, off_t offset) {
  Ptr p = Runtime::get().find(fd);
  if (!p) return fail(EBADF);
  if (!buf || !len || (prot != PROT_WRITE && prot != PROT_NONE)) return fail(EINVAL);
  Socket& s = *p;
  std::lock_guard<std::mutex> g(s.mu);
  if (!s.flow || s.state != State::kConnected) return fail(EINVAL);
  LocalMap m{buf, len, nullptr, 0, -1, false};
  if (prot == PROT_WRITE && (m.index = free_index(s)) < 0) return fail(ENOMEM);
  if (offset == -1) {
    offset = 0;
    for (const LocalMap& o : s.maps) offset = std::max<off_t>(offset, off_t(o.offset + o.len));
  }
  m.offset = uint64_t(offset);
  const int access = IBV_ACCESS_LOCAL_WRITE | (prot == PROT_WRITE ? IBV_ACCESS_REMOTE_WRITE : 0);
  m.mr = ibv_reg_mr(Service::get().default_pd(), buf, len, access);
  if (!m.mr) return -1;
  s.maps.push_back(m);
  if (int err = announce_maps(s); err && err != EAGAIN) return fail(err);  // or with the next data
  return offset;
}

// The peer is not told (as rdma-core): its entry stays, and a write to it fails its QP.
RDMACM_EXPORT int riounmap(int fd, void* buf, size_t len) {
  Ptr p = Runtime::get().find(fd);
  if (!p) return fail(EBADF);
  std::lock_guard<std::mutex> g(p->mu);
  for (auto it = p->maps.begin(); it != p->maps.end(); ++it) {
    if (it->buf == buf && it->len == len) {
      ibv_dereg_mr(it->mr);
      p->maps.erase(it);
      return 0;
    }
  }
  return fail(EINVAL);
}

// Writes `count` bytes into the peer's window holding `offset` (EINVAL if none), in pieces of
// up to 64 KiB, in order with the stream's messages; a nonblocking call writes what fits.
RDMACM_EXPORT size_t riowrite(int fd, const void* buf, size_t count, off_t offset, int flags) {
  Ptr p = Runtime::get().find(fd);
  if (!p) return static_cast<size_t>(fail(EBADF));
  Socket& s = *p;
  std::unique_lock<std::mutex> g(s.mu);
  CallWait wait(s.nonblock || (flags & MSG_DONTWAIT));
  const auto* src = static_cast<const uint8_t*>(buf);
  size_t done = 0;
  while (done < count) {
    if (s.state != State::kConnected || !s.flow) return done ? done : size_t(fail(ENOTCONN));
    if (s.peer_gone) return done ? done : size_t(fail(ECONNRESET));  // as rdma-core's riowrite
    if (s.wr_shut) return done ? done : size_t(fail(EPIPE));
    const uint64_t at = uint64_t(offset) + done;
    const IomapEntry* win = s.flow->find_iomap(at);
    if (!win) {
      poll_cq(s);  // a notice of the peer's mapping that arrived since the last look
      win = s.flow->find_iomap(at);
    }
    if (!win) return done ? done : size_t(fail(EINVAL));
    const int maps = announce_maps(s);
    if (maps && maps != EAGAIN) return done ? done : size_t(fail(maps));
    const auto want = static_cast<uint32_t>(
        std::min<uint64_t>({count - done, kMaxTransfer, win->offset + win->sge.length - at}));
    const bool room = maps == 0 && s.sq_used + kCtrlWindow < uint32_t(s.sizes.sqsize);
    const Chunk c = room ? s.ring->take(want, kSendLowWater) : Chunk{};
    if (c.length == 0) {
      if (!wait.next(s, g)) return done ? done : size_t(would_block());
      continue;
    }
    std::memcpy(s.tx_buf + c.offset, src + done, c.length);
    const Write w{win->sge.addr + (at - win->offset), win->sge.key, 0, c.length};
    if (int err = post_write(s, w, c, false, false)) return done ? done : size_t(fail(err));
    done += c.length;
  }
  return done;
}
