// Tests of live::DirectWindow on its own, in one process: two windows (a requester and a
// responder address), a memory region and an RC QP published on the responder's, copies
// submitted from the requester's and flushed (process_vm_writev / readv to this very process).
#include "live/direct_window.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/types.h"

namespace vrnic::live {
namespace {

using engine::DirectMr;
using engine::DirectOp;
using engine::DirectQp;
using engine::DirectSpan;
using Ip = std::array<uint8_t, 16>;

// Addresses unique to this process (ctest runs test processes side by side, and a window
// created at an address replaces the table another left there).
Ip address(uint8_t tag) {
  const uint32_t pid = static_cast<uint32_t>(getpid());
  Ip ip{};
  ip[0] = 127;
  ip[1] = tag;
  ip[2] = uint8_t(pid >> 8);
  ip[3] = uint8_t(pid);
  return ip;
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

constexpr uint32_t kAllRemote = engine::kRemoteWrite | engine::kRemoteRead;
constexpr uint32_t kPd = 7;
constexpr uint32_t kKey = 0x00000305;  // slot 3, generation 5
constexpr uint32_t kRespQpn = 0x11, kReqQpn = 0x22;
constexpr uint64_t kIova = 0x10000;
constexpr size_t kLen = 4096;

// Static facts the header states for peers that map the file.
static_assert(sizeof(DirectWindow::MrSlot) == 64 && sizeof(DirectWindow::QpSlot) == 64);
static_assert((DirectWindow::kMrSlots & (DirectWindow::kMrSlots - 1)) == 0 &&
              (DirectWindow::kQpSlots & (DirectWindow::kQpSlots - 1)) == 0);
static_assert(sizeof(DirectWindow::Header) <= 4096);
static_assert(std::atomic<uint32_t>::is_always_lock_free &&
              std::atomic<uint64_t>::is_always_lock_free);

class DirectWindowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    req_ip_ = address(201);
    resp_ip_ = address(202);
    int err = 0;
    req_.reset(DirectWindow::create(false, req_ip_, err));
    ASSERT_NE(req_, nullptr) << std::strerror(err);
    resp_.reset(DirectWindow::create(false, resp_ip_, err));
    ASSERT_NE(resp_, nullptr) << std::strerror(err);
    target_.assign(kLen, 0);
    source_.resize(kLen);
    for (size_t i = 0; i < kLen; ++i) source_[i] = uint8_t(i * 13 + 5);
  }

  DirectMr mr(uint32_t key = kKey, uint32_t access = kAllRemote | engine::kLocalWrite,
              uint32_t pd = kPd) {
    DirectMr m;
    m.key = key;
    m.pd = pd;
    m.access = access;
    m.iova = kIova;
    m.length = kLen;
    m.host = target_.data();
    return m;
  }
  DirectQp qp(uint32_t access = kAllRemote, bool responds = true) {
    DirectQp q;
    q.qpn = kRespQpn;
    q.pd = kPd;
    q.access = access;
    q.dest_qpn = kReqQpn;
    q.responds = responds;
    q.ipv6 = false;
    q.dest_ip = req_ip_;
    return q;
  }
  void publish_defaults() {
    resp_->publish_mr(mr());
    resp_->publish_qp(qp());
  }
  // An op of one local span (spans_ keeps it alive until the next call).
  DirectOp op(bool read, uint64_t remote_addr, uint8_t* local, uint64_t len,
              uint32_t rkey = kKey, bool transient = false) {
    spans_.assign(1, DirectSpan{local, len, transient});
    return op_spans(read, remote_addr, len, rkey);
  }
  DirectOp op_spans(bool read, uint64_t remote_addr, uint64_t len, uint32_t rkey = kKey) {
    DirectOp o;
    o.read = read;
    o.qpn = kReqQpn;
    o.dest_qpn = kRespQpn;
    o.ipv6 = false;
    o.src_ip = req_ip_;
    o.dest_ip = resp_ip_;
    o.rkey = rkey;
    o.remote_addr = remote_addr;
    o.length = len;
    o.local = std::span<const DirectSpan>(spans_.data(), spans_.size());
    return o;
  }
  bool target_untouched() const {
    return std::all_of(target_.begin(), target_.end(), [](uint8_t b) { return b == 0; });
  }
  // A WRITE of 64 bytes at offset 128 is refused: submit false, nothing queued, the target
  // unchanged after a flush.
  void expect_write_refused(const DirectOp& o) {
    EXPECT_FALSE(req_->submit(o));
    EXPECT_EQ(req_->queued(), 0u);
    EXPECT_EQ(req_->flush(), 0u);
    EXPECT_TRUE(target_untouched());
  }
  DirectOp write64(uint32_t rkey = kKey) {
    return op(false, kIova + 128, source_.data(), 64, rkey);
  }
  // A READ of 64 bytes from offset 128 is refused: the local buffer keeps its bytes.
  void expect_read_refused(uint32_t rkey = kKey) {
    std::vector<uint8_t> local(64, 0xee);
    std::memset(target_.data() + 128, 0x42, 64);
    EXPECT_FALSE(req_->submit(op(true, kIova + 128, local.data(), 64, rkey)));
    EXPECT_EQ(req_->queued(), 0u);
    EXPECT_EQ(req_->flush(), 0u);
    EXPECT_TRUE(std::all_of(local.begin(), local.end(), [](uint8_t b) { return b == 0xee; }));
    std::memset(target_.data() + 128, 0, 64);
  }

