// Tests of the RDMA CM's VRNIC_CM_* settings: each read, each bad value refused with a message naming it.
#include "rdmacm/settings.h"

#include <map>
#include <string>

#include <gtest/gtest.h>

namespace vrnic::rdmacm {
namespace {

// The settings parsed from `env`, or the error.
struct Parsed {
  bool ok;
  Settings s;
  std::string error;
};
Parsed parse(const std::map<std::string, std::string>& env) {
  Parsed p{};
  p.ok = parse_settings(
      [&](const char* n) {
        auto it = env.find(n);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      p.s, p.error);
  return p;
}

TEST(RdmacmSettings, defaults_are_the_kernel_cmas) {
  const Parsed p = parse({});
  ASSERT_TRUE(p.ok);
  EXPECT_EQ(p.s.response_timeout, 20);  // 4.3 s
  EXPECT_EQ(p.s.retries, 15);
  EXPECT_EQ(p.s.ack_timeout, 17);  // 537 ms: CMA_IBOE_PACKET_LIFETIME 16, plus one
  EXPECT_FALSE(p.s.debug);
  EXPECT_TRUE(parse({{"VRNIC_CM_RETRIES", ""}}).ok);  // empty: unset
}

TEST(RdmacmSettings, each_is_read) {
  const Parsed p = parse({{"VRNIC_CM_RESPONSE_TIMEOUT", "12"},
                          {"VRNIC_CM_RETRIES", "0"},
                          {"VRNIC_CM_ACK_TIMEOUT", "31"},
                          {"VRNIC_CM_DEBUG", "1"}});
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.s.response_timeout, 12);
  EXPECT_EQ(p.s.retries, 0);
  EXPECT_EQ(p.s.ack_timeout, 31);
  EXPECT_TRUE(p.s.debug);
}

TEST(RdmacmSettings, bad_values_are_refused_by_name) {
  const std::pair<std::map<std::string, std::string>, const char*> rows[] = {
      {{{"VRNIC_CM_ACK_TIMEOUT", "abc"}}, "VRNIC_CM_ACK_TIMEOUT: 'abc' is not a timeout exponent from 0 to 31"},
      {{{"VRNIC_CM_ACK_TIMEOUT", "32"}}, "VRNIC_CM_ACK_TIMEOUT: '32' is not a timeout exponent from 0 to 31"},
      {{{"VRNIC_CM_ACK_TIMEOUT", "0x11"}}, "VRNIC_CM_ACK_TIMEOUT: '0x11' is not a timeout exponent from 0 to 31"},
      {{{"VRNIC_CM_RESPONSE_TIMEOUT", "-1"}}, "VRNIC_CM_RESPONSE_TIMEOUT: '-1' is not a timeout exponent from 0 to 31"},
      {{{"VRNIC_CM_RESPONSE_TIMEOUT", " 5"}}, "VRNIC_CM_RESPONSE_TIMEOUT: ' 5' is not a timeout exponent from 0 to 31"},
      {{{"VRNIC_CM_RETRIES", "16"}}, "VRNIC_CM_RETRIES: '16' is not a number of retries from 0 to 15"},
      {{{"VRNIC_CM_RETRIES", "3x"}}, "VRNIC_CM_RETRIES: '3x' is not a number of retries from 0 to 15"},
      {{{"VRNIC_CM_RETRIES", "99999999999"}}, "VRNIC_CM_RETRIES: '99999999999' is not a number of retries from 0 to 15"},
      {{{"VRNIC_CM_DEBUG", "yes"}}, "VRNIC_CM_DEBUG: 'yes' is not 0 or 1"},
  };
  for (const auto& [env, want] : rows) {
    const Parsed p = parse(env);
    EXPECT_FALSE(p.ok) << want;
    EXPECT_EQ(p.error, want);
  }
}

}  // namespace
}  // namespace vrnic::rdmacm
