// The `vrnic` subcommands: each returns the process exit status (run and demo exec instead).
#pragma once
#include <string>
#include <vector>

namespace vrnic::tools {

struct RunOptions {
  std::string ip, pcap, faults, cc, rx_queues;
  bool stats = false, debug = false, direct = false, auth = false;
  bool no_sysfs = false;  // no sysfs view (also VRNIC_SYSFS=0)
  std::vector<std::string> command;  // PROGRAM ARGS...
};
int cmd_run(const RunOptions& o);

struct StatsOptions {
  int pid = 0;  // 0 = every running program
  bool all = false;  // zeros too
};
int cmd_stats(const StatsOptions& o);

struct DevinfoOptions {
  std::string ip;
};
int cmd_devinfo(const DevinfoOptions& o);

struct SimOptions {
  bool list = false;
  std::string scenario;  // a built-in name or a JSON file
  uint64_t seed = 0;
  bool seed_set = false;  // --seed given: it replaces the scenario's
  std::string out;        // directory for summary.json ("" = none)
  std::string pcap;       // hosts to capture into DIR/host-<i>.pcap: "all" or "0,3,5-7"
  std::string scheme;     // congestion control replacing the scenario's ("" = its own)
  double load = 0;        // every traffic entry's load (0 = the scenario's own)
  bool sweep = false;     // `sim sweep SPEC --out DIR`: scenario is the sweep file
};
int cmd_sim(const SimOptions& o);
// Runs this `vrnic sim run|sweep` again with glibc's malloc in transparent huge pages,
// unless GLIBC_TUNABLES names glibc.malloc.hugetlb already; returns only if it did not.
void sim_in_huge_pages(char** argv);

int cmd_demo(const std::vector<std::string>& args);

// Where this executable lives (from /proc/self/exe), without a trailing slash (paths.cc).
std::string self_dir();
// Where vrnic's libibverbs.so.1 is looked for, in order: $VRNIC_LIB_DIR alone if set, else
// the installed package's directory (<prefix>/lib/<triplet>/vrnic), then a build tree's lib/.
std::vector<std::string> lib_dir_candidates();
// The first of those holding a libibverbs.so.1, resolved; empty if none does.
std::string find_lib_dir();
// The path of one of vrnic's scripts (demo.py, sim-plots.py): in <prefix>/share/vrnic when
// installed, in the build tree's share/vrnic otherwise. Empty if there is none.
std::string find_data_file(const std::string& name);

}  // namespace vrnic::tools
