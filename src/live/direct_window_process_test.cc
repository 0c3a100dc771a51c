// DirectWindow with another process: copies through a child's table, and a child that dies.
#include "live/direct_window_test_support.h"

namespace vrnic::live {
namespace {

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

}  // namespace
}  // namespace vrnic::live
