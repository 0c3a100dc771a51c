// The 320-host fat-tree scenarios at 30 % and 50 % WebSearch load (ctest label "long":
// about a minute each; run by hand, docs/sim.md): every flow completes with PFC and DCQCN,
// nothing is dropped, and the higher load slows the flows down more.
#include <gtest/gtest.h>

#include <cstdio>

#include "sim/simulator.h"

namespace vrnic::sim {
namespace {

Summary run(const std::string& name) {
  Simulator sim(parse_scenario(builtin_text(name)));
  Summary s = sim.run();
  std::printf("%s", summary_json(s, true).c_str());
  return s;
}

TEST(SimFatTree, websearch_30_and_50) {
  const Summary a = run("fat-tree-websearch-30"), b = run("fat-tree-websearch-50");
  for (const Summary* s : {&a, &b}) {
    EXPECT_EQ(s->flows_completed, s->flows_total) << s->scenario;
    EXPECT_EQ(s->drops, 0u) << s->scenario;
    EXPECT_GT(s->cnps_sent, 0u) << s->scenario;
    for (const auto& [bucket, p] : s->fct_slowdown) {
      EXPECT_GT(p.count, 0u) << bucket;
      EXPECT_GE(p.p50, 0.99) << bucket;  // nothing beats the empty network
    }
  }
  EXPECT_GT(b.flows_total, a.flows_total * 3 / 2);
  EXPECT_GT(b.fct_slowdown.at("0-64KiB").p95, a.fct_slowdown.at("0-64KiB").p95);
}

}  // namespace
}  // namespace vrnic::sim