  Ip req_ip_{}, resp_ip_{};
  std::unique_ptr<DirectWindow> req_, resp_;
  std::vector<uint8_t> target_, source_;
  std::vector<DirectSpan> spans_;
};

// --- the table file ------------------------------------------------------------------------

TEST_F(DirectWindowTest, table__file_at_path_for_with_the_promised_header) {
  EXPECT_EQ(resp_->path(), DirectWindow::path_for(false, resp_ip_));
  EXPECT_EQ(req_->path(), DirectWindow::path_for(false, req_ip_));
  EXPECT_NE(req_->path(), resp_->path());
  // The address in hex ends the name (IPv4: four bytes).
  char hex[9];
  std::snprintf(hex, sizeof hex, "%02x%02x%02x%02x", resp_ip_[0], resp_ip_[1], resp_ip_[2],
                resp_ip_[3]);
  const std::string& p = resp_->path();
  ASSERT_GE(p.size(), 8u);
  EXPECT_EQ(p.substr(p.size() - 8), hex);
  EXPECT_EQ(p.rfind("/dev/shm/vrnic.direct.", 0), 0u) << p;

  int fd = open(p.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  struct stat st {};
  ASSERT_EQ(fstat(fd, &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // Room for the header and every slot.
  EXPECT_GE(size_t(st.st_size), sizeof(DirectWindow::Header) +
                                    sizeof(DirectWindow::MrSlot) * DirectWindow::kMrSlots +
                                    sizeof(DirectWindow::QpSlot) * DirectWindow::kQpSlots);
  void* base = mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  ASSERT_NE(base, MAP_FAILED);
  const auto* h = static_cast<const DirectWindow::Header*>(base);
  EXPECT_EQ(h->magic, DirectWindow::kMagic);
  EXPECT_EQ(std::memcmp(&h->magic, "rnicndw1", 8), 0);  // as the header spells it
  EXPECT_EQ(h->pid, uint32_t(getpid()));
  EXPECT_EQ(h->mr_slots, DirectWindow::kMrSlots);
  EXPECT_EQ(h->qp_slots, DirectWindow::kQpSlots);
  EXPECT_EQ(h->alive.load(), 1u);
  resp_->close_table();  // the file goes, the mapping says dead
  EXPECT_EQ(h->alive.load(), 0u);
  EXPECT_FALSE(file_exists(p));
  munmap(base, 4096);
}

TEST_F(DirectWindowTest, table__file_gone_after_destroy) {
  const std::string p = resp_->path();
  EXPECT_TRUE(file_exists(p));
  resp_.reset();
  EXPECT_FALSE(file_exists(p));
  EXPECT_TRUE(file_exists(req_->path()));
}

TEST_F(DirectWindowTest, create__replaces_a_stale_file_at_the_address) {
  const std::string p = resp_->path();
  // A file of a process that died at this address (here: the window's file, abandoned).
  resp_->close_table();
  int fd = open(p.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "junk", 4), 4);
  close(fd);
  int err = 0;
  std::unique_ptr<DirectWindow> again(DirectWindow::create(false, resp_ip_, err));
  ASSERT_NE(again, nullptr) << std::strerror(err);
  struct stat st {};
  ASSERT_EQ(stat(p.c_str(), &st), 0);
  EXPECT_GT(st.st_size, 4);
}

// --- copies --------------------------------------------------------------------------------

TEST_F(DirectWindowTest, write__bytes_land_and_flush_counts_it) {
  publish_defaults();
  ASSERT_TRUE(req_->submit(op(false, kIova + 100, source_.data(), 1000)));
  EXPECT_EQ(req_->queued(), 1u);
  EXPECT_TRUE(target_untouched());  // copied at flush, not at submit
  const uint64_t calls = req_->copy_calls();
  EXPECT_EQ(req_->flush(), 1u);
  EXPECT_EQ(req_->copy_calls(), calls + 1);
  EXPECT_EQ(req_->queued(), 0u);
  EXPECT_EQ(std::memcmp(target_.data() + 100, source_.data(), 1000), 0);
  EXPECT_EQ(target_[99], 0);
  EXPECT_EQ(target_[1100], 0);
  EXPECT_EQ(resp_->copy_calls(), 0u);  // the responder's window made no call
}

TEST_F(DirectWindowTest, write__whole_region_to_the_last_byte) {
  publish_defaults();
  ASSERT_TRUE(req_->submit(op(false, kIova, source_.data(), kLen)));
  EXPECT_EQ(req_->flush(), 1u);
  EXPECT_EQ(target_, source_);
  ASSERT_TRUE(req_->submit(op(false, kIova + kLen - 1, source_.data() + 7, 1)));  // last byte
  EXPECT_EQ(req_->flush(), 1u);
  EXPECT_EQ(target_[kLen - 1], source_[7]);
}

TEST_F(DirectWindowTest, read__bytes_come_back) {
  publish_defaults();
  std::memcpy(target_.data(), source_.data(), kLen);
  std::vector<uint8_t> local(3000, 0);
  ASSERT_TRUE(req_->submit(op(true, kIova + 50, local.data(), 3000)));
  EXPECT_EQ(local[0], 0);  // not before the flush
  EXPECT_EQ(req_->flush(), 1u);
  EXPECT_EQ(std::memcmp(local.data(), source_.data() + 50, 3000), 0);
}

TEST_F(DirectWindowTest, write_and_read__several_local_spans_gather_and_scatter) {
  publish_defaults();
  std::vector<uint8_t> a(10, 0xa1), b(300, 0xb2), c(7, 0xc3);
  spans_ = {{a.data(), a.size(), false}, {b.data(), b.size(), false}, {c.data(), c.size(), false}};
  ASSERT_TRUE(req_->submit(op_spans(false, kIova + 1, 317)));
  EXPECT_EQ(req_->flush(), 1u);
  EXPECT_EQ(target_[0], 0);
  EXPECT_EQ(target_[1], 0xa1);
  EXPECT_EQ(target_[10], 0xa1);
  EXPECT_EQ(target_[11], 0xb2);
  EXPECT_EQ(target_[310], 0xb2);
  EXPECT_EQ(target_[311], 0xc3);
  EXPECT_EQ(target_[317], 0xc3);
  EXPECT_EQ(target_[318], 0);

  // Read back with other span boundaries.
  std::vector<uint8_t> x(100, 0), y(217, 0);
  spans_ = {{x.data(), x.size(), false}, {y.data(), y.size(), false}};
  ASSERT_TRUE(req_->submit(op_spans(true, kIova + 1, 317)));
  EXPECT_EQ(req_->flush(), 1u);
  EXPECT_EQ(std::memcmp(x.data(), target_.data() + 1, 100), 0);
  EXPECT_EQ(std::memcmp(y.data(), target_.data() + 101, 217), 0);
}

TEST_F(DirectWindowTest, submit__transient_span_copied_at_submit_others_read_at_flush) {
  publish_defaults();
  std::vector<uint8_t> inl(32, 0x11), kept(32, 0x22);
  ASSERT_TRUE(req_->submit(op(false, kIova, inl.data(), 32, kKey, /*transient=*/true)));
  ASSERT_TRUE(req_->submit(op(false, kIova + 64, kept.data(), 32, kKey, false)));
  std::memset(inl.data(), 0x99, 32);   // e.g. the inline WQE moved or was reused
  std::memset(kept.data(), 0x77, 32);  // registered memory: read at the flush
  EXPECT_EQ(req_->flush(), 2u);
  EXPECT_TRUE(std::all_of(target_.begin(), target_.begin() + 32, [](uint8_t v) { return v == 0x11; }));
  EXPECT_TRUE(std::all_of(target_.begin() + 64, target_.begin() + 96, [](uint8_t v) { return v == 0x77; }));
}

TEST_F(DirectWindowTest, flush__many_ops_one_system_call_per_run_of_one_direction) {
  publish_defaults();
  const uint64_t calls = req_->copy_calls();
  for (int i = 0; i < 20; ++i)
    ASSERT_TRUE(req_->submit(op(false, kIova + 100 * i, source_.data() + i, 50)));
  EXPECT_EQ(req_->queued(), 20u);
  EXPECT_EQ(req_->flush(), 20u);
  EXPECT_EQ(req_->copy_calls(), calls + 1);
  for (int i = 0; i < 20; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(std::memcmp(target_.data() + 100 * i, source_.data() + i, 50), 0);
    EXPECT_EQ(target_[100 * i + 50], 0);
  }

  // write, write, read, read, write: three runs, three calls, in order (the read sees the
  // write before it, the last write lands after the reads).
  std::vector<uint8_t> r1(10, 0), r2(10, 0);
  std::vector<uint8_t> w1(10, 0x31), w2(10, 0x32), w3(10, 0x33);
  ASSERT_TRUE(req_->submit(op(false, kIova + 3000, w1.data(), 10)));
  ASSERT_TRUE(req_->submit(op(false, kIova + 3010, w2.data(), 10)));
  ASSERT_TRUE(req_->submit(op(true, kIova + 3000, r1.data(), 10)));
  ASSERT_TRUE(req_->submit(op(true, kIova + 3010, r2.data(), 10)));
  ASSERT_TRUE(req_->submit(op(false, kIova + 3000, w3.data(), 10)));
  const uint64_t before = req_->copy_calls();
  EXPECT_EQ(req_->flush(), 5u);
  EXPECT_EQ(req_->copy_calls(), before + 3);
  EXPECT_EQ(r1, w1);
  EXPECT_EQ(r2, w2);
  EXPECT_TRUE(std::all_of(target_.begin() + 3000, target_.begin() + 3010, [](uint8_t v) { return v == 0x33; }));
}

TEST_F(DirectWindowTest, full__refuses_more_until_flushed) {
  publish_defaults();
  EXPECT_FALSE(req_->full());
  EXPECT_EQ(req_->queued(), 0u);
  size_t n = 0;
  while (!req_->full() && n < 10000) {
    ASSERT_TRUE(req_->submit(op(false, kIova + (n % 64) * 64, source_.data() + (n % 64), 64)));
    ++n;
    EXPECT_EQ(req_->queued(), n);
  }
  ASSERT_TRUE(req_->full());
  EXPECT_GT(n, 1u);  // a batch holds more than one copy
  EXPECT_FALSE(req_->submit(op(false, kIova, source_.data(), 64)));  // refused while full
  EXPECT_EQ(req_->queued(), n);
  EXPECT_EQ(req_->flush(), n);
  EXPECT_FALSE(req_->full());
  EXPECT_EQ(req_->queued(), 0u);
  EXPECT_TRUE(req_->submit(op(false, kIova, source_.data(), 64)));
  EXPECT_EQ(req_->flush(), 1u);
}

TEST_F(DirectWindowTest, full__many_spans_fill_it_sooner) {
  publish_defaults();
  std::vector<uint8_t> one(1, 0x5c);
  size_t single = 0;
  while (!req_->full() && single < 10000) {
    ASSERT_TRUE(req_->submit(op(false, kIova + single, one.data(), 1)));
    ++single;
  }
  EXPECT_EQ(req_->flush(), single);
  // Ops with the most local spans: the iovec budget of one system call runs out first.
  spans_.assign(engine::kMaxDirectSpans, DirectSpan{one.data(), 1, false});
  size_t wide = 0;
  while (!req_->full() && wide < 10000) {
    ASSERT_TRUE(req_->submit(op_spans(false, kIova, engine::kMaxDirectSpans)));
    ++wide;
  }
  EXPECT_LT(wide, single);
  EXPECT_GT(wide, 0u);
  EXPECT_EQ(req_->flush(), wide);
  // More spans than a copy may have: refused.
  spans_.assign(engine::kMaxDirectSpans + 1, DirectSpan{one.data(), 1, false});
  EXPECT_FALSE(req_->submit(op_spans(false, kIova, engine::kMaxDirectSpans + 1)));
}

TEST_F(DirectWindowTest, flush__stops_at_a_copy_that_faults) {
  // A second region whose memory the owner unmapped (registered, then munmap'd).
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  void* gone = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(gone, MAP_FAILED);
  ASSERT_EQ(munmap(gone, page), 0);
  publish_defaults();
  DirectMr bad = mr(0x00000406);
  bad.host = static_cast<const uint8_t*>(gone);
  bad.iova = 0x90000;
  bad.length = page;
  resp_->publish_mr(bad);
  ASSERT_TRUE(req_->submit(op(false, kIova, source_.data(), 16)));
  ASSERT_TRUE(req_->submit(op(false, 0x90000, source_.data(), 16, 0x00000406)));
  ASSERT_TRUE(req_->submit(op(false, kIova + 32, source_.data(), 16)));
  EXPECT_EQ(req_->flush(), 1u);  // the first only; the rest are the caller's to resend
  EXPECT_EQ(req_->queued(), 0u);
  EXPECT_EQ(std::memcmp(target_.data(), source_.data(), 16), 0);
  EXPECT_EQ(target_[32], 0);
  // The pins were released: the owner retracts at once (a pinned retract waits up to 1 s).
  const auto t0 = std::chrono::steady_clock::now();
  resp_->retract_mr(kKey);
  resp_->retract_mr(0x00000406);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
}

// --- another process ------------------------------------------------------------------------

// A child process owns the responder window and its memory; this process copies into and out
// of it. With `die`, the child exits without closing its table (a crash): the copy fails
// and later requests to the address are refused.
struct Child {
  pid_t pid = -1;
  int to_child = -1, from_child = -1;
};

Child start_responder_child(const Ip& resp_ip, const Ip& req_ip, bool die) {
  int p2c[2], c2p[2];
  if (pipe(p2c) != 0 || pipe(c2p) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    close(p2c[1]);
    close(c2p[0]);
    int err = 0;
    DirectWindow* w = DirectWindow::create(false, resp_ip, err);
    if (w == nullptr) _exit(2);
    std::vector<uint8_t> buf(kLen, 0);
    for (size_t i = 0; i < 256; ++i) buf[2048 + i] = uint8_t(0xc0 ^ i);
    DirectMr m;
    m.key = kKey;
    m.pd = kPd;
    m.access = kAllRemote | engine::kLocalWrite;
    m.iova = kIova;
    m.length = kLen;
    m.host = buf.data();
    w->publish_mr(m);
    DirectQp q;
    q.qpn = kRespQpn;
    q.pd = kPd;
    q.access = kAllRemote;
    q.dest_qpn = kReqQpn;
    q.responds = true;
    q.dest_ip = req_ip;
    w->publish_qp(q);
    char c = 'r';
    if (write(c2p[1], &c, 1) != 1) _exit(3);
    if (die) _exit(0);  // no close_table: the file stays, its owner is gone
    if (read(p2c[0], &c, 1) != 1) _exit(4);
    bool ok = true;
    for (size_t i = 0; i < 512; ++i) ok = ok && buf[100 + i] == uint8_t(i * 13 + 5);
    ok = ok && buf[99] == 0 && buf[612] == 0;
    c = ok ? 'y' : 'n';
    if (write(c2p[1], &c, 1) != 1) _exit(5);
    delete w;
    _exit(0);
  }
  close(p2c[0]);
  close(c2p[1]);
  return {pid, p2c[1], c2p[0]};
}

TEST_F(DirectWindowTest, other_process__write_and_read_through_its_table) {
  const Ip child_ip = address(205);
  Child ch = start_responder_child(child_ip, req_ip_, /*die=*/false);
  ASSERT_GT(ch.pid, 0);
  char c = 0;
  ASSERT_EQ(read(ch.from_child, &c, 1), 1);
  ASSERT_EQ(c, 'r');
  DirectOp w = op(false, kIova + 100, source_.data(), 512);
  w.dest_ip = child_ip;
  const uint64_t calls = req_->copy_calls();
  ASSERT_TRUE(req_->submit(w));
  std::vector<uint8_t> back(256, 0);
  DirectOp r = op(true, kIova + 2048, back.data(), 256);
  r.dest_ip = child_ip;
  ASSERT_TRUE(req_->submit(r));
  EXPECT_EQ(req_->flush(), 2u);
  EXPECT_EQ(req_->copy_calls(), calls + 2);
  for (size_t i = 0; i < 256; ++i) ASSERT_EQ(back[i], uint8_t(0xc0 ^ i)) << i;
  c = 'd';
  ASSERT_EQ(write(ch.to_child, &c, 1), 1);
  ASSERT_EQ(read(ch.from_child, &c, 1), 1);
  EXPECT_EQ(c, 'y') << "the child did not find the written bytes";
  int status = 0;
  ASSERT_EQ(waitpid(ch.pid, &status, 0), ch.pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  close(ch.to_child);
  close(ch.from_child);
  EXPECT_FALSE(file_exists(DirectWindow::path_for(false, child_ip)));
  EXPECT_FALSE(req_->submit(w));  // its table is closed
}

TEST_F(DirectWindowTest, other_process__died_with_its_table_open_is_refused) {
  const Ip child_ip = address(206);
  Child ch = start_responder_child(child_ip, req_ip_, /*die=*/true);
  ASSERT_GT(ch.pid, 0);
  char c = 0;
  ASSERT_EQ(read(ch.from_child, &c, 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(ch.pid, &status, 0), ch.pid);  // gone, table file left behind
  close(ch.to_child);
  close(ch.from_child);
  const std::string path = DirectWindow::path_for(false, child_ip);
  ASSERT_TRUE(file_exists(path));
  DirectOp w = op(false, kIova + 100, source_.data(), 64);
  w.dest_ip = child_ip;
  EXPECT_FALSE(req_->submit(w));  // the table says yes, but its owner is gone
  EXPECT_EQ(req_->queued(), 0u);
  unlink(path.c_str());
}

TEST_F(DirectWindowTest, other_process__dies_between_submit_and_flush_nothing_is_copied) {
  // The copy goes to the owner by pid: once the owner has exited, that pid may belong to
  // another process, so the flush must not copy at all (the caller sends it on the wire).
  const Ip child_ip = address(208);
  Child ch = start_responder_child(child_ip, req_ip_, /*die=*/false);
  ASSERT_GT(ch.pid, 0);
  char c = 0;
  ASSERT_EQ(read(ch.from_child, &c, 1), 1);
  DirectOp w = op(false, kIova + 100, source_.data(), 64);
  w.dest_ip = child_ip;
  ASSERT_TRUE(req_->submit(w));
  ASSERT_EQ(kill(ch.pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(ch.pid, &status, 0), ch.pid);
  close(ch.to_child);
  close(ch.from_child);
  const uint64_t calls = req_->copy_calls();
  EXPECT_EQ(req_->flush(), 0u);
  EXPECT_EQ(req_->copy_calls(), calls);  // no process_vm_writev was made
  EXPECT_EQ(req_->queued(), 0u);
  EXPECT_FALSE(req_->submit(w));
  unlink(DirectWindow::path_for(false, child_ip).c_str());
}

TEST_F(DirectWindowTest, other_process__died_then_a_new_owner_at_the_address_is_used) {
  // A device crashed (its table left behind, its pid gone) and was started again at the
  // same address: once the failed copy is behind us, the new table is found and used.
  const Ip child_ip = address(207);
  Child ch = start_responder_child(child_ip, req_ip_, /*die=*/true);
  ASSERT_GT(ch.pid, 0);
  char c = 0;
  ASSERT_EQ(read(ch.from_child, &c, 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(ch.pid, &status, 0), ch.pid);
  close(ch.to_child);
  close(ch.from_child);
  DirectOp w = op(false, kIova + 100, source_.data(), 64);
  w.dest_ip = child_ip;
  EXPECT_FALSE(req_->submit(w));  // its owner is gone
  // The restarted device: a new table at the address (create replaces the stale file).
  int err = 0;
  std::unique_ptr<DirectWindow> again(DirectWindow::create(false, child_ip, err));
  ASSERT_NE(again, nullptr) << std::strerror(err);
  DirectMr m = mr();
  again->publish_mr(m);
  again->publish_qp(qp());
  bool ok = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (std::chrono::steady_clock::now() < deadline) {
    if (req_->submit(w)) {
      if (req_->flush() == 1) {
        ok = true;
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(ok) << "the requester never used the new table at the address";
  EXPECT_EQ(std::memcmp(target_.data() + 100, source_.data(), 64), 0);
}

TEST_F(DirectWindowTest, other_process__died_unnoticed_then_a_new_owner_is_used) {
  // As above, but no copy failed to tell us: the table of the dead owner was mapped (by a
  // request it refused) and keeps refusing what the new owner at the address publishes.
  const Ip child_ip = address(208);
  Child ch = start_responder_child(child_ip, req_ip_, /*die=*/false);
  ASSERT_GT(ch.pid, 0);
  char c = 0;
  ASSERT_EQ(read(ch.from_child, &c, 1), 1);
  DirectOp bad = op(false, kIova + 100, source_.data(), 64, kKey + 1);
  bad.dest_ip = child_ip;
  EXPECT_FALSE(req_->submit(bad));  // maps the child's table; refused there
  kill(ch.pid, SIGKILL);             // dies with its table open
  int status = 0;
  ASSERT_EQ(waitpid(ch.pid, &status, 0), ch.pid);
  close(ch.to_child);
  close(ch.from_child);
  int err = 0;
  std::unique_ptr<DirectWindow> again(DirectWindow::create(false, child_ip, err));
  ASSERT_NE(again, nullptr) << std::strerror(err);
  DirectQp q = qp();
  q.qpn = kRespQpn + 1;  // the restarted program's QP
  again->publish_mr(mr());
  again->publish_qp(q);
  DirectOp w = op(false, kIova + 100, source_.data(), 64);
  w.dest_ip = child_ip;
  w.dest_qpn = kRespQpn + 1;
  bool ok = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (!ok && std::chrono::steady_clock::now() < deadline) {
    ok = req_->submit(w);
    if (!ok) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(ok) << "the requester kept the dead owner's table";
  EXPECT_EQ(req_->flush(), 1u);
  EXPECT_EQ(std::memcmp(target_.data() + 100, source_.data(), 64), 0);
}

// --- refusals (each: submit false, nothing moves) ------------------------------------------

TEST_F(DirectWindowTest, refused__wrong_rkey) {
  publish_defaults();
  expect_write_refused(write64(0x00000705));  // another slot, nothing there
  expect_read_refused(0x00000705);
}

TEST_F(DirectWindowTest, refused__stale_generation_same_slot) {
  publish_defaults();
  expect_write_refused(write64((kKey & ~0xffu) | 0x06));
  expect_write_refused(write64((kKey & ~0xffu) | 0x04));
  expect_read_refused((kKey & ~0xffu) | 0x06);
  // The exact key still works.
  ASSERT_TRUE(req_->submit(write64()));
  EXPECT_EQ(req_->flush(), 1u);
  EXPECT_EQ(std::memcmp(target_.data() + 128, source_.data(), 64), 0);
}

TEST_F(DirectWindowTest, refused__region_republished_with_a_new_generation) {
  publish_defaults();
  resp_->retract_mr(kKey);
  resp_->publish_mr(mr((kKey & ~0xffu) | 0x06));  // slot reused by the next registration
  expect_write_refused(write64(kKey));
}

TEST_F(DirectWindowTest, refused__start_before_the_region) {
  publish_defaults();
  expect_write_refused(op(false, kIova - 1, source_.data(), 2));
  expect_write_refused(op(false, 0, source_.data(), 2));
}

TEST_F(DirectWindowTest, refused__end_past_the_region) {
  publish_defaults();
  expect_write_refused(op(false, kIova + kLen - 1, source_.data(), 2));
  expect_write_refused(op(false, kIova + kLen, source_.data(), 1));
  std::vector<uint8_t> local(2, 0xee);
  EXPECT_FALSE(req_->submit(op(true, kIova + kLen - 1, local.data(), 2)));
  EXPECT_EQ(req_->flush(), 0u);
  EXPECT_EQ(local[0], 0xee);
}

TEST_F(DirectWindowTest, refused__length_that_wraps_around) {
  publish_defaults();
  // remote_addr + length overflows to a value inside the region.
  const uint64_t huge = std::numeric_limits<uint64_t>::max() - 7;  // addr + huge == addr - 8
  expect_write_refused(op(false, kIova + 64, source_.data(), huge));
  expect_write_refused(op(false, kIova + 64, source_.data(), std::numeric_limits<uint64_t>::max()));
}

TEST_F(DirectWindowTest, refused__write_without_remote_write_on_the_region) {
  resp_->publish_mr(mr(kKey, engine::kLocalWrite | engine::kRemoteRead));
  resp_->publish_qp(qp());
  expect_write_refused(write64());
  // A read is allowed by the same region.
  std::vector<uint8_t> local(64, 0xee);
  ASSERT_TRUE(req_->submit(op(true, kIova, local.data(), 64)));
  EXPECT_EQ(req_->flush(), 1u);
  EXPECT_EQ(local[0], 0);
}

TEST_F(DirectWindowTest, refused__read_without_remote_read_on_the_region) {
  resp_->publish_mr(mr(kKey, engine::kLocalWrite | engine::kRemoteWrite));
  resp_->publish_qp(qp());
  expect_read_refused();
  ASSERT_TRUE(req_->submit(write64()));  // a write is allowed
  EXPECT_EQ(req_->flush(), 1u);
}

TEST_F(DirectWindowTest, refused__on_demand_region) {
  resp_->publish_mr(mr(kKey, kAllRemote | engine::kLocalWrite | engine::kOnDemand));
  resp_->publish_qp(qp());
  expect_write_refused(write64());
  expect_read_refused();
}

TEST_F(DirectWindowTest, refused__region_of_another_pd_than_the_qp) {
  resp_->publish_mr(mr(kKey, kAllRemote | engine::kLocalWrite, kPd + 1));
  resp_->publish_qp(qp());
  expect_write_refused(write64());
  expect_read_refused();
}

TEST_F(DirectWindowTest, refused__qp_not_responding) {
  resp_->publish_mr(mr());
  resp_->publish_qp(qp(kAllRemote, /*responds=*/false));  // INIT or ERR
  expect_write_refused(write64());
  expect_read_refused();
  resp_->publish_qp(qp(kAllRemote, true));  // RTR
  ASSERT_TRUE(req_->submit(write64()));
  EXPECT_EQ(req_->flush(), 1u);
  resp_->publish_qp(qp(kAllRemote, false));  // then ERR
  std::memset(target_.data(), 0, kLen);
  expect_write_refused(write64());
}

TEST_F(DirectWindowTest, refused__qp_connected_to_another_qpn) {
  resp_->publish_mr(mr());
  DirectQp q = qp();
  q.dest_qpn = kReqQpn + 1;
  resp_->publish_qp(q);
  expect_write_refused(write64());
  expect_read_refused();
}

TEST_F(DirectWindowTest, refused__qp_connected_to_another_address) {
  resp_->publish_mr(mr());
  DirectQp q = qp();
  q.dest_ip = address(203);
  resp_->publish_qp(q);
  expect_write_refused(write64());
  expect_read_refused();
  q.dest_ip = req_ip_;  // same address, but as IPv6
  q.ipv6 = true;
  resp_->publish_qp(q);
  expect_write_refused(write64());
}

TEST_F(DirectWindowTest, refused__request_for_another_qpn_than_published) {
  publish_defaults();
  DirectOp o = write64();
  o.dest_qpn = kRespQpn + DirectWindow::kQpSlots;  // the same slot, another QP number
  expect_write_refused(o);
  o = write64();
  o.dest_qpn = kRespQpn + 1;  // an empty slot
  expect_write_refused(o);
}

TEST_F(DirectWindowTest, refused__qp_access_flags_without_the_right) {
  resp_->publish_mr(mr());
  resp_->publish_qp(qp(engine::kRemoteRead));
  expect_write_refused(write64());
  resp_->publish_qp(qp(engine::kRemoteWrite));
  expect_read_refused();
  resp_->publish_qp(qp(0));
  expect_write_refused(write64());
  expect_read_refused();
}

TEST_F(DirectWindowTest, refused__retracted_region) {
  publish_defaults();
  ASSERT_TRUE(req_->submit(write64()));
  EXPECT_EQ(req_->flush(), 1u);
  std::memset(target_.data(), 0, kLen);
  resp_->retract_mr(kKey);
  expect_write_refused(write64());
  expect_read_refused();
}

TEST_F(DirectWindowTest, retract__of_another_key_in_the_slot_leaves_the_region) {
  publish_defaults();
  resp_->retract_mr((kKey & ~0xffu) | 0x09);  // same slot, not this region
  ASSERT_TRUE(req_->submit(write64()));
  EXPECT_EQ(req_->flush(), 1u);
  EXPECT_EQ(std::memcmp(target_.data() + 128, source_.data(), 64), 0);
}

TEST_F(DirectWindowTest, refused__retracted_qp) {
  publish_defaults();
  resp_->retract_qp(kRespQpn);
  expect_write_refused(write64());
  expect_read_refused();
}

TEST_F(DirectWindowTest, refused__no_table_at_the_address) {
  publish_defaults();
  DirectOp o = write64();
  o.dest_ip = address(204);  // no window there
  ASSERT_FALSE(file_exists(DirectWindow::path_for(false, o.dest_ip)));
  expect_write_refused(o);
  expect_write_refused(o);  // again (within the retry delay)
}

TEST_F(DirectWindowTest, refused__table_closed_by_its_owner) {
  publish_defaults();
  ASSERT_TRUE(req_->submit(write64()));  // the peer's table is mapped now
  EXPECT_EQ(req_->flush(), 1u);
  std::memset(target_.data(), 0, kLen);
  resp_.reset();  // the responder's device closes
  expect_write_refused(write64());
  expect_write_refused(write64());
  expect_read_refused();
}

TEST_F(DirectWindowTest, table_closed__a_new_owner_at_the_address_is_found_again) {
  publish_defaults();
  ASSERT_TRUE(req_->submit(write64()));
  EXPECT_EQ(req_->flush(), 1u);
  std::memset(target_.data(), 0, kLen);
  resp_.reset();
  expect_write_refused(write64());
  int err = 0;
  resp_.reset(DirectWindow::create(false, resp_ip_, err));
  ASSERT_NE(resp_, nullptr) << std::strerror(err);
  publish_defaults();
  // A missing table is looked for again after a while (100 ms), not on every request.
  bool ok = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!ok && std::chrono::steady_clock::now() < deadline) {
    ok = req_->submit(write64());
    if (!ok) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(ok);
  EXPECT_EQ(req_->flush(), 1u);
  EXPECT_EQ(std::memcmp(target_.data() + 128, source_.data(), 64), 0);
}

TEST_F(DirectWindowTest, refused__closed_while_a_copy_is_queued_then_resubmit_fails) {
  publish_defaults();
  ASSERT_TRUE(req_->submit(write64()));
  resp_->close_table();  // the owner closes with a copy of ours queued on its table
  // Nothing more goes to the closed table; the queued one is still the caller's to flush.
  std::vector<uint8_t> other(64, 0x3c);
  EXPECT_FALSE(req_->submit(op(false, kIova + 1024, other.data(), 64)));
  EXPECT_EQ(req_->queued(), 1u);
  EXPECT_EQ(req_->flush(), 1u);  // the memory is still there: it lands
  EXPECT_EQ(target_[1024], 0);
  EXPECT_FALSE(req_->submit(write64()));
}

// --- retraction waits for pinned copies ----------------------------------------------------

TEST_F(DirectWindowTest, retract_mr__waits_while_a_copy_is_queued) {
  publish_defaults();
  ASSERT_TRUE(req_->submit(op(false, kIova, source_.data(), 256)));
  std::atomic<bool> started{false}, returned{false};
  std::thread owner([&] {
    started.store(true);
    resp_->retract_mr(kKey);
    returned.store(true);
  });
  while (!started.load()) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(returned.load());  // pinned by the queued copy
  // Meanwhile nobody starts a new copy through the region being retracted.
  std::vector<uint8_t> other(16, 0x3c);
  EXPECT_FALSE(req_->submit(op(false, kIova + 1024, other.data(), 16)));
  EXPECT_EQ(req_->flush(), 1u);  // the copy completes, the pin drops
  owner.join();
  EXPECT_TRUE(returned.load());
  EXPECT_EQ(std::memcmp(target_.data(), source_.data(), 256), 0);
  EXPECT_EQ(target_[1024], 0);
  std::memset(target_.data(), 0, kLen);
  expect_write_refused(write64());  // and it is gone now
}

TEST_F(DirectWindowTest, publish_mr__over_a_pinned_slot_waits_too) {
  publish_defaults();
  ASSERT_TRUE(req_->submit(op(false, kIova, source_.data(), 256)));
  std::atomic<bool> started{false}, returned{false};
  std::thread owner([&] {
    started.store(true);
    resp_->publish_mr(mr(kKey, engine::kLocalWrite));  // e.g. rereg: rights dropped
    returned.store(true);
  });
  while (!started.load()) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(returned.load());
  EXPECT_EQ(req_->flush(), 1u);
  owner.join();
  EXPECT_TRUE(returned.load());
  EXPECT_EQ(std::memcmp(target_.data(), source_.data(), 256), 0);
  std::memset(target_.data(), 0, kLen);
  expect_write_refused(write64());  // the new rights apply
}

TEST_F(DirectWindowTest, destroy__with_copies_queued_releases_the_pins) {
  publish_defaults();
  ASSERT_TRUE(req_->submit(write64()));
  req_.reset();  // the requester's device goes away without flushing
  const auto t0 = std::chrono::steady_clock::now();
  resp_->retract_mr(kKey);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
  EXPECT_TRUE(target_untouched());
}

}  // namespace
}  // namespace vrnic::live
