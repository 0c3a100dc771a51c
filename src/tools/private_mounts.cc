// PrivateMounts: the namespace `vrnic run` builds its sysfs view in (docs/live.md).
#include "tools/private_mounts.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace vrnic::tools {
namespace {

bool fail(std::string& why, const std::string& what) {
  why = what + ": " + std::strerror(errno);
  return false;
}

bool write_proc(const char* file, const std::string& text) {
  int fd = open(file, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = write(fd, text.data(), text.size()) == ssize_t(text.size());
  close(fd);
  return ok;
}

}  // namespace

bool PrivateMounts::enter(std::string& why) {
  const uid_t uid = geteuid();
  const gid_t gid = getegid();
  // Root keeps its own user namespace: in a new one it would lose CAP_NET_ADMIN over the
  // network namespace (SO_RCVBUFFORCE, docs/live.md).
  if (unshare(uid == 0 ? CLONE_NEWNS : CLONE_NEWUSER | CLONE_NEWNS) != 0)
    return fail(why, "unshare");
  if (uid != 0) {
    // user_namespaces(7): an unprivileged gid_map needs setgroups denied first. The same ids
    // inside, so a program that refuses to run as root still runs.
    if (!write_proc("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1"))
      return fail(why, "uid_map");
    if (!write_proc("/proc/self/setgroups", "deny")) return fail(why, "setgroups");
    if (!write_proc("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1"))
      return fail(why, "gid_map");
  }
  // Nothing mounted here may propagate back to the parent namespace.
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return fail(why, "making / private");
  return true;
}

bool PrivateMounts::mount_tmpfs(const std::string& where, std::string& why) {
  if (mount("vrnic", where.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=755") != 0)
    return fail(why, "tmpfs on " + where);
  mounted_.push_back(where);
  return true;
}

bool PrivateMounts::rebuild(const std::string& parent, const std::vector<std::string>& skip,
                            std::string& why) {
  int dir_fd = open(parent.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return fail(why, parent);
  DIR* dir = opendir(parent.c_str());
  if (!dir) {
    close(dir_fd);
    return fail(why, parent);
  }
  struct Entry {
    std::string name;
    struct stat st;
  };
  std::vector<Entry> entries;
  while (dirent* d = readdir(dir)) {
    Entry e{d->d_name, {}};
    const bool skipped = std::find(skip.begin(), skip.end(), e.name) != skip.end();
    if (e.name == "." || e.name == ".." || skipped) continue;
    if (fstatat(dir_fd, e.name.c_str(), &e.st, AT_SYMLINK_NOFOLLOW) == 0) entries.push_back(e);
  }
  closedir(dir);
  bool ok = mount_tmpfs(parent, why);
  // The hidden original stays reachable through the descriptor.
  const std::string hidden = "/proc/self/fd/" + std::to_string(dir_fd) + "/";
  for (size_t i = 0; ok && i < entries.size(); ++i) {
    const Entry& e = entries[i];
    const std::string dst = parent + "/" + e.name;
    if (S_ISLNK(e.st.st_mode)) {
      char target[4096];
      ssize_t n = readlinkat(dir_fd, e.name.c_str(), target, sizeof target - 1);
      ok = n >= 0 && symlink(std::string(target, size_t(n)).c_str(), dst.c_str()) == 0;
    } else if (S_ISDIR(e.st.st_mode)) {
      ok = mkdir(dst.c_str(), 0755) == 0;
    } else {
      int fd = open(dst.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
      ok = fd >= 0 && close(fd) == 0;
    }
    if (ok && !S_ISLNK(e.st.st_mode))
      ok = mount((hidden + e.name).c_str(), dst.c_str(), nullptr, MS_BIND | MS_REC, nullptr) == 0;
    if (!ok) fail(why, "re-creating " + dst);
  }
  close(dir_fd);
  return ok;
}

bool PrivateMounts::graft(const std::string& parent, const std::vector<std::string>& names,
                          std::string& why) {
  bool all_exist = true;
  for (const std::string& name : names) {
    struct stat st;
    all_exist = all_exist && stat((parent + "/" + name).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  }
  if (all_exist) {
    for (const std::string& name : names)
      if (!mount_tmpfs(parent + "/" + name, why)) return false;
    return true;
  }
  // A directory cannot be created in sysfs or devtmpfs without privilege: the parent is
  // rebuilt, leaving out the NAMEs, which become fresh directories of its tmpfs.
  if (!rebuild(parent, names, why)) return false;
  for (const std::string& name : names)
    if (mkdir((parent + "/" + name).c_str(), 0755) != 0) return fail(why, parent + "/" + name);
  return true;
}

bool PrivateMounts::bind_node(const std::string& device, const std::string& path,
                              std::string& why) {
  int fd = open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) return fail(why, path);
  close(fd);
  // mknod needs CAP_MKNOD in the initial user namespace; a bind of an existing node does not.
  if (mount(device.c_str(), path.c_str(), nullptr, MS_BIND, nullptr) != 0)
    return fail(why, "binding " + device + " on " + path);
  return true;
}

void PrivateMounts::undo() {
  for (auto it = mounted_.rbegin(); it != mounted_.rend(); ++it) umount2(it->c_str(), MNT_DETACH);
  mounted_.clear();
}

}  // namespace vrnic::tools
