// Tests of the shared counters file: what a writer maps, a reader in another process sees.
#include "live/counters_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "live/shm_test_dir.h"

namespace vrnic::live {
namespace {

TEST(CountersFile, create__reader_sees_header_and_live_values) {
  CountersFile f;
  ASSERT_EQ(f.create("vrnictest", "127.0.0.9", "prog"), 0);
  EXPECT_EQ(f.path(), counters_path(getpid(), "vrnictest"));
  f.counters()->tx_packets = 12;
  f.counters()->rx_icrc_errors = 3;

  CountersSnapshot s;
  ASSERT_TRUE(read_counters_file(f.path(), s));
  EXPECT_EQ(s.pid, getpid());
  EXPECT_EQ(s.device, "vrnictest");
  EXPECT_EQ(s.ip, "127.0.0.9");
  EXPECT_EQ(s.program, "prog");
  EXPECT_GT(s.start_realtime_ns, 0u);
  ASSERT_EQ(s.counters.size(), sizeof(engine::Counters) / 8);
  EXPECT_EQ(s.counters.front().first, "tx_packets");
  EXPECT_EQ(s.counters.front().second, 12u);
  bool found = false;
  for (auto& [name, value] : s.counters)
    if (name == "rx_icrc_errors") found = value == 3;
  EXPECT_TRUE(found);

  // Updates after the reader's first look are visible to the next one.
  f.counters()->tx_packets = 13;
  ASSERT_TRUE(read_counters_file(f.path(), s));
  EXPECT_EQ(s.counters.front().second, 13u);
}

// A layer above (the connection manager) adds its counters: a reader sees their names after
// the device's, with the values set; --stats' text lists the nonzero ones.
TEST(CountersFile, add_counters__names_after_the_devices_with_their_values) {
  CountersFile f;
  ASSERT_EQ(f.create("vrnicadded", "127.0.0.15", "prog"), 0);
  const char* const names[] = {"cm_tx_req", "cm_rx_rep", "cm_parked"};
  ASSERT_EQ(f.add_counters(names), 0);
  const uint64_t values[] = {4, 0, 9};
  f.set_added(0, values);
  f.counters()->tx_packets = 5;

  CountersSnapshot s;
  ASSERT_TRUE(read_counters_file(f.path(), s));
  const size_t device = sizeof(engine::Counters) / 8;
  ASSERT_EQ(s.counters.size(), device + 3);
  EXPECT_EQ(s.counters.front(), (std::pair<std::string, uint64_t>{"tx_packets", 5}));
  EXPECT_EQ(s.counters[device], (std::pair<std::string, uint64_t>{"cm_tx_req", 4}));
  EXPECT_EQ(s.counters[device + 1], (std::pair<std::string, uint64_t>{"cm_rx_rep", 0}));
  EXPECT_EQ(s.counters[device + 2], (std::pair<std::string, uint64_t>{"cm_parked", 9}));
  EXPECT_EQ(f.format_added_nonzero(), "cm_tx_req 4\ncm_parked 9\n");

  // A second layer's counters follow; past the room reserved, none is added.
  const char* const more[] = {"x_one"};
  ASSERT_EQ(f.add_counters(more), 3);
  ASSERT_TRUE(read_counters_file(f.path(), s));
  ASSERT_EQ(s.counters.size(), device + 4);
  EXPECT_EQ(s.counters.back().first, "x_one");
  std::vector<const char*> too_many(kCountersAdded, "x");
  EXPECT_EQ(f.add_counters(too_many), -1);
  ASSERT_TRUE(read_counters_file(f.path(), s));
  EXPECT_EQ(s.counters.size(), device + 4);
}

// Without a file (the device counts privately) the added counters still show in --stats.
TEST(CountersFile, add_counters__without_a_file__counted_privately) {
  CountersFile f;
  const char* const names[] = {"cm_tx_req", "cm_timeouts"};
  ASSERT_EQ(f.add_counters(names), 0);
  const uint64_t values[] = {0, 2};
  f.set_added(0, values);
  EXPECT_EQ(f.format_added_nonzero(), "cm_timeouts 2\n");
}

TEST(CountersFile, remove__unlinks) {
  CountersFile f;
  ASSERT_EQ(f.create("vrnictest2", "::1", "prog"), 0);
  std::string path = f.path();
  EXPECT_EQ(access(path.c_str(), F_OK), 0);
  f.remove();
  EXPECT_NE(access(path.c_str(), F_OK), 0);
  EXPECT_EQ(f.counters(), nullptr);
}

// A file left as a killed program leaves it: the writer (a forked child) created it, moved it
// into `dir` and exited. Returns its path there.
std::string leave_file_of_dead_child(const ShmTestDir& dir, const char* device) {
  pid_t child = fork();
  if (child == 0) {
    auto* f = new CountersFile();
    const bool ok = f->create(device, "127.0.0.15", "dead") == 0 &&
                    rename(f->path().c_str(), dir.file_of(f->path()).c_str()) == 0;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  return dir.file_of(counters_path(child, device));
}

// A live file of this process seen in `dir` too (a second name for it).
std::string link_into(const ShmTestDir& dir, const CountersFile& f) {
  const std::string there = dir.file_of(f.path());
  EXPECT_EQ(link(f.path().c_str(), there.c_str()), 0) << there;
  return there;
}

TEST(ReadAllCounters, stale_file_of_a_dead_pid__is_skipped) {
  ShmTestDir dir;
  ASSERT_FALSE(dir.path.empty());
  const std::string stale = leave_file_of_dead_child(dir, "vrnicstale");
  ASSERT_EQ(access(stale.c_str(), F_OK), 0);

  CountersFile mine;
  ASSERT_EQ(mine.create("vrnicalive", "127.0.0.11", "alive"), 0);
  const std::string mine_there = link_into(dir, mine);
  bool saw_mine = false, saw_stale = false;
  for (const auto& s : read_all_counters(0, dir.path.c_str())) {
    saw_mine |= s.path == mine_there;
    saw_stale |= s.path == stale;
  }
  EXPECT_TRUE(saw_mine);
  EXPECT_FALSE(saw_stale);
  EXPECT_EQ(read_all_counters(getpid(), dir.path.c_str()).size(), 1u);
  EXPECT_EQ(read_all_counters(getpid()).size(), 1u);  // kCountersDir: this process's one file
  unlink(stale.c_str());
  unlink(mine_there.c_str());
}

TEST(ReadAllCounters, pid_reused_by_a_later_process__file_is_skipped) {
  CountersFile mine;
  ASSERT_EQ(mine.create("vrnicreused", "127.0.0.12", "reused"), 0);
  ASSERT_EQ(read_all_counters(getpid()).size(), 1u);
  // Make the file look written by an earlier process that had this pid.
  uint64_t earlier = process_start_ticks(getpid());
  ASSERT_GT(earlier, 1u);
  --earlier;
  int fd = open(mine.path().c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(pwrite(fd, &earlier, sizeof earlier, offsetof(CountersFileHeader, proc_start_ticks)),
            static_cast<ssize_t>(sizeof earlier));
  close(fd);
  EXPECT_TRUE(read_all_counters(getpid()).empty());
}

TEST(CountersFile, create__file_is_the_owners_only) {
  CountersFile f;
  ASSERT_EQ(f.create("vrnicmode", "127.0.0.14", "mode"), 0);
  struct stat st;
  ASSERT_EQ(stat(f.path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, geteuid());
}

TEST(RemoveStaleCountersFiles, dead_writer__file_removed_live_ones_kept) {
  ShmTestDir dir;
  ASSERT_FALSE(dir.path.empty());
  const std::string stale = leave_file_of_dead_child(dir, "vrnicgone");
  ASSERT_EQ(access(stale.c_str(), F_OK), 0);
  CountersFile mine;
  ASSERT_EQ(mine.create("vrnichere", "127.0.0.16", "here"), 0);
  const std::string mine_there = link_into(dir, mine);
  EXPECT_EQ(remove_stale_counters_files(dir.path.c_str()), 1u);
  EXPECT_NE(access(stale.c_str(), F_OK), 0);
  EXPECT_EQ(access(mine_there.c_str(), F_OK), 0);  // its writer (this process) lives
  EXPECT_EQ(remove_stale_counters_files(dir.path.c_str()), 0u);
  unlink(mine_there.c_str());
}

TEST(RemoveStaleCountersFiles, pid_reused__file_removed) {
  // The file's header says an earlier process with this pid wrote it: moved into a directory
  // of the test's own first, so that no other process's device removes it before the test.
  ShmTestDir dir;
  ASSERT_FALSE(dir.path.empty());
  CountersFile old;
  ASSERT_EQ(old.create("vrnicreuse", "127.0.0.17", "old"), 0);
  const std::string there = dir.file_of(old.path());
  ASSERT_EQ(rename(old.path().c_str(), there.c_str()), 0);
  const uint64_t earlier = process_start_ticks(getpid()) - 1;
  int fd = open(there.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(pwrite(fd, &earlier, sizeof earlier, offsetof(CountersFileHeader, proc_start_ticks)),
            static_cast<ssize_t>(sizeof earlier));
  close(fd);
  EXPECT_EQ(remove_stale_counters_files(dir.path.c_str()), 1u);
  EXPECT_NE(access(there.c_str(), F_OK), 0);
}

TEST(RemoveStaleCountersFiles, file_being_created_by_a_live_writer__kept) {
  // No magic yet: the writer (this process) is still filling the header in.
  const std::string path = counters_path(getpid(), "vrnichalf");
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  close(fd);
  remove_stale_counters_files();
  EXPECT_EQ(access(path.c_str(), F_OK), 0);
  unlink(path.c_str());
}

TEST(RemoveStaleCountersFiles, other_names__untouched) {
  const std::string path = std::string(kCountersDir) + "/vrnic.x" + std::to_string(getpid());
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  close(fd);
  remove_stale_counters_files();
  EXPECT_EQ(access(path.c_str(), F_OK), 0);
  unlink(path.c_str());
}

TEST(ProcessStartTicks, own_pid__matches_file_header_and_dead_pid__zero) {
  CountersFile mine;
  ASSERT_EQ(mine.create("vrnicticks", "127.0.0.13", "ticks"), 0);
  CountersSnapshot s;
  ASSERT_TRUE(read_counters_file(mine.path(), s));
  EXPECT_EQ(s.proc_start_ticks, process_start_ticks(getpid()));
  EXPECT_GT(s.proc_start_ticks, 0u);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  EXPECT_EQ(process_start_ticks(child), 0u);
}

TEST(CountersFile, rates__published_and_read_back_with_their_text) {
  CountersFile f;
  ASSERT_EQ(f.create("vrnicrates", "127.0.0.14", "rates"), 0);
  CountersSnapshot s;
  ASSERT_TRUE(read_counters_file(f.path(), s));
  EXPECT_TRUE(s.rates.empty());
  std::vector<engine::QpRate> rates = {{0x13, true, 9876.5e6, 12000e6, 0.03125},
                                       {0x14, false, 25000e6, 25000e6, 0}};
  f.set_rates(rates);
  ASSERT_TRUE(read_counters_file(f.path(), s));
  ASSERT_EQ(s.rates.size(), 2u);
  EXPECT_EQ(s.rates[0].qpn, 0x13u);
  EXPECT_EQ(s.rates[0].limited, 1u);
  EXPECT_EQ(s.rates[0].rate_bps, 9876.5e6);
  EXPECT_EQ(s.rates[1].limited, 0u);
  EXPECT_EQ(format_rates(s.rates),
            "qp 0x000013 rate 9876.5 Mb/s target 12000.0 Mb/s alpha 0.0312\n"
            "qp 0x000014 rate 25000.0 Mb/s target 25000.0 Mb/s alpha 0.0000 (released)\n");
  // More QPs than the table holds: the first kCountersRates are shown.
  rates.assign(100, {7, true, 1e9, 1e9, 0.5});
  f.set_rates(rates);
  ASSERT_TRUE(read_counters_file(f.path(), s));
  EXPECT_EQ(s.rates.size(), kCountersRates);
}

TEST(FormatNonzero, format_nonzero__prints_only_nonzero_in_order) {
  engine::Counters c;
  c.rx_packets = 5;
  c.tx_packets = 7;
  EXPECT_EQ(format_nonzero(c), "tx_packets 7\nrx_packets 5\n");
}

}  // namespace
}  // namespace vrnic::live
