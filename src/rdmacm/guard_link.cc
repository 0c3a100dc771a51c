// The process's link to vrnic-guard: started on the first established connection, fed keep/drop records.
#include "rdmacm/guard_link.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cm/guard_record.h"

extern char** environ;

namespace vrnic::rdmacm {

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
// process's end of life ends the stream. The guard's first process exits at once (it
// detaches) and is reaped here, so the program never sees an extra child.
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
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addclose(&fa, p[1]);
  pid_t pid = 0;
  const int err = posix_spawn(&pid, program_.c_str(), &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
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
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
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
