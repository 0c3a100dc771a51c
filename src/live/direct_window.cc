// DirectWindow (direct mode): the shared table of a device, what peers read of it, and the
// batched process_vm_writev / readv copies it allows.
#include "live/direct_window.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "engine/types.h"
#include "live/counters_file.h"
#include "live/log.h"

namespace vrnic::live {

namespace {

constexpr size_t kFileSize = 4096 + sizeof(DirectWindow::MrSlot) * DirectWindow::kMrSlots +
                             sizeof(DirectWindow::QpSlot) * DirectWindow::kQpSlots;
constexpr uint32_t kQpResponds = 1, kQpIpv6 = 2, kQpValid = 4;
constexpr uint64_t kRetryNoPeerNs = 100'000'000;  // look for a missing table again after 100 ms
constexpr uint64_t kRetractWaitNs = 1'000'000'000;
constexpr size_t kMaxQueued = 64;   // copies per flush
constexpr uint64_t kAliveCheckNs = 1'000'000;  // how often a peer's pidfd is asked
constexpr size_t kMaxSegs = 1024;   // IOV_MAX: local iovecs per system call

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void ip_words(const std::array<uint8_t, 16>& ip, uint64_t out[2]) {
  std::memcpy(&out[0], ip.data(), 8);
  std::memcpy(&out[1], ip.data() + 8, 8);
}

// Under Yama's "restricted" ptrace scope only a process's ancestors may use
// process_vm_writev on it; a device in direct mode lets any process of its user (the same
// user is still required by the kernel) copy into it, as its peers must.
void allow_peer_copies() {
  FILE* f = std::fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
  if (f == nullptr) return;
  int scope = 0;
  if (std::fscanf(f, "%d", &scope) != 1) scope = 0;
  std::fclose(f);
  if (scope == 1) prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  else if (scope > 1)
    log_debug("yama ptrace_scope=%d: direct copies will be refused", scope);
}

}  // namespace

DirectWindow::MrSlot* DirectWindow::Map::mrs() const {
  return reinterpret_cast<MrSlot*>(static_cast<char*>(base) + 4096);
}
DirectWindow::QpSlot* DirectWindow::Map::qps() const {
  return reinterpret_cast<QpSlot*>(static_cast<char*>(base) + 4096 +
                                   sizeof(MrSlot) * header()->mr_slots);
}

std::string DirectWindow::path_for(bool ipv6, const std::array<uint8_t, 16>& ip) {
  struct stat st {};
  unsigned long long ns = stat("/proc/self/ns/net", &st) == 0 ? st.st_ino : 0;
  std::string s = "/dev/shm/vrnic.direct." + std::to_string(ns) + ".";
  static const char* hex = "0123456789abcdef";
  for (size_t i = 0; i < (ipv6 ? 16u : 4u); ++i) {
    s += hex[ip[i] >> 4];
    s += hex[ip[i] & 15];
  }
  return s;
}

size_t DirectWindow::remove_stale_tables(const char* dir) {
  DIR* d = opendir(dir);
  if (d == nullptr) return 0;
  size_t removed = 0;
  const uid_t me = geteuid();
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind("vrnic.direct.", 0) != 0) continue;
    const std::string path = std::string(dir) + "/" + name;
    const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st {};
    uint64_t magic = 0;
    uint32_t pid = 0;
    uint64_t ticks = 0;
    const bool mine = fstat(fd, &st) == 0 && (me == 0 || st.st_uid == me);
    // A table without its magic is being created; its creator lives (it has the address).
    const bool whole =
        pread(fd, &magic, 8, offsetof(Header, magic)) == 8 && magic == kMagic &&
        pread(fd, &pid, 4, offsetof(Header, pid)) == 4 &&
        pread(fd, &ticks, 8, offsetof(Header, start_ticks)) == 8 && pid != 0;
    if (mine && whole && writer_gone(static_cast<pid_t>(pid), ticks) && unlink_if_same(path, fd))
      ++removed;
    close(fd);
  }
  closedir(d);
  return removed;
}

