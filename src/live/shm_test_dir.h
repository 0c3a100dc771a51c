// ShmTestDir: a directory of a test's own under /dev/shm for the files of dead writers
// (counters files, direct tables). Every device another process opens meanwhile (other tests
// run in parallel) removes the stale files of /dev/shm, so one left there may be gone before
// the test looks; writers create their files in /dev/shm and move them here while they live.
#pragma once
#include <stdlib.h>
#include <unistd.h>

#include <string>

namespace vrnic::live {

struct ShmTestDir {
  std::string path;  // empty if it could not be made
  ShmTestDir() {
    char name[] = "/dev/shm/vrnic-test-XXXXXX";  // neither a vrnic.<pid>. nor a vrnic.direct. name
    path = mkdtemp(name) ? name : "";
  }
  ~ShmTestDir() {
    if (!path.empty()) rmdir(path.c_str());
  }
  ShmTestDir(const ShmTestDir&) = delete;
  ShmTestDir& operator=(const ShmTestDir&) = delete;
  // The name a file of /dev/shm has when moved or linked here.
  std::string file_of(const std::string& shm_file) const {
    return path + shm_file.substr(shm_file.rfind('/'));
  }
};

}  // namespace vrnic::live
