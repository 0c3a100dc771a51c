// Flow-size CDFs (parsing, mean, sampling) and Poisson traffic (load, destinations, seeds).
#include "sim/traffic.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

namespace vrnic::sim {
namespace {

TEST(SimTraffic, builtin_cdfs_and_their_means) {
  ASSERT_NE(builtin_cdf_text("websearch"), nullptr);
  ASSERT_NE(builtin_cdf_text("fb_hadoop"), nullptr);
  EXPECT_EQ(builtin_cdf_text("nonesuch"), nullptr);
  // The piecewise-linear means of the published points.
  EXPECT_DOUBLE_EQ(Cdf::parse(builtin_cdf_text("websearch")).mean_bytes(), 1711250.0);
  EXPECT_DOUBLE_EQ(Cdf::parse(builtin_cdf_text("fb_hadoop")).mean_bytes(), 120420.75);
}

TEST(SimTraffic, samples_follow_the_cdf) {
  const Cdf cdf = Cdf::parse(builtin_cdf_text("websearch"));
  Rng rng(3);
  std::vector<uint64_t> v;
  double sum = 0;
  for (int i = 0; i < 200000; ++i) {
    v.push_back(cdf.sample(rng));
    sum += static_cast<double>(v.back());
  }
  std::sort(v.begin(), v.end());
  const auto below = [&](uint64_t x) {
    return double(std::lower_bound(v.begin(), v.end(), x) - v.begin()) / double(v.size());
  };
  EXPECT_NEAR(below(80000), 0.53, 0.005);
  EXPECT_NEAR(below(1000000), 0.70, 0.005);
  EXPECT_NEAR(below(10000000), 0.97, 0.005);
  EXPECT_GE(v.front(), 1u);
  EXPECT_LE(v.back(), 30000000u);
  EXPECT_NEAR(sum / double(v.size()) / 1711250.0, 1.0, 0.02);
}

TEST(SimTraffic, bad_cdfs_are_refused) {
  EXPECT_THROW(Cdf::parse("0 0\n100 50\n"), std::runtime_error);         // never 100 %
  EXPECT_THROW(Cdf::parse("0 0\n100 50\n50 100\n"), std::runtime_error); // sizes go back
  EXPECT_THROW(Cdf::parse("0 0\nten 100\n"), std::runtime_error);
  EXPECT_NO_THROW(Cdf::parse("# comment\n0 0\n\n100 100\n"));
}

// 16 hosts at 100 Gb/s, 30 % load for 20 ms: the bytes offered come to 30 % of what the
// links carry (within the spread of a few hundred heavy-tailed flows); nobody sends to
// itself; the same seed gives the same flows, another seed others.
TEST(SimTraffic, poisson_flows_offer_the_load) {
  PoissonTraffic t;
  t.cdf_text = builtin_cdf_text("fb_hadoop");
  t.load = 0.3;
  t.end_ns = 20'000'000;
  const auto flows = poisson_flows(t, 16, 100e9, 1);
  double bytes = 0;
  for (const FlowSpec& f : flows) {
    EXPECT_NE(f.src, f.dst);
    EXPECT_LT(f.dst, 16u);
    EXPECT_LT(f.start_ns, t.end_ns);
    bytes += static_cast<double>(f.bytes);
  }
  const double offered = 16 * 100e9 / 8 * 0.02 * 0.3;
  EXPECT_NEAR(bytes / offered, 1.0, 0.1);
  EXPECT_TRUE(std::is_sorted(flows.begin(), flows.end(), [](const auto& a, const auto& b) {
    return a.start_ns < b.start_ns;
  }));
  const auto again = poisson_flows(t, 16, 100e9, 1), other = poisson_flows(t, 16, 100e9, 2);
  ASSERT_EQ(again.size(), flows.size());
  for (size_t i = 0; i < flows.size(); ++i) EXPECT_EQ(again[i].bytes, flows[i].bytes);
  EXPECT_NE(other.size(), flows.size());
}

}  // namespace
}  // namespace vrnic::sim