DirectWindow* DirectWindow::create(bool ipv6, const std::array<uint8_t, 16>& ip, int& err) {
  std::string path = path_for(ipv6, ip);
  // The address is this device's (its UDP port is bound exclusively), so a file left by a
  // process that died holding the same address is stale: start afresh.
  unlink(path.c_str());
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    err = errno;
    return nullptr;
  }
  if (ftruncate(fd, static_cast<off_t>(kFileSize)) != 0) {
    err = errno;
    close(fd);
    unlink(path.c_str());
    return nullptr;
  }
  void* base = mmap(nullptr, kFileSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    err = errno;
    unlink(path.c_str());
    return nullptr;
  }
  auto* w = new DirectWindow();
  w->path_ = path;
  w->own_.base = base;
  w->own_.size = kFileSize;
  Header* h = w->own_.header();
  h->pid = static_cast<uint32_t>(getpid());
  h->start_ticks = process_start_ticks(getpid());
  h->mr_slots = kMrSlots;
  h->qp_slots = kQpSlots;
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kMagic;  // last: a reader that sees it sees the owner's pid and start
  allow_peer_copies();
  h->alive.store(1, std::memory_order_release);
  return w;
}

void DirectWindow::close_table() {
  if (own_.header()->alive.exchange(0, std::memory_order_seq_cst) != 0) unlink(path_.c_str());
}

DirectWindow::~DirectWindow() {
  for (const Pending& p : queue_) p.pin->busy.fetch_sub(1, std::memory_order_release);
  close_table();
  munmap(own_.base, own_.size);
  for (Peer& p : peers_) unmap(p);
}

// --- owner side ------------------------------------------------------------------------------

void DirectWindow::wait_idle(MrSlot& slot) {
  if (slot.busy.load(std::memory_order_seq_cst) == 0) return;
  const uint64_t until = now_ns() + kRetractWaitNs;
  while (slot.busy.load(std::memory_order_seq_cst) != 0) {
    if (now_ns() > until) {
      // A peer died in the middle of a copy: its count will never drop.
      std::fprintf(stderr, "vrnic: direct mode: a peer's copy did not finish in 1 s; "
                           "region retracted anyway\n");
      slot.busy.store(0, std::memory_order_relaxed);
      return;
    }
    sched_yield();
  }
}

// Entries are found by their key's name (a QP's by its number): the home slot, or one of
// the kProbe after it (names are random, so two live ones may share a home). The owner puts
// an entry where it already is, else in the first free slot of the run; a run with none
// free leaves the region (or QP) unpublished: its accesses go on the wire.
DirectWindow::MrSlot* DirectWindow::own_mr_slot(uint32_t key, bool take) {
  MrSlot* free = nullptr;
  for (uint32_t i = 0; i < kProbe; ++i) {
    MrSlot& s = own_.mrs()[((key >> 8) + i) & (kMrSlots - 1)];
    const bool valid = s.valid.load(std::memory_order_relaxed) != 0;
    if (valid && s.key.load(std::memory_order_relaxed) == key) return &s;
    if (!valid && free == nullptr) free = &s;
  }
  return take ? free : nullptr;
}

DirectWindow::QpSlot* DirectWindow::own_qp_slot(uint32_t qpn, bool take) {
  QpSlot* free = nullptr;
  for (uint32_t i = 0; i < kProbe; ++i) {
    QpSlot& s = own_.qps()[(qpn + i) & (kQpSlots - 1)];
    const bool valid = (s.flags.load(std::memory_order_relaxed) & kQpValid) != 0;
    if (valid && s.qpn.load(std::memory_order_relaxed) == qpn) return &s;
    if (!valid && free == nullptr) free = &s;
  }
  return take ? free : nullptr;
}

