// CmdFile: the handle table of a command file, and the OFD-lock mark that ties a dup'd
// command fd back to it.
#include "abi/cmd_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <vector>

#include "live/identity.h"

namespace vrnic::abi {
namespace {

constexpr char kNull[] = "/dev/null";

std::mutex g_files_mu;
std::vector<std::weak_ptr<CmdFile>> g_files;  // files with a mark, for find()
std::atomic<uint32_t> g_next_mark{0};

// The node command fds are opened on: the sysfs view's device node where it exists (a bind
// of /dev/null), else /dev/null itself. Both have /dev/null's device number.
const char* node_path() {
  struct stat st;
  return stat(live::kUverbsNode, &st) == 0 && S_ISCHR(st.st_mode) ? live::kUverbsNode : kNull;
}

// A byte no other file of any process marks: the pid above a per-process sequence number.
off_t next_mark() {
  return (off_t(getpid()) << 24) | off_t(g_next_mark++ & 0xffffff);
}

struct flock one_byte(short type, off_t at) {
  struct flock l {};
  l.l_type = type;
  l.l_whence = SEEK_SET;
  l.l_start = at;
  l.l_len = 1;
  return l;
}

}  // namespace

bool CmdFile::device_number(dev_t& out) {
  struct stat st;
  if (stat(node_path(), &st) != 0 || !S_ISCHR(st.st_mode)) return false;
  out = st.st_rdev;
  return true;
}

std::shared_ptr<CmdFile> CmdFile::create(int& fd) {
  auto file = std::make_shared<CmdFile>();
  fd = open(node_path(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return file;
  // An OFD lock belongs to the open file description: every dup of fd (in this process, or
  // passed on) shares it and sees it as its own; any other description sees it as a conflict.
  const off_t mark = next_mark();
  struct flock l = one_byte(F_WRLCK, mark);
  if (fcntl(fd, F_OFD_SETLK, &l) != 0) return file;
  file->mark_ = mark;
  std::lock_guard g(g_files_mu);
  std::erase_if(g_files, [](const std::weak_ptr<CmdFile>& w) { return w.expired(); });
  g_files.push_back(file);
  return file;
}

std::shared_ptr<CmdFile> CmdFile::find(int fd) {
  std::lock_guard g(g_files_mu);
  for (const auto& w : g_files) {
    std::shared_ptr<CmdFile> file = w.lock();
    if (!file) continue;
    struct flock l = one_byte(F_WRLCK, file->mark_);
    // No conflict with the file's own lock: fd is a descriptor of the same description.
    if (fcntl(fd, F_OFD_GETLK, &l) == 0 && l.l_type == F_UNLCK) return file;
  }
  return nullptr;
}

uint32_t CmdFile::add(Named::Kind kind, void* object, DmBlock* dm) {
  std::lock_guard g(mu_);
  uint32_t handle = next_;
  if (!free_.empty()) {
    handle = *free_.begin();
    free_.erase(free_.begin());
  } else {
    ++next_;
  }
  handles_[handle] = Named{kind, object, dm};
  return handle;
}

void CmdFile::remove(uint32_t handle) {
  std::lock_guard g(mu_);
  if (handles_.erase(handle)) free_.insert(handle);
}

int CmdFile::lookup(uint32_t handle, Named::Kind kind, Named& out) const {
  std::lock_guard g(mu_);
  auto it = handles_.find(handle);
  if (it == handles_.end()) return ENOENT;
  if (it->second.kind != kind) return EINVAL;
  out = it->second;
  return 0;
}

bool CmdFile::names(uint32_t handle, const void* object) const {
  std::lock_guard g(mu_);
  auto it = handles_.find(handle);
  return it != handles_.end() && it->second.object == object;
}

}  // namespace vrnic::abi
