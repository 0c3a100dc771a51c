// Tests of the CM's counters as the device shows them: their names and order, each value from its field.
#include "cm/counters.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace vrnic::cm {
namespace {

// The names `vrnic stats` and `vrnic run --stats` print (scripts and the interop checks read
// them): MADs by kind sent, then received, then the rest, in this order.
TEST(CmCounters, names__the_published_list_in_order) {
  const std::vector<std::string> want = {
      "cm_tx_req",      "cm_tx_mra",        "cm_tx_rej",       "cm_tx_rep",
      "cm_tx_rtu",      "cm_tx_dreq",       "cm_tx_drep",      "cm_tx_sidr_req",
      "cm_tx_sidr_rep", "cm_rx_req",        "cm_rx_mra",       "cm_rx_rej",
      "cm_rx_rep",      "cm_rx_rtu",        "cm_rx_dreq",      "cm_rx_drep",
      "cm_rx_sidr_req", "cm_rx_sidr_rep",   "cm_retries",      "cm_timeouts",
      "cm_rejects_sent", "cm_rejects_received", "cm_duplicates", "cm_rx_malformed",
      "cm_rx_unmatched", "cm_rx_bad_state", "cm_parked",       "cm_backlog_drops"};
  ASSERT_EQ(kCounterCount, want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(kCounterNames[i], want[i]) << i;
}

// Each counter's value is its own field's: MADs by attribute (REQ 0x10 .. SIDR_REP 0x18).
TEST(CmCounters, counter_values__each_from_its_field) {
  Counters c;
  for (int i = 0; i < 16; ++i) {
    c.tx[i] = 100 + i;
    c.rx[i] = 200 + i;
  }
  c.retries = 1, c.timeouts = 2, c.rejects_sent = 3, c.rejects_received = 4;
  c.duplicates = 5, c.rx_malformed = 6, c.rx_unmatched = 7, c.rx_bad_state = 8;
  c.parked = 9, c.backlog_drops = 10;
  uint64_t v[kCounterCount] = {};
  counter_values(c, v);
  for (size_t i = 0; i < 9; ++i) {
    EXPECT_EQ(v[i], 100 + i) << kCounterNames[i];
    EXPECT_EQ(v[9 + i], 200 + i) << kCounterNames[9 + i];
  }
  for (size_t i = 18; i < kCounterCount; ++i) EXPECT_EQ(v[i], i - 17) << kCounterNames[i];
}

}  // namespace
}  // namespace vrnic::cm
