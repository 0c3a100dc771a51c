// `vrnic run`: execs a program with vrnic's libibverbs.so.1 first on its library path and the
// device's sysfs view mounted (sysfs_view.h).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "live/address.h"
#include "tools/commands.h"
#include "tools/sysfs_view.h"

namespace vrnic::tools {

namespace {

bool sysfs_view_wanted(const RunOptions& o) {
  const char* env = std::getenv("VRNIC_SYSFS");
  return !o.no_sysfs && !(env && std::strcmp(env, "0") == 0);
}

// Reserves the program's address (so the view shows the GID its device will have) and mounts
// the view; where that is not possible the program still runs, verbs only.
void prepare_sysfs_view() {
  transport::IpAddress address;
  std::string why;
  int err = 0;
  const char* ip = std::getenv("VRNIC_IP");
  if (ip && *ip) {
    if (!transport::IpAddress::parse(ip, address)) return;  // the device will say why
  } else {
    int fd = live::reserve_device_address(address, err, why);
    if (fd < 0) return;  // no address: the device will fail to open with this same message
    // Not held across exec: a program that forks before it opens the device (fio's jobs, a
    // shell's children) could not take it then. The first process to open a device does.
    close(fd);
    setenv(live::kReservationEnv, address.to_string().c_str(), 1);
  }
  if (!mount_sysfs_view(address, why))
    std::fprintf(stderr,
                 "vrnic run: no sysfs view of vrnic0 (%s): middleware such as UCX will not find "
                 "the device, verbs programs are not affected (--no-sysfs: no view, no message)\n",
                 why.c_str());
}

}  // namespace

int cmd_run(const RunOptions& o) {
  if (o.command.empty()) {
    std::fprintf(stderr, "vrnic run: no program given (vrnic run [options] -- PROGRAM ARGS...)\n");
    return 2;
  }
  std::string lib = find_lib_dir();
  if (lib.empty()) {
    std::string looked;
    for (const std::string& dir : lib_dir_candidates())
      looked += (looked.empty() ? "" : ", ") + dir;
    std::fprintf(stderr,
                 "vrnic run: vrnic's libibverbs.so.1 not found in %s (build the vrnic_verbs "
                 "target, reinstall the vrnic package, or set VRNIC_LIB_DIR)\n",
                 looked.c_str());
    return 127;
  }
  // Dynamic loading follows LD_LIBRARY_PATH before the system directories; Debian's RDMA
  // programs carry no RUNPATH, so they and the libraries they load (librdmacm, libmlx5...)
  // bind to vrnic's libibverbs.so.1.
  std::string path = lib;
  if (const char* old = std::getenv("LD_LIBRARY_PATH"); old && *old) path += ":" + std::string(old);
  setenv("LD_LIBRARY_PATH", path.c_str(), 1);
  if (!o.ip.empty()) setenv("VRNIC_IP", o.ip.c_str(), 1);
  if (!o.pcap.empty()) setenv("VRNIC_PCAP", o.pcap.c_str(), 1);
  if (!o.faults.empty()) setenv("VRNIC_FAULTS", o.faults.c_str(), 1);
  if (!o.cc.empty()) setenv("VRNIC_CC", o.cc.c_str(), 1);
  if (!o.rx_queues.empty()) setenv("VRNIC_RX_QUEUES", o.rx_queues.c_str(), 1);
  if (o.stats) setenv("VRNIC_STATS", "1", 1);
  if (o.direct) setenv("VRNIC_DIRECT", "1", 1);
  if (o.auth) setenv("VRNIC_AUTH", "1", 1);
  if (o.debug) setenv("VRNIC_DEBUG", "1", 1);
  // The CM guard beside the libraries: it ends the program's connections should it be killed.
  if (const std::string guard = lib + "/vrnic-guard";
      !std::getenv("VRNIC_CM_GUARD") && access(guard.c_str(), X_OK) == 0)
    setenv("VRNIC_CM_GUARD", guard.c_str(), 1);
  if (sysfs_view_wanted(o)) prepare_sysfs_view();

  std::vector<char*> argv;
  for (const std::string& a : o.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  int e = errno;
  std::fprintf(stderr, "vrnic run: %s: %s\n", argv[0], std::strerror(e));
  return e == ENOENT ? 127 : 126;  // as a shell reports it
}

}  // namespace vrnic::tools