void DirectWindow::publish_mr(const engine::DirectMr& mr) {
  MrSlot* slot = own_mr_slot(mr.key, true);
  if (slot == nullptr) return;
  MrSlot& s = *slot;
  const uint32_t seq = s.seq.load(std::memory_order_relaxed);
  s.seq.store(seq + 1, std::memory_order_seq_cst);  // peers stop starting copies
  wait_idle(s);                                     // and those under way finish
  s.key.store(mr.key, std::memory_order_relaxed);
  s.pd.store(mr.pd, std::memory_order_relaxed);
  s.access.store(mr.access, std::memory_order_relaxed);
  s.iova.store(mr.iova, std::memory_order_relaxed);
  s.length.store(mr.length, std::memory_order_relaxed);
  s.host.store(reinterpret_cast<uint64_t>(mr.host), std::memory_order_relaxed);
  s.valid.store(1, std::memory_order_relaxed);
  s.seq.store(seq + 2, std::memory_order_release);
}

void DirectWindow::retract_mr(uint32_t key) {
  MrSlot* slot = own_mr_slot(key, false);
  if (slot == nullptr) return;  // never published
  MrSlot& s = *slot;
  const uint32_t seq = s.seq.load(std::memory_order_relaxed);
  s.seq.store(seq + 1, std::memory_order_seq_cst);
  wait_idle(s);
  s.valid.store(0, std::memory_order_relaxed);
  s.seq.store(seq + 2, std::memory_order_release);
}

void DirectWindow::publish_qp(const engine::DirectQp& qp) {
  QpSlot* slot = own_qp_slot(qp.qpn, true);
  if (slot == nullptr) return;
  QpSlot& s = *slot;
  const uint32_t seq = s.seq.load(std::memory_order_relaxed);
  s.seq.store(seq + 1, std::memory_order_seq_cst);
  uint64_t ip[2];
  ip_words(qp.dest_ip, ip);
  s.qpn.store(qp.qpn, std::memory_order_relaxed);
  s.pd.store(qp.pd, std::memory_order_relaxed);
  s.access.store(qp.access, std::memory_order_relaxed);
  s.dest_qpn.store(qp.dest_qpn, std::memory_order_relaxed);
  s.dest_ip[0].store(ip[0], std::memory_order_relaxed);
  s.dest_ip[1].store(ip[1], std::memory_order_relaxed);
  s.flags.store(kQpValid | (qp.responds ? kQpResponds : 0) | (qp.ipv6 ? kQpIpv6 : 0),
                std::memory_order_relaxed);
  s.seq.store(seq + 2, std::memory_order_release);
}

void DirectWindow::retract_qp(uint32_t qpn) {
  QpSlot* slot = own_qp_slot(qpn, false);
  if (slot == nullptr) return;
  QpSlot& s = *slot;
  const uint32_t seq = s.seq.load(std::memory_order_relaxed);
  s.seq.store(seq + 1, std::memory_order_seq_cst);
  s.flags.store(0, std::memory_order_relaxed);
  s.seq.store(seq + 2, std::memory_order_release);
}

// --- requester side --------------------------------------------------------------------------

DirectWindow::Peer* DirectWindow::peer_for(bool ipv6, const std::array<uint8_t, 16>& ip,
                                           size_t& index) {
  index = peers_.size();
  for (size_t i = 0; i < peers_.size(); ++i)
    if (peers_[i].ipv6 == ipv6 && peers_[i].ip == ip) index = i;
  if (index == peers_.size()) {
    peers_.push_back(Peer{});
    peers_.back().ipv6 = ipv6;
    peers_.back().ip = ip;
  }
  Peer* p = &peers_[index];
  // The owner closed its device, or died without closing it (broken, retry due): a device
  // started again at the address has a new file. Look again, as for a missing table; copies
  // queued to the old one hold pins in its mapping, so unmap only once they are done.
  if (p->map.base != nullptr &&
      (p->map.header()->alive.load(std::memory_order_acquire) == 0 ||
       (p->broken && now_ns() >= p->retry_ns))) {
    if (!queue_.empty()) return nullptr;
    unmap(*p);
  }
  if (p->map.base == nullptr) {
    const uint64_t now = now_ns();
    if (now < p->retry_ns) return nullptr;
    p->retry_ns = now + kRetryNoPeerNs;
    int fd = open(path_for(ipv6, ip).c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return nullptr;
    struct stat st {};
    void* base = MAP_FAILED;
    if (fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) == kFileSize)
      base = mmap(nullptr, kFileSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) return nullptr;
    Map m{base, kFileSize};
    const Header* h = m.header();
    if (h->magic != kMagic || h->mr_slots != kMrSlots || h->qp_slots != kQpSlots ||
        h->alive.load(std::memory_order_acquire) == 0) {
      munmap(base, kFileSize);
      return nullptr;
    }
    // Copies go to the owner by pid. Its pidfd says whether that process has exited, so a
    // pid reused by another process after the owner died is never written to.
    const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, static_cast<pid_t>(h->pid), 0));
    if (pidfd < 0 && errno != ENOSYS) {
      munmap(base, kFileSize);
      return nullptr;  // gone already
    }
    p->map = m;
    p->pidfd = pidfd;
    p->alive_ns = 0;
  }
  return p->broken ? nullptr : p;
}

