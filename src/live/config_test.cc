// Tests of LiveConfig: every VRNIC_* setting read, and every bad value refused with a message
// that names the setting, the value and what it takes.
#include "live/config.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace vrnic::live {
namespace {

using Env = std::map<std::string, std::string>;

bool parse(const Env& env, LiveConfig& out, std::string& error) {
  return LiveConfig::parse(
      [&](const char* name) -> const char* {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      out, error);
}

std::string refusal(const Env& env) {
  LiveConfig c;
  std::string error;
  EXPECT_FALSE(parse(env, c, error)) << env.begin()->first;
  return error;
}

TEST(LiveConfig, parse__nothing_set__the_defaults) {
  LiveConfig c;
  std::string error;
  ASSERT_TRUE(parse({}, c, error)) << error;
  EXPECT_EQ(c.ip, "");
  EXPECT_FALSE(c.faults.has_value());
  EXPECT_TRUE(c.offload);
  EXPECT_EQ(c.rx_queues, 1u);
  EXPECT_FALSE(c.send_window_bytes.has_value());
  EXPECT_FALSE(c.direct);
  EXPECT_FALSE(c.stats);
  EXPECT_FALSE(c.debug);
  EXPECT_EQ(c.timing.defer_ns, 200'000u);
  EXPECT_EQ(c.timing.recheck_max_ns, 4'000'000u);
  EXPECT_EQ(c.timing.spin_ns, 50'000u);
  EXPECT_EQ(c.timing.ack_hold_ns, 250'000u);
  EXPECT_EQ(c.timing.event_spin_ns, 50'000u);
  EXPECT_EQ(c.timing.idle_yield_ns, 2'000u);
}

TEST(LiveConfig, parse__every_setting_is_read) {
  LiveConfig c;
  std::string error;
  ASSERT_TRUE(parse({{"VRNIC_IP", "10.0.0.7"},
                     {"VRNIC_RESERVED", "127.0.0.9"},
                     {"VRNIC_PCAP", "/tmp/x.pcap"},
                     {"VRNIC_FAULTS", "loss=0.5,seed=3"},
                     {"VRNIC_OFFLOAD", "0"},
                     {"VRNIC_RX_QUEUES", "4"},
                     {"VRNIC_SEND_WINDOW_KB", "64"},
                     {"VRNIC_CC", "rpg_time_reset=200"},
                     {"VRNIC_DIRECT", "1"},
                     {"VRNIC_STATS", "yes"},
                     {"VRNIC_DEBUG", "on"},
                     {"VRNIC_DEFER_US", "20"},
                     {"VRNIC_RECHECK_MAX_US", "1000"},
                     {"VRNIC_SPIN_US", "0"},
                     {"VRNIC_ACK_HOLD_US", "100"},
                     {"VRNIC_EVENT_SPIN_US", "7"},
                     {"VRNIC_IDLE_YIELD_US", "0"}},
                    c, error))
      << error;
  EXPECT_EQ(c.ip, "10.0.0.7");
  EXPECT_EQ(c.reserved, "127.0.0.9");
  EXPECT_EQ(c.pcap, "/tmp/x.pcap");
  ASSERT_TRUE(c.faults.has_value());
  EXPECT_DOUBLE_EQ(c.faults->loss, 0.5);
  EXPECT_EQ(c.faults->seed, 3u);
  EXPECT_FALSE(c.offload);
  EXPECT_EQ(c.rx_queues, 4u);
  EXPECT_EQ(c.send_window_bytes, 64u * 1024);
  EXPECT_EQ(c.cc.timer_ns, 200'000u);
  EXPECT_TRUE(c.direct);
  EXPECT_TRUE(c.stats);
  EXPECT_TRUE(c.debug);
  EXPECT_EQ(c.timing.defer_ns, 20'000u);
  EXPECT_EQ(c.timing.recheck_max_ns, 1'000'000u);
  EXPECT_EQ(c.timing.spin_ns, 0u);
  EXPECT_EQ(c.timing.ack_hold_ns, 100'000u);
  EXPECT_EQ(c.timing.event_spin_ns, 7'000u);
  EXPECT_EQ(c.timing.idle_yield_ns, 0u);
}

TEST(LiveConfig, parse__an_empty_value_is_not_set) {
  LiveConfig c;
  std::string error;
  ASSERT_TRUE(parse({{"VRNIC_DEFER_US", ""}, {"VRNIC_DIRECT", ""}, {"VRNIC_RX_QUEUES", ""}}, c,
                    error));
  EXPECT_EQ(c.timing.defer_ns, 200'000u);
  EXPECT_FALSE(c.direct);
  EXPECT_EQ(c.rx_queues, 1u);
}

TEST(LiveConfig, parse__numbers_that_are_not_whole_numbers_in_range_are_refused) {
  EXPECT_EQ(refusal({{"VRNIC_SEND_WINDOW_KB", "abc"}}),
            "VRNIC_SEND_WINDOW_KB: 'abc' is not a number of KiB from 1 to 1048576");
  EXPECT_EQ(refusal({{"VRNIC_SEND_WINDOW_KB", "0"}}),
            "VRNIC_SEND_WINDOW_KB: '0' is not a number of KiB from 1 to 1048576");
  EXPECT_EQ(refusal({{"VRNIC_DEFER_US", "-5"}}),
            "VRNIC_DEFER_US: '-5' is not a number of microseconds from 0 to 10000000");
  EXPECT_EQ(refusal({{"VRNIC_SPIN_US", "50us"}}),
            "VRNIC_SPIN_US: '50us' is not a number of microseconds from 0 to 10000000");
  EXPECT_EQ(refusal({{"VRNIC_ACK_HOLD_US", "99999999999999999999999"}}),
            "VRNIC_ACK_HOLD_US: '99999999999999999999999' is not a number of microseconds "
            "from 0 to 10000000");
  EXPECT_EQ(refusal({{"VRNIC_RECHECK_MAX_US", " 5"}}),
            "VRNIC_RECHECK_MAX_US: ' 5' is not a number of microseconds from 0 to 10000000");
  EXPECT_EQ(refusal({{"VRNIC_RX_QUEUES", "0"}}),
            "VRNIC_RX_QUEUES: '0' is not a number of queues from 1 to 64");
  EXPECT_EQ(refusal({{"VRNIC_RX_QUEUES", "65"}}),
            "VRNIC_RX_QUEUES: '65' is not a number of queues from 1 to 64");
}

TEST(LiveConfig, parse__flags_other_than_0_or_1_are_refused) {
  EXPECT_EQ(refusal({{"VRNIC_DIRECT", "maybe"}}), "VRNIC_DIRECT: 'maybe' is not 0 or 1");
  EXPECT_EQ(refusal({{"VRNIC_STATS", "2"}}), "VRNIC_STATS: '2' is not 0 or 1");
  EXPECT_EQ(refusal({{"VRNIC_OFFLOAD", "of"}}), "VRNIC_OFFLOAD: 'of' is not 0 or 1");
  LiveConfig c;
  std::string error;
  ASSERT_TRUE(parse({{"VRNIC_DIRECT", "false"}, {"VRNIC_STATS", "0"}}, c, error));
  EXPECT_FALSE(c.direct);  // "false" is false, not a set flag
  EXPECT_FALSE(c.stats);
}

TEST(LiveConfig, parse__faults_and_cc_refusals_name_their_setting) {
  EXPECT_EQ(refusal({{"VRNIC_FAULTS", "lost=0.5"}}).rfind("VRNIC_FAULTS: ", 0), 0u);
  EXPECT_EQ(refusal({{"VRNIC_CC", "no_such_knob=1"}}).rfind("VRNIC_CC: ", 0), 0u);
}

TEST(LiveConfig, parse__a_refusal_leaves_the_output_as_it_was) {
  LiveConfig c;
  c.ip = "kept";
  std::string error;
  EXPECT_FALSE(parse({{"VRNIC_IP", "10.0.0.1"}, {"VRNIC_SPIN_US", "x"}}, c, error));
  EXPECT_EQ(c.ip, "kept");
}

}  // namespace
}  // namespace vrnic::live
