// Sweep specs: the grid of cells in order, bad specs refused with the field named, a cell's
// scenario with its load, scheme and seed applied, and its CSV row from its summary.
#include "sim/sweep.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

#include "sim/simulator.h"

namespace vrnic::sim {
namespace {

TEST(SimSweep, cells_are_the_grid_scenario_major) {
  const SweepSpec s = parse_sweep(R"({"scenarios": ["a", "b"], "loads": [0.3, 0.5],
                                      "schemes": ["dcqcn", "hpcc"], "seeds": [1, 2, 3]})");
  const std::vector<SweepCell> c = sweep_cells(s);
  ASSERT_EQ(c.size(), 2u * 2 * 2 * 3);
  EXPECT_EQ(c[0].name(), "a-load0.3-dcqcn-seed1");
  EXPECT_EQ(c[1].name(), "a-load0.3-dcqcn-seed2");
  EXPECT_EQ(c[3].name(), "a-load0.3-hpcc-seed1");
  EXPECT_EQ(c[6].name(), "a-load0.5-dcqcn-seed1");
  EXPECT_EQ(c[12].name(), "b-load0.3-dcqcn-seed1");
  EXPECT_EQ(c[23].index, 23u);
}

TEST(SimSweep, absent_dimensions_keep_the_scenarios_own) {
  const std::vector<SweepCell> c = sweep_cells(parse_sweep(R"({"scenarios": ["x.json"]})"));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].name(), "x");
  EXPECT_FALSE(c[0].load || c[0].scheme || c[0].seed);
}

TEST(SimSweep, bad_specs_are_refused_naming_the_field) {
  auto msg = [](const std::string& text) {
    try {
      parse_sweep(text);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(msg(R"({"scenarios": []})").find("scenarios"), std::string::npos);
  EXPECT_NE(msg(R"({"scenarios": ["a"], "loads": [1.5]})").find("load"), std::string::npos);
  EXPECT_NE(msg(R"({"scenarios": ["a"], "schemes": ["timely"]})").find("timely"), std::string::npos);
  EXPECT_NE(msg(R"({"scenarios": ["a"], "seed": [1]})").find("\"seed\""), std::string::npos);
  EXPECT_NE(msg(R"({"scenarios": "a"})").find("scenarios"), std::string::npos);
  EXPECT_NE(msg("[").find("not JSON"), std::string::npos);
}

TEST(SimSweep, a_cell_applies_its_load_scheme_and_seed) {
  SweepCell c{0, "fat-tree-websearch-30", 0.5, "dcqcn+w", 7};
  const Scenario sc = cell_scenario(c);
  ASSERT_EQ(sc.traffic.size(), 1u);
  EXPECT_EQ(sc.traffic[0].load, 0.5);
  EXPECT_EQ(sc.nic.scheme, CcScheme::kDcqcnWindow);
  EXPECT_EQ(sc.seed, 7u);
  SweepCell flows_only{0, "incast-pfc", 0.5, std::nullopt, std::nullopt};
  EXPECT_THROW(cell_scenario(flows_only), std::runtime_error);  // nothing to load
}

TEST(SimSweep, csv_row_carries_the_cell_and_its_buckets) {
  SweepCell c{3, "incast-pfc", std::nullopt, "hpcc", 2};
  Summary s;
  s.scenario = "incast-pfc";
  s.scheme = "hpcc";
  s.seed = 2;
  s.events = 1234;
  s.fct_slowdown["64KiB-1MiB"] = {1.5, 2.5, 3.5, 32};
  const std::string row = sweep_csv_row(c, summary_json(s, false), 1);
  EXPECT_EQ(row.rfind("3,incast-pfc-hpcc-seed2,incast-pfc,,hpcc,2,1,0,1234,,,", 0), 0u) << row;
  EXPECT_NE(row.find(",,,,,32,1.5,2.5,3.5,,,,,,,,\n"), std::string::npos) << row;
  const std::string header = sweep_csv_header();
  const auto header_cols = std::count(header.begin(), header.end(), ',');
  EXPECT_EQ(std::count(row.begin(), row.end(), ','), header_cols);
}

}  // namespace
}  // namespace vrnic::sim