void DirectWindow::unmap(Peer& p) {
  if (p.map.base != nullptr) munmap(p.map.base, p.map.size);
  if (p.pidfd >= 0) close(p.pidfd);
  p.map = Map{};
  p.pidfd = -1;
  p.broken = false;
  p.retry_ns = 0;
}

bool DirectWindow::owner_gone(const Peer& p) {
  if (p.pidfd >= 0) {
    pollfd pf{p.pidfd, POLLIN, 0};
    return poll(&pf, 1, 0) != 0;  // readable once the process exited (or the check failed)
  }
  return kill(static_cast<pid_t>(p.map.header()->pid), 0) != 0 && errno == ESRCH;
}

bool DirectWindow::full() const {
  return queue_.size() >= kMaxQueued || segs_.size() + engine::kMaxDirectSpans > kMaxSegs;
}

// A table refuses what its owner never published; one whose owner died without closing it
// refuses for ever what a new device at the address publishes. Now and then (refusals go on
// the wire anyway) check that the owner lives; if not, the table is looked up again.
bool DirectWindow::refuse(Peer& peer) {
  const uint64_t now = now_ns();
  if (now >= peer.retry_ns) {
    peer.retry_ns = now + kRetryNoPeerNs;
    if (owner_gone(peer)) {
      peer.broken = true;
      peer.retry_ns = 0;
    }
  }
  return false;
}

// The responder QP: connected to this QP, accepting requests, with the right enabled. A
// slot being rewritten (odd or changed seq) is kBusy: the wire, without a liveness check.
// The entry is looked for in the probe run of its QPN (own_qp_slot).
DirectWindow::Verdict DirectWindow::check_qp(const Peer& peer, const engine::DirectOp& op,
                                             uint32_t& pd) {
  bool busy = false;
  for (uint32_t i = 0; i < kProbe; ++i) {
    const Verdict v = check_qp_slot(peer.map.qps()[(op.dest_qpn + i) & (kQpSlots - 1)], op, pd);
    if (v == Verdict::kBusy) busy = true;
    else if (v != Verdict::kAbsent) return v;
  }
  return busy ? Verdict::kBusy : Verdict::kRefused;
}

