// Tests of VRNIC_CC parsing: NVIDIA names and units, and refusals that change nothing.
#include "live/cc_config.h"

#include <gtest/gtest.h>

namespace vrnic::live {
namespace {

TEST(CcConfig, names_and_units__as_nvidia_gives_them) {
  engine::DcqcnParams p;
  std::string err;
  ASSERT_TRUE(parse_cc_spec("rpg_time_reset=55,rpg_ai_rate=40,dce_tcp_g=1020,"
                            "min_time_between_cnps=50,rpg_min_dec_fac=25,cnp_dscp=46,"
                            "rate_to_set_on_first_cnp=1000,initial_alpha_value=512,"
                            "dce_tcp_rtt=55,rpg_byte_reset=10000,line_rate=10000,enable=1",
                            p, err))
      << err;
  EXPECT_EQ(p.timer_ns, 55000u);
  EXPECT_EQ(p.ai_rate_bps, 40e6);
  EXPECT_EQ(p.g, 4.0 / 1024);
  EXPECT_EQ(p.min_time_between_cnps_ns, 50000u);
  EXPECT_EQ(p.min_dec_fraction, 0.25);
  EXPECT_EQ(p.cnp_dscp, 46);
  EXPECT_EQ(p.first_cnp_rate_bps, 1e9);
  EXPECT_EQ(p.initial_alpha, 0.5);
  EXPECT_EQ(p.alpha_period_ns, 55000u);
  EXPECT_EQ(p.byte_reset, 10000u);
  EXPECT_EQ(p.line_rate_bps, 10e9);
  EXPECT_TRUE(p.enabled);
  ASSERT_TRUE(parse_cc_spec("enable=0", p, err));
  EXPECT_FALSE(p.enabled);
}

TEST(CcConfig, refused__unknown_name_bad_number_out_of_range_and_nothing_changes) {
  engine::DcqcnParams p;
  std::string err;
  for (const char* bad : {"rpg_time_resett=5", "rpg_time_reset", "rpg_time_reset=abc",
                          "rpg_time_reset=0", "cnp_dscp=64", "rpg_ai_rate=5,dce_tcp_g=2000",
                          "rpg_ai_rate="}) {
    err.clear();
    EXPECT_FALSE(parse_cc_spec(bad, p, err)) << bad;
    EXPECT_FALSE(err.empty()) << bad;
  }
  EXPECT_EQ(p.ai_rate_bps, engine::DcqcnParams{}.ai_rate_bps);  // "rpg_ai_rate=5,..." undone
  EXPECT_EQ(p.timer_ns, engine::DcqcnParams{}.timer_ns);
}

}  // namespace
}  // namespace vrnic::live
