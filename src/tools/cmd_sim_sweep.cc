// vrnic-sim-sweep (`vrnic sim sweep SPEC --out DIR`, usually under mpirun): the cells of a
// sweep (sim/sweep.h) shared among the MPI ranks, cell i on rank i % size; each rank runs
// its cells one after the other and sends each summary.json to rank 0, which writes them
// into DIR/<cell>/summary.json, gathers them into DIR/sweep.csv and draws the plots. The
// only program of vrnic that links MPI (docs/dependencies.md). Exit status: 0, or 1 if a
// cell could not run (its row is then empty, its error on stderr).
#include <mpi.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "sim/simulator.h"
#include "tools/commands.h"
#include "sim/sweep.h"

namespace {

using namespace vrnic::sim;
namespace fs = std::filesystem;

// One cell in this process: its summary.json text (wall time included), or {"error": ...}.
std::string run_cell(const SweepCell& c, const SweepSpec& spec, const std::string& out) {
  try {
    const Scenario sc = cell_scenario(c);
    Simulator sim(sc);
    const fs::path dir = fs::path(out) / c.name();
    // Sampled as `vrnic sim run --out` samples (which may move the run's end to a sample
    // instant), so that a cell's summary is that run's.
    sim.record_series(std::max<uint64_t>(1000, sc.duration_ns / 1000));
    const Summary s = sim.run();
    std::string text = summary_json(s, true);
    if (spec.outputs) {  // where the rank runs (rank 0 writes every summary.json again)
      fs::create_directories(dir);
      write_outputs(s, dir.string());
      std::ofstream(dir / "summary.json") << text;
    }
    return text;
  } catch (const std::exception& e) {
    return nlohmann::json{{"error", e.what()}}.dump();
  }
}

void write_file(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream f(p);
  f << text;
  if (!f) throw std::runtime_error("cannot write " + p.string());
}

// DIR/sweep.png etc. by share/vrnic/sim-plots.py, if it and matplotlib are there; the sweep
// succeeds without them.
void plot(const std::string& out) {
  const std::string script = vrnic::tools::find_data_file("sim-plots.py");
  if (script.empty()) return;
  std::string py = fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  std::string mode = "--sweep";
  std::string dir = out;
  char* argv[] = {py.data(), const_cast<char*>(script.c_str()), mode.data(), dir.data(), nullptr};
  pid_t pid = 0;
  int status = 0;
  if (posix_spawnp(&pid, py.c_str(), nullptr, nullptr, argv, environ) != 0 ||
      waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    std::fprintf(stderr, "vrnic sim sweep: no plots (see above)\n");
}

// Rank 0: its own results, then every other rank's as they come (tag: the cell's index).
int gather(const std::vector<SweepCell>& cells, std::map<uint32_t, std::string>& results,
           std::map<uint32_t, int>& ran_on, const std::string& out) {
  while (results.size() < cells.size()) {
    MPI_Status st;
    MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
    int n = 0;
    MPI_Get_count(&st, MPI_CHAR, &n);
    std::string text(static_cast<size_t>(n), '\0');
    MPI_Recv(text.data(), n, MPI_CHAR, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    results[static_cast<uint32_t>(st.MPI_TAG)] = std::move(text);
    ran_on[static_cast<uint32_t>(st.MPI_TAG)] = st.MPI_SOURCE;
  }
  int errors = 0;
  std::string csv = sweep_csv_header();
  for (const SweepCell& c : cells) {
    const std::string& text = results[c.index];
    const auto j = nlohmann::json::parse(text);
    if (j.contains("error")) {
      std::fprintf(stderr, "vrnic sim sweep: cell %u (%s): %s\n", c.index, c.name().c_str(),
                   j["error"].get<std::string>().c_str());
      ++errors;
      csv += std::to_string(c.index) + "," + c.name() + "\n";
      continue;
    }
    write_file(fs::path(out) / c.name() / "summary.json", text);
    csv += sweep_csv_row(c, text, ran_on[c.index]);
  }
  write_file(fs::path(out) / "sweep.csv", csv);
  std::printf("sweep: %zu cells, %d failed to run; %s/sweep.csv\n", cells.size(), errors,
              out.c_str());
  plot(out);
  return errors == 0 ? 0 : 1;
}

int sweep(const std::string& spec_file, const std::string& out, int rank, int size) {
  const SweepSpec spec = parse_sweep(scenario_text(spec_file));
  const std::vector<SweepCell> cells = sweep_cells(spec);
  std::map<uint32_t, std::string> results;
  std::map<uint32_t, int> ran_on;
  std::vector<std::string> sent;  // kept until their sends complete
  std::vector<MPI_Request> requests;
  sent.reserve(cells.size());
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  for (const SweepCell& c : cells) {
    if (static_cast<int>(c.index % static_cast<uint32_t>(size)) != rank) continue;
    std::string text = run_cell(c, spec, out);
    const auto j = nlohmann::json::parse(text);
    std::printf("rank %d on %s: cell %u %s: %s events, %.2f s\n", rank, host, c.index,
                c.name().c_str(), j.contains("events") ? j["events"].dump().c_str() : "-",
                j.value("wall_s", 0.0));
    std::fflush(stdout);
    if (rank == 0) {
      results[c.index] = std::move(text);
      ran_on[c.index] = 0;
      continue;
    }
    sent.push_back(std::move(text));
    requests.emplace_back();
    MPI_Isend(sent.back().data(), static_cast<int>(sent.back().size()), MPI_CHAR, 0,
              static_cast<int>(c.index), MPI_COMM_WORLD, &requests.back());
  }
  if (!requests.empty())
    MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
  return rank == 0 ? gather(cells, results, ran_on, out) : 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::string spec, out;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
      out = argv[++i];
    } else if (spec.empty()) {
      spec = argv[i];
    }
  }
  int rc = 2;
  if (spec.empty() || out.empty()) {
    if (rank == 0) std::fprintf(stderr, "usage: vrnic sim sweep SPEC --out DIR\n");
  } else {
    try {
      rc = sweep(spec, out, rank, size);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "vrnic sim sweep (rank %d): %s\n", rank, e.what());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
