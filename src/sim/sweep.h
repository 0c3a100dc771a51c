// A sweep: a grid of simulation cells (scenarios x loads x schemes x seeds) from a JSON spec,
// each cell a scenario with its load, congestion control and seed applied (the same as
// `vrnic sim run NAME --load L --scheme S --seed N`), and the CSV that gathers their
// summaries. The MPI program that runs the cells is vrnic-sim-sweep (docs/sim.md "Sweeps").
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/scenario.h"

namespace vrnic::sim {

struct SweepSpec {
  std::vector<std::string> scenarios;  // built-in names or JSON files
  std::vector<double> loads;           // empty: each scenario's own
  std::vector<std::string> schemes;    // empty: each scenario's own
  std::vector<uint64_t> seeds;         // empty: each scenario's own
  bool outputs = false;  // each cell also writes fct.csv etc. where its rank runs
};

struct SweepCell {
  uint32_t index = 0;
  std::string scenario;
  std::optional<double> load;
  std::optional<std::string> scheme;
  std::optional<uint64_t> seed;
  // A name for its directory and CSV row: scenario[-load<L>][-<scheme>][-seed<N>].
  std::string name() const;
};

// Throws std::runtime_error naming what is wrong (no scenarios, a load outside (0, 1], an
// unknown scheme, an unknown field).
SweepSpec parse_sweep(const std::string& json_text);
// Every cell, scenario-major (scenario, then load, scheme, seed), numbered from 0.
std::vector<SweepCell> sweep_cells(const SweepSpec& s);

// A built-in scenario's text, or a file's; throws std::runtime_error if neither.
std::string scenario_text(const std::string& name_or_file);
// Replaces every traffic entry's load, the congestion control, the seed (unset: kept).
void apply_cell(Scenario& sc, std::optional<double> load, std::optional<std::string> scheme,
                std::optional<uint64_t> seed);
// The scenario of a cell, parsed and applied.
Scenario cell_scenario(const SweepCell& c);

// sweep.csv: one row per cell from its summary.json text and the rank that ran it.
std::string sweep_csv_header();
std::string sweep_csv_row(const SweepCell& c, const std::string& summary_json, int rank);

}  // namespace vrnic::sim
