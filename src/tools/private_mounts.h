// A private mount namespace for `vrnic run`: entering it, writable directories grafted into
// read-only trees (/sys/class, /dev), and a character device bound onto a file.
#pragma once
#include <string>
#include <vector>

namespace vrnic::tools {

class PrivateMounts {
 public:
  // Unshares the mount namespace (and, unless root, the user namespace, mapping the caller's
  // uid and gid to themselves) and makes every mount private. False with `why` on failure.
  bool enter(std::string& why);
  // Makes each of parent/NAME an empty directory this process may write: a tmpfs over it if it
  // exists (all of them), else `parent` becomes a tmpfs holding every other entry it had (each
  // bound back, so the same files and mounts show) and the NAMEs as new directories.
  bool graft(const std::string& parent, const std::vector<std::string>& names, std::string& why);
  // Creates the regular file `path` and binds the node `device` (a char device) onto it.
  bool bind_node(const std::string& device, const std::string& path, std::string& why);
  // Detaches every mount this object made (after a failure part way).
  void undo();

 private:
  bool mount_tmpfs(const std::string& where, std::string& why);
  // `parent` as a tmpfs with its entries (but `skip`) bound back or, symlinks, re-created.
  bool rebuild(const std::string& parent, const std::vector<std::string>& skip, std::string& why);

  std::vector<std::string> mounted_;  // tmpfs mounts, in the order made
};

}  // namespace vrnic::tools
