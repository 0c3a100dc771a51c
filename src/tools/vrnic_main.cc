// The `vrnic` command: run, stats, devinfo, sim, demo.
#include <CLI/CLI.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "tools/commands.h"

namespace {

// Where vrnic's own arguments end in `vrnic run [OPTIONS] [--] PROGRAM ARGS...`: at "--" or
// at the first word that is neither an option nor an option's value. Returns the index of
// the program name; *dashes tells whether a "--" precedes it.
int program_index(int argc, char** argv, int first, bool* dashes) {
  static const char* kWithValue[] = {"--ip", "--pcap", "--faults", "--cc", "--rx-queues"};
  *dashes = false;
  for (int i = first; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) {
      *dashes = true;
      return i;
    }
    if (argv[i][0] != '-') return i;
    for (const char* o : kWithValue)
      if (std::strcmp(argv[i], o) == 0) ++i;  // its value follows as a separate word
  }
  return argc;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace vrnic::tools;
  CLI::App app{"vrnic: a software RoCEv2 RDMA NIC for unmodified verbs programs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "vrnic " VRNIC_VERSION, "print the version and exit");

  RunOptions run;
  auto* run_cmd = app.add_subcommand("run", "run PROGRAM on vrnic (no root, no kernel module)");
  run_cmd->add_option("--ip", run.ip, "device address (IPv4 or IPv6); default: first free 127.0.0.x");
  run_cmd->add_option("--pcap", run.pcap, "write every frame sent and received to FILE (%p = pid)");
  run_cmd->add_option("--faults", run.faults,
                      "inject faults on receive: loss=P,dup=P,reorder=P,corrupt=P,seed=N");
  run_cmd->add_option("--cc", run.cc,
                      "congestion control (DCQCN) parameters by NVIDIA name: "
                      "rpg_time_reset=300,rpg_ai_rate=5,...; enable=0 turns ECN and DCQCN off");
  run_cmd->add_option("--rx-queues", run.rx_queues,
                      "receive queues, each with a thread (default 1): for hosts with cores to "
                      "spare beside the program");
  run_cmd->add_flag("--stats", run.stats, "print the nonzero counters to stderr at exit");
  run_cmd->add_flag("--direct", run.direct,
                    "same-host direct mode: RDMA WRITE/READ to peers on this host that use it "
                    "too are copied between the processes, not sent as packets");
  run_cmd->add_flag("--auth", run.auth,
                    "authenticated mode: RC connections made through the RDMA CM agree keys "
                    "with the peer (a vrnic one in this mode too) and every packet carries a "
                    "tag checked before it touches memory");
  run_cmd->add_flag("--debug", run.debug, "debug messages on stderr");
  run_cmd->add_flag("--no-sysfs", run.no_sysfs,
                    "no /sys/class/infiniband view or /dev/infiniband node (also VRNIC_SYSFS=0)");
  run_cmd->footer("usage: vrnic run [OPTIONS] [--] PROGRAM [ARGS...]");

  StatsOptions stats;
  auto* stats_cmd = app.add_subcommand("stats", "counters of running vrnic programs");
  stats_cmd->add_option("pid", stats.pid, "only this process");
  stats_cmd->add_flag("--all", stats.all, "also counters that are zero");

  DevinfoOptions devinfo;
  auto* devinfo_cmd = app.add_subcommand("devinfo", "what the device would advertise here");
  devinfo_cmd->add_option("--ip", devinfo.ip,
                          "device address; default VRNIC_IP or the first free 127.0.0.x");

  SimOptions sim;
  auto* sim_cmd =
      app.add_subcommand("sim", "fabric simulator: vrnic sim list | run NAME|FILE | sweep SPEC");
  sim_cmd->require_subcommand(1);
  auto* sim_list = sim_cmd->add_subcommand("list", "the built-in scenarios");
  auto* sim_run =
      sim_cmd->add_subcommand("run", "run a scenario in virtual time, print its summary");
  sim_run->add_option("scenario", sim.scenario, "built-in name or JSON file")->required();
  auto* seed_opt = sim_run->add_option("--seed", sim.seed,
                                       "random seed (RED marking); default: the scenario's");
  auto* out_opt = sim_run->add_option("--out", sim.out, "write DIR/summary.json");
  sim_run->add_option("--pcap", sim.pcap,
                      "capture hosts (all, or e.g. 0,3,5-7) into DIR/host-<i>.pcap")
      ->needs(out_opt);
  sim_run->add_option("--scheme", sim.scheme,
                      "congestion control: dcqcn, dcqcn+w or hpcc; default: the scenario's");
  sim_run->add_option("--load", sim.load, "every traffic entry's load (0..1]; default: the scenario's");
  auto* sim_sweep = sim_cmd->add_subcommand(
      "sweep", "run a grid (scenarios x loads x schemes x seeds) as an MPI program: "
               "mpirun -np N vrnic sim sweep SPEC --out DIR");
  sim_sweep->add_option("spec", sim.scenario, "sweep file (JSON)")->required();
  sim_sweep->add_option("--out", sim.out, "rank 0 writes DIR/sweep.csv, DIR/<cell>/summary.json")
      ->required();

  app.add_subcommand("demo", "run Debian's perftest and ibverbs-utils on vrnic (--help: its options)");

  // The program's own arguments (run) and the demo's are not vrnic's to parse.
  int parse_argc = argc;
  std::vector<std::string> rest;
  if (argc >= 2 && std::strcmp(argv[1], "run") == 0) {
    bool dashes = false;
    parse_argc = program_index(argc, argv, 2, &dashes);
    rest.assign(argv + parse_argc + (dashes ? 1 : 0), argv + argc);
  } else if (argc >= 2 && std::strcmp(argv[1], "demo") == 0) {
    parse_argc = 2;
    rest.assign(argv + 2, argv + argc);
  }
  try {
    app.parse(parse_argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  if (*run_cmd) {
    run.command = rest;
    return cmd_run(run);
  }
  if (*stats_cmd) return cmd_stats(stats);
  if (*devinfo_cmd) return cmd_devinfo(devinfo);
  if (*sim_cmd) {
    sim.list = static_cast<bool>(*sim_list);
    sim.seed_set = seed_opt->count() > 0;
    sim.sweep = static_cast<bool>(*sim_sweep);
    if (*sim_run || *sim_sweep) sim_in_huge_pages(argv);
    return cmd_sim(sim);
  }
  return cmd_demo(rest);
}
