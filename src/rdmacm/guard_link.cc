// The process's link to vrnic-guard: started on the first established connection, fed keep/drop records.
#include "rdmacm/guard_link.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cm/guard_record.h"

extern char** environ;

namespace vrnic::rdmacm {
namespace {

struct Exec {
  const char* path;
  char* const* argv;
  int report;  // a pipe's write end (close-on-exec): the errno of a failed exec
};

// A child in this process's memory until it exits, with every signal blocked: it makes a
// process of its own (a fork, without glibc's fork handlers) for the guard to exec in, and
// leaves. Only execve, write and _exit run in either.
int start_detached(void* arg) {
  auto* e = static_cast<Exec*>(arg);
  const long pid = syscall(SYS_clone, SIGCHLD, nullptr, nullptr, nullptr, nullptr);
  if (pid == 0) {
    execve(e->path, e->argv, environ);
    const int err = errno;
    ssize_t ignored = write(e->report, &err, sizeof err);
    (void)ignored;
    _exit(127);
  }
  _exit(pid < 0 ? 1 : 0);
}

// Starts `path` detached, its end and its starter's end sending the program no signal. The
// starter is a clone with no exit signal (reaped with __WCLONE); the guard, its child, is
// an orphan from then on. posix_spawn's child ends with a SIGCHLD, and a SIGCHLD sent to a
// vrnic thread (every signal blocked there) is not discarded as an ignored signal is but
// delivered to a program thread, whose epoll_wait or poll then fails with EINTR (libfabric's
// fi_eq_sread gave up on it while connecting). 0 or an errno.
int spawn_quietly(const char* path, char* const* argv) {
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) return errno;
  std::vector<char> stack(64 * 1024);
  Exec e{path, argv, report[1]};
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  const pid_t pid = clone(start_detached, stack.data() + stack.size(), CLONE_VM | CLONE_VFORK, &e);
  int err = pid < 0 ? errno : 0;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  close(report[1]);
  int status = 0;
  while (pid > 0 && waitpid(pid, &status, __WCLONE) < 0 && errno == EINTR) {
  }
  if (err == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) err = EAGAIN;  // no fork
  int exec_err = 0;
  ssize_t n;
  while ((n = read(report[0], &exec_err, sizeof exec_err)) < 0 && errno == EINTR) {
  }
  if (err == 0 && n == sizeof exec_err) err = exec_err;
  close(report[0]);
  return err;
}

}  // namespace

std::unique_ptr<GuardLink> GuardLink::from_env() {
  const char* p = std::getenv("VRNIC_CM_GUARD");
  if (!p || !*p || std::strcmp(p, "0") == 0) return nullptr;
  return std::make_unique<GuardLink>(p);
}

GuardLink::~GuardLink() {
  if (fd_ >= 0) close(fd_);
}

// The guard gets one end of a stream socket pair (as --fd N; a pipe would raise SIGPIPE here
// if the guard were gone); this process keeps the other, closed on exec, so that only this
// process's end of life ends the stream. The guard starts detached (spawn_quietly), so the
// program never sees an extra child, nor a signal.
bool GuardLink::start() {
  if (fd_ >= 0) return true;
  if (failed_) return false;
  int p[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) != 0) {
    failed_ = true;
    return false;
  }
  fcntl(p[0], F_SETFD, 0);  // the guard's end crosses the exec
  const std::string fd_arg = std::to_string(p[0]);
  char* argv[] = {const_cast<char*>(program_.c_str()), const_cast<char*>("--fd"),
                  const_cast<char*>(fd_arg.c_str()), nullptr};
  const int err = spawn_quietly(program_.c_str(), argv);
  close(p[0]);
  if (err != 0) {
    close(p[1]);
    failed_ = true;
    std::fprintf(stderr,
                 "vrnic librdmacm: cannot start the CM guard %s (%s): if this process is "
                 "killed, its peers are not told (VRNIC_CM_GUARD=0: no guard, no message)\n",
                 program_.c_str(), std::strerror(err));
    return false;
  }
  fd_ = p[1];
  return true;
}

void GuardLink::write_record(const uint8_t* data, size_t n) {
  while (n > 0) {
    const ssize_t w = send(fd_, data, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {  // the guard is gone: nothing more can be kept
      close(fd_);
      fd_ = -1;
      failed_ = true;
      return;
    }
    data += w;
    n -= size_t(w);
  }
}

void GuardLink::keep(uint32_t conn, const cm::Endpoint& from, const cm::Endpoint& to,
                     std::span<const uint8_t, wire::cm::kMadSize> dreq) {
  if (!start()) return;
  cm::GuardRecord r;
  r.op = cm::GuardRecord::kKeep;
  r.conn = conn;
  r.from = from;
  r.to = to;
  std::memcpy(r.mad.data(), dreq.data(), dreq.size());
  const auto bytes = r.encode();
  write_record(bytes.data(), bytes.size());
  kept_.insert(conn);
}

void GuardLink::drop(uint32_t conn) {
  if (fd_ < 0 || kept_.erase(conn) == 0) return;
  cm::GuardRecord r;
  r.op = cm::GuardRecord::kDrop;
  r.conn = conn;
  const auto bytes = r.encode();
  write_record(bytes.data(), bytes.size());
}

}  // namespace vrnic::rdmacm
