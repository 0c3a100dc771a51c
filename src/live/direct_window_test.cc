// DirectWindow in one process: the table file, copies both ways, and retraction of pinned slots.
#include "live/direct_window_test_support.h"

#include "live/counters_file.h"
#include "live/shm_test_dir.h"

namespace vrnic::live {
namespace {

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
  EXPECT_EQ(std::memcmp(&h->magic, "rnicndw2", 8), 0);  // as the header spells it
  EXPECT_EQ(h->pid, uint32_t(getpid()));
  EXPECT_EQ(h->start_ticks, process_start_ticks(getpid()));  // tells a reused pid
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

// The killed owner's table is moved into a directory of the test's own while the owner lives
// (ShmTestDir says why); the live tables are linked there too.
TEST_F(DirectWindowTest, remove_stale_tables__table_of_a_killed_owner_goes_live_ones_stay) {
  const ShmTestDir dir;
  ASSERT_FALSE(dir.path.empty());
  const Ip ip = address(204);
  const std::string left = DirectWindow::path_for(false, ip);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // creates its table and dies without closing it, as kill -9 would
    int err = 0;
    const bool ok = DirectWindow::create(false, ip, err) != nullptr &&
                    rename(left.c_str(), dir.file_of(left).c_str()) == 0;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_TRUE(file_exists(dir.file_of(left)));
  for (const std::string& live : {resp_->path(), req_->path()})
    ASSERT_EQ(link(live.c_str(), dir.file_of(live).c_str()), 0) << live;
  EXPECT_EQ(DirectWindow::remove_stale_tables(dir.path.c_str()), 1u);
  EXPECT_FALSE(file_exists(dir.file_of(left)));
  EXPECT_TRUE(file_exists(dir.file_of(resp_->path())));  // this process's own tables stay
  EXPECT_TRUE(file_exists(dir.file_of(req_->path())));
  EXPECT_EQ(DirectWindow::remove_stale_tables(dir.path.c_str()), 0u);
  for (const std::string& live : {resp_->path(), req_->path()}) unlink(dir.file_of(live).c_str());
}

// Keys are random names: two live regions may share a home slot. Both are found.
TEST_F(DirectWindowTest, publish_mr__keys_sharing_a_home_slot_are_both_published) {
  resp_->publish_qp(qp());
  const uint32_t other = kKey + (DirectWindow::kMrSlots << 8);  // same home, another key
  DirectMr second = mr(other);
  second.iova = kIova + 2 * kLen;  // its own range (over the same bytes here)
  resp_->publish_mr(mr());
  resp_->publish_mr(second);
  ASSERT_TRUE(req_->submit(op(false, kIova, source_.data(), 64)));
  ASSERT_TRUE(req_->submit(op(false, kIova + 2 * kLen + 64, source_.data() + 64, 64, other)));
  EXPECT_EQ(req_->flush(), 2u);
  EXPECT_EQ(std::memcmp(target_.data(), source_.data(), 128), 0);
  resp_->retract_mr(kKey);  // the first goes; the second is still found past its slot
  expect_read_refused(kKey);
  ASSERT_TRUE(req_->submit(op(false, kIova + 2 * kLen, source_.data() + 7, 1, other)));
  EXPECT_EQ(req_->flush(), 1u);
  EXPECT_EQ(target_[0], source_[7]);
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
