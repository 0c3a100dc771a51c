// Where the `vrnic` executable finds its libraries and scripts: installed, or in a build tree.
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <string>

#include "tools/commands.h"

// Set by src/tools/CMakeLists.txt: the install directories, relative to the one vrnic is
// installed in (e.g. "../lib/x86_64-linux-gnu/vrnic" and "../share/vrnic").
#ifndef VRNIC_BIN_TO_PKGLIBDIR
#error "VRNIC_BIN_TO_PKGLIBDIR must be defined"
#endif
#ifndef VRNIC_BIN_TO_PKGDATADIR
#error "VRNIC_BIN_TO_PKGDATADIR must be defined"
#endif

namespace vrnic::tools {
namespace {

// The directory if it holds a readable FILE, resolved; "" otherwise.
std::string holding(const std::string& dir, const std::string& file) {
  char real[PATH_MAX];
  if (access((dir + "/" + file).c_str(), R_OK) == 0 && realpath(dir.c_str(), real)) return real;
  return "";
}

}  // namespace

std::string self_dir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string path(buf, static_cast<size_t>(n));
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::vector<std::string> lib_dir_candidates() {
  // An explicit VRNIC_LIB_DIR is the only place looked at: a wrong one is an error, not a
  // silent fallback to another build.
  if (const char* env = std::getenv("VRNIC_LIB_DIR"); env && *env) return {env};
  const std::string self = self_dir();
  // Installed (bin/ beside lib/<triplet>/vrnic/), then a build tree (bin/ beside lib/).
  return {self + "/" VRNIC_BIN_TO_PKGLIBDIR, self + "/../lib"};
}

std::string find_lib_dir() {
  for (const std::string& dir : lib_dir_candidates())
    if (std::string found = holding(dir, "libibverbs.so.1"); !found.empty()) return found;
  return "";
}

std::string find_data_file(const std::string& name) {
  const std::string self = self_dir();
  // Installed (share/vrnic/), then a build tree, which copies the scripts to the same place.
  for (const std::string& dir : {self + "/" VRNIC_BIN_TO_PKGDATADIR, self + "/../share/vrnic"})
    if (std::string found = holding(dir, name); !found.empty()) return found + "/" + name;
  return "";
}

}  // namespace vrnic::tools