DirectWindow::Verdict DirectWindow::check_qp_slot(const QpSlot& q, const engine::DirectOp& op,
                                                  uint32_t& pd) {
  const uint32_t qseq = q.seq.load(std::memory_order_acquire);
  if (qseq & 1) return Verdict::kBusy;
  const uint32_t qpn = q.qpn.load(std::memory_order_relaxed);
  pd = q.pd.load(std::memory_order_relaxed);
  const uint32_t qaccess = q.access.load(std::memory_order_relaxed);
  const uint32_t qdest = q.dest_qpn.load(std::memory_order_relaxed);
  const uint32_t qflags = q.flags.load(std::memory_order_relaxed);
  uint64_t qip[2] = {q.dest_ip[0].load(std::memory_order_relaxed),
                     q.dest_ip[1].load(std::memory_order_relaxed)};
  std::atomic_thread_fence(std::memory_order_acquire);
  if (q.seq.load(std::memory_order_relaxed) != qseq) return Verdict::kBusy;
  if (qpn != op.dest_qpn || !(qflags & kQpValid)) return Verdict::kAbsent;
  uint64_t src[2];
  ip_words(op.src_ip, src);
  const uint32_t right = op.read ? engine::kRemoteRead : engine::kRemoteWrite;
  const bool allowed = (qflags & kQpResponds) &&
                       ((qflags & kQpIpv6) != 0) == op.ipv6 && qdest == op.qpn &&
                       qip[0] == src[0] && qip[1] == src[1] && (qaccess & right);
  return allowed ? Verdict::kAllowed : Verdict::kRefused;
}

// The region: the exact key (generation included), the QP's PD, the right, the bounds.
// On-demand regions stay on the wire: a page the owner has not mapped must be refused
// before a byte moves, which only the owner can tell. kAllowed fills `mr`.
DirectWindow::Verdict DirectWindow::check_mr(const Peer& peer, const engine::DirectOp& op,
                                             uint32_t pd, MrView& mr) {
  bool busy = false;
  for (uint32_t i = 0; i < kProbe; ++i) {
    MrSlot& m = peer.map.mrs()[((op.rkey >> 8) + i) & (kMrSlots - 1)];
    const Verdict v = check_mr_slot(m, op, pd, mr);
    if (v == Verdict::kBusy) busy = true;
    else if (v != Verdict::kAbsent) return v;
  }
  return busy ? Verdict::kBusy : Verdict::kRefused;
}

DirectWindow::Verdict DirectWindow::check_mr_slot(MrSlot& m, const engine::DirectOp& op,
                                                  uint32_t pd, MrView& mr) {
  const uint32_t mseq = m.seq.load(std::memory_order_acquire);
  if (mseq & 1) return Verdict::kBusy;
  const uint32_t key = m.key.load(std::memory_order_relaxed);
  const uint32_t mpd = m.pd.load(std::memory_order_relaxed);
  const uint32_t maccess = m.access.load(std::memory_order_relaxed);
  const uint32_t valid = m.valid.load(std::memory_order_relaxed);
  const uint64_t iova = m.iova.load(std::memory_order_relaxed);
  const uint64_t length = m.length.load(std::memory_order_relaxed);
  const uint64_t host = m.host.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (m.seq.load(std::memory_order_relaxed) != mseq) return Verdict::kBusy;
  if (!valid || key != op.rkey) return Verdict::kAbsent;
  const uint32_t right = op.read ? engine::kRemoteRead : engine::kRemoteWrite;
  if (mpd != pd || !(maccess & right) ||
      (maccess & engine::kOnDemand))
    return Verdict::kRefused;
  const uint64_t end = op.remote_addr + op.length;
  if (end < op.remote_addr || op.remote_addr < iova || end > iova + length) return Verdict::kRefused;
  mr = {&m, mseq, host + (op.remote_addr - iova)};
  return Verdict::kAllowed;
}

bool DirectWindow::submit(const engine::DirectOp& op) {
  if (op.local.size() > engine::kMaxDirectSpans || full()) return false;
  size_t index = 0;
  Peer* peer = peer_for(op.ipv6, op.dest_ip, index);
  if (peer == nullptr) return false;
  uint32_t pd = 0;
  MrView mr;
  Verdict v = check_qp(*peer, op, pd);
  if (v == Verdict::kAllowed) v = check_mr(*peer, op, pd, mr);
  if (v != Verdict::kAllowed) return v == Verdict::kRefused ? refuse(*peer) : false;
  // Pin the entry: the owner's retract waits while busy != 0 (it bumps seq first, then reads
  // busy; this bumps busy first, then reads seq: one of the two sees the other).
  mr.slot->busy.fetch_add(1, std::memory_order_seq_cst);
  if (mr.slot->seq.load(std::memory_order_seq_cst) != mr.seq) {
    mr.slot->busy.fetch_sub(1, std::memory_order_release);
    return false;
  }
  enqueue(index, mr, op);
  return true;
}

