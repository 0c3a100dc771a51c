// `vrnic sim`: list the built-in scenarios; run one (or a JSON file) in virtual time and
// print its summary, optionally into DIR/summary.json; sweep a grid of them under MPI
// (vrnic-sim-sweep) (docs/sim.md).
#include <spawn.h>
#include <unistd.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "sim/simulator.h"
#include "sim/sweep.h"
#include "tools/commands.h"

namespace vrnic::tools {
namespace {

void print_summary(const sim::Summary& s) {
  std::printf("%s: %s, seed %llu, %.3f ms simulated, %llu events in %.2f s (%.0f events/s)\n",
              s.scenario.c_str(), s.scheme.c_str(), (unsigned long long)s.seed, s.sim_time_ns / 1e6,
              (unsigned long long)s.events, s.wall_s, s.wall_s > 0 ? s.events / s.wall_s : 0.0);
  std::printf("flows %llu/%llu completed (%llu failed); drops %llu, PFC pauses %llu, "
              "ECN marks %llu, CNPs %llu, retransmitted %llu\n",
              (unsigned long long)s.flows_completed, (unsigned long long)s.flows_total,
              (unsigned long long)s.flows_failed, (unsigned long long)s.drops,
              (unsigned long long)s.pfc_pause_frames, (unsigned long long)s.ecn_marked,
              (unsigned long long)s.cnps_sent, (unsigned long long)s.retransmitted_packets);
  if (s.jain_fairness >= 0) {
    std::printf("long flows (second half):");
    for (double g : s.long_flow_gbps) std::printf(" %.2f", g);
    std::printf(" Gb/s, Jain fairness %.4f\n", s.jain_fairness);
  }
  std::printf("switch queue: max %llu B, bottleneck mean %llu B (at dequeue, from stats_from_ns)\n",
              (unsigned long long)s.queue_max_bytes,
              (unsigned long long)s.bottleneck_queue_mean_bytes);
  for (const std::string& bucket : sim::size_buckets()) {
    const auto it = s.fct_slowdown.find(bucket);
    if (it == s.fct_slowdown.end()) continue;
    const sim::Percentiles& p = it->second;
    std::printf("FCT slowdown %-10s n=%-4llu p50 %.2f  p95 %.2f  p99 %.2f\n", bucket.c_str(),
                (unsigned long long)p.count, p.p50, p.p95, p.p99);
  }
}

// One line on stderr, redrawn: how much of the scenario's duration is simulated (a run may
// end sooner, when every flow has), the events so far and their rate.
void progress_bar(uint64_t now, uint64_t duration, uint64_t events,
                  std::chrono::duration<double> wall) {
  constexpr int kWidth = 30;
  const double done = duration > 0 ? std::min(1.0, double(now) / double(duration)) : 0.0;
  const int filled = static_cast<int>(done * kWidth);
  std::fprintf(stderr, "\r[%.*s%*s] %5.1f%% %.3f of %.3f ms simulated, %llu events, %.2f M/s ",
               filled, "##############################", kWidth - filled, "", done * 100,
               now / 1e6, duration / 1e6, (unsigned long long)events,
               wall.count() > 0 ? events / wall.count() / 1e6 : 0.0);
}

// The PNGs, by share/vrnic/sim-plots.py (matplotlib); a run without them says why and still
// succeeds.
void make_plots(const std::string& dir) {
  const std::string script = find_data_file("sim-plots.py");
  if (script.empty()) {
    std::fprintf(stderr, "vrnic sim: no plots: sim-plots.py not found in %s/../share/vrnic\n",
                 self_dir().c_str());
    return;
  }
  // Debian's python3 (where python3-matplotlib installs) before any other on PATH.
  std::string py = std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  char* argv[] = {py.data(), const_cast<char*>(script.c_str()), const_cast<char*>(dir.c_str()),
                  nullptr};
  pid_t pid = 0;
  int status = 0;
  if (int e = posix_spawnp(&pid, py.c_str(), nullptr, nullptr, argv, environ); e != 0)
    std::fprintf(stderr, "vrnic sim: no plots: %s: %s\n", py.c_str(), std::strerror(e));
  else if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    std::fprintf(stderr, "vrnic sim: no plots (see above)\n");
}

// `vrnic sim sweep`: vrnic-sim-sweep beside this executable, in this process's place (so
// that under mpirun it is the rank), with the same arguments. Only it links MPI
// (docs/dependencies.md).
int run_sweep(const SimOptions& o) {
  const std::string exe = self_dir() + "/vrnic-sim-sweep";
  std::vector<std::string> args = {exe, o.scenario, "--out", o.out};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  execv(exe.c_str(), argv.data());
  std::fprintf(stderr, "vrnic sim sweep: cannot run %s: %s\n", exe.c_str(), std::strerror(errno));
  return 1;
}

}  // namespace

// A simulation touches 100-200 MB of small objects (frames, ports, switch state, the
// engines' QPs) in no order a cache can follow: with 4 KiB pages most of those misses also
// miss the TLB. glibc's malloc asks the kernel for transparent huge pages when the tunable
// glibc.malloc.hugetlb=1 is set, which only the environment at startup can do; so the
// command runs itself again with it (the 320-host fat tree at 30 % load ran 10-12 % faster,
// its resident memory 67 -> 151 MB; docs/sim.md). GLIBC_TUNABLES=glibc.malloc.hugetlb=0
// keeps 4 KiB pages. Where the kernel has THP off, the tunable changes nothing.
void sim_in_huge_pages(char** argv) {
  const char* set = std::getenv("GLIBC_TUNABLES");
  const std::string before = set != nullptr ? set : "";
  if (before.find("glibc.malloc.hugetlb") != std::string::npos) return;
  const std::string tunables = before + (before.empty() ? "" : ":") + "glibc.malloc.hugetlb=1";
  if (setenv("GLIBC_TUNABLES", tunables.c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
  // No exec: go on as we are, with the environment as it was.
  if (set == nullptr) unsetenv("GLIBC_TUNABLES");
  else setenv("GLIBC_TUNABLES", before.c_str(), 1);
}

int cmd_sim(const SimOptions& o) {
  if (o.list) {
    for (const std::string& name : sim::builtin_names()) {
      const sim::Scenario sc = sim::parse_scenario(sim::builtin_text(name));
      std::printf("%-16s %s\n", name.c_str(), sc.description.c_str());
    }
    return 0;
  }
  try {
    if (o.sweep) return run_sweep(o);
    sim::Scenario sc = sim::parse_scenario(sim::scenario_text(o.scenario));
    if (sc.name.empty()) sc.name = std::filesystem::path(o.scenario).stem().string();
    sim::apply_cell(sc, o.load > 0 ? std::optional<double>(o.load) : std::nullopt,
                    o.scheme.empty() ? std::nullopt : std::optional<std::string>(o.scheme),
                    o.seed_set ? std::optional<uint64_t>(o.seed) : std::nullopt);
    sim::Simulator simulator(sc);
    if (!o.out.empty()) {
      simulator.record_series(std::max<uint64_t>(1000, sc.duration_ns / 1000));
      std::filesystem::create_directories(o.out);
    }
    if (!o.pcap.empty())
      simulator.capture(o.out, sim::parse_host_list(o.pcap, simulator.host_count()));
    const auto t0 = std::chrono::steady_clock::now();  // the progress line's events/s only
    const sim::Summary s = simulator.run([&](uint64_t now, uint64_t events) {
      progress_bar(now, sc.duration_ns, events, std::chrono::steady_clock::now() - t0);
    });
    if (s.events >= (1u << 20)) std::fprintf(stderr, "\n");
    print_summary(s);
    if (!o.out.empty()) {
      std::filesystem::create_directories(o.out);
      std::ofstream out(std::filesystem::path(o.out) / "summary.json");
      out << sim::summary_json(s, true);
      if (!out) throw std::runtime_error("cannot write " + o.out + "/summary.json");
      sim::write_outputs(s, o.out);
      make_plots(o.out);
    }
    return s.flows_failed == 0 ? 0 : 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vrnic sim: %s\n", e.what());
    return 1;
  }
}

}  // namespace vrnic::tools
