// The 320-host fat-tree scenarios at 30 % and 50 % WebSearch load (ctest label "long":
// minutes each; run by hand, docs/sim.md): every flow completes with PFC and DCQCN, nothing
// is dropped, and the higher load slows the flows down more; at 30 % with DCQCN+w and HPCC
// too, whose windows cut DCQCN's tails (docs/sim.md "The fat-tree beside the published
// results").
#include <gtest/gtest.h>

#include <cstdio>

#include "sim/simulator.h"

namespace vrnic::sim {
namespace {

Summary run(const std::string& name, CcScheme scheme = CcScheme::kDcqcn) {
  Scenario sc = parse_scenario(builtin_text(name));
  sc.nic.scheme = scheme;
  Simulator sim(sc);
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

// Seed 1 at 30 %: DCQCN 1MiB-10MiB p99 15.3, DCQCN+w 9.5, HPCC 6.4; 64KiB-1MiB p95 11.9,
// 3.6, 3.0; 10MiB+ p50 3.5, 2.2, 1.9. DCQCN's figures (websearch_30_and_50, the table of
// docs/sim.md) are the bounds here, so that DCQCN is not run twice.
TEST(SimFatTree, websearch_30_window_and_hpcc_beside_dcqcn) {
  const Summary w = run("fat-tree-websearch-30", CcScheme::kDcqcnWindow),
                h = run("fat-tree-websearch-30", CcScheme::kHpcc);
  struct {
    double p99_1m_10m = 15.27, p95_64k_1m = 11.94, p50_10m = 3.51;
  } d;
  for (const Summary* s : {&w, &h}) {
    EXPECT_EQ(s->flows_completed, s->flows_total) << s->scheme;
    EXPECT_EQ(s->drops, 0u) << s->scheme;
    EXPECT_EQ(s->ack_timeouts, 0u) << s->scheme;  // no window shrinks onto unacknowledged packets
  }
  EXPECT_GT(w.cnps_sent, 0u);
  EXPECT_EQ(h.ecn_marked, 0u);  // HPCC: no ECN, INT only
  EXPECT_EQ(h.cnps_sent, 0u);
  auto q = [](const Summary& s, const char* bucket) { return s.fct_slowdown.at(bucket); };
  EXPECT_LT(q(h, "1MiB-10MiB").p99, q(w, "1MiB-10MiB").p99);
  EXPECT_LT(q(w, "1MiB-10MiB").p99, d.p99_1m_10m);
  EXPECT_LT(q(w, "64KiB-1MiB").p95, d.p95_64k_1m / 2);
  EXPECT_LT(q(h, "64KiB-1MiB").p95, d.p95_64k_1m / 2);
  EXPECT_LT(q(w, "10MiB+").p50, d.p50_10m);
  EXPECT_LT(q(h, "10MiB+").p50, d.p50_10m);
}

}  // namespace
}  // namespace vrnic::sim