void DirectWindow::enqueue(size_t peer, const MrView& mr, const engine::DirectOp& op) {
  Pending pd;
  pd.peer = peer;
  pd.pin = mr.slot;
  pd.read = op.read;
  pd.remote = mr.remote;
  pd.length = op.length;
  pd.first_seg = static_cast<uint32_t>(segs_.size());
  pd.nsegs = static_cast<uint32_t>(op.local.size());
  for (const engine::DirectSpan& s : op.local) {
    if (s.transient) {
      segs_.push_back({nullptr, arena_.size(), s.len});
      arena_.insert(arena_.end(), s.addr, s.addr + s.len);
    } else {
      segs_.push_back({s.addr, 0, s.len});
    }
  }
  queue_.push_back(pd);
}

size_t DirectWindow::copy_group(size_t first, size_t end) {
  static thread_local std::vector<iovec> local, remote;
  local.clear();
  remote.clear();
  uint64_t total = 0;
  for (size_t i = first; i < end; ++i) {
    const Pending& p = queue_[i];
    for (uint32_t k = 0; k < p.nsegs; ++k) {
      const Seg& s = segs_[p.first_seg + k];
      local.push_back({s.addr != nullptr ? s.addr : arena_.data() + s.off, s.len});
    }
    remote.push_back({reinterpret_cast<void*>(p.remote), p.length});
    total += p.length;
  }
  Peer& peer = peers_[queue_[first].peer];
  const pid_t pid = static_cast<pid_t>(peer.map.header()->pid);
  const bool read = queue_[first].read;
  // The owner must still be the process at that pid. Asked at most once per kAliveCheckNs:
  // for the pid to be reused within that time, the pid space would have to wrap in it.
  const uint64_t now = now_ns();
  if (peer.pidfd >= 0 && now - peer.alive_ns >= kAliveCheckNs) {
    if (owner_gone(peer)) {  // no copy
      peer.broken = true;
      peer.retry_ns = now + kRetryNoPeerNs;
      return 0;
    }
    peer.alive_ns = now;
  }
  ++copy_calls_;
  ssize_t r = read ? process_vm_readv(pid, local.data(), local.size(), remote.data(),
                                      remote.size(), 0)
                   : process_vm_writev(pid, local.data(), local.size(), remote.data(),
                                       remote.size(), 0);
  if (r < 0) {
    const int e = errno;
    if (e == EPERM || e == ESRCH || e == ENOSYS) {
      log_debug("direct mode: %s to pid %d refused (%s); using the wire",
                read ? "process_vm_readv" : "process_vm_writev", static_cast<int>(pid),
                std::strerror(e));
      peer.broken = true;
      // A dead owner's address may get a new device: retried later. A refusal is for good.
      peer.retry_ns = e == ESRCH ? now_ns() + kRetryNoPeerNs : ~uint64_t{0};
    }
    return 0;
  }
  if (static_cast<uint64_t>(r) == total) return end - first;
  // A fault part way (the owner unmapped registered memory): the copies wholly done count.
  uint64_t left = static_cast<uint64_t>(r);
  size_t n = 0;
  while (first + n < end && queue_[first + n].length <= left) left -= queue_[first + n++].length;
  return n;
}

size_t DirectWindow::flush() {
  size_t done = 0;
  size_t i = 0;
  while (i < queue_.size()) {
    size_t j = i + 1;
    while (j < queue_.size() && queue_[j].peer == queue_[i].peer &&
           queue_[j].read == queue_[i].read)
      ++j;
    const size_t n = copy_group(i, j);
    done += n;
    if (n != j - i) break;  // the rest go on the wire
    i = j;
  }
  for (const Pending& p : queue_) p.pin->busy.fetch_sub(1, std::memory_order_release);
  queue_.clear();
  segs_.clear();
  arena_.clear();
  return done;
}

}  // namespace vrnic::live
