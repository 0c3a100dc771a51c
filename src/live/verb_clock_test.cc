// Tests of the VerbClock in virtual time: one reading per stretch of a verb between moves of
// packets, a fresh reading on every call outside a verb.
#include "live/verb_clock.h"

#include <gtest/gtest.h>

namespace vrnic::live {
namespace {

// The virtual clock and the device's count of moved packets that the clock under test reads.
uint64_t g_now = 0;
uint64_t g_reads = 0;
uint64_t g_moved = 0;

uint64_t read_virtual() {
  ++g_reads;
  return g_now;
}
uint64_t moved(const void*) { return g_moved; }

class VerbClockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_now = 1'000'000'000;
    g_reads = 0;
    g_moved = 7;
  }
  VerbClock clock{&moved, nullptr, &read_virtual};
};

TEST_F(VerbClockTest, outside_a_verb__every_call_reads_the_clock) {
  EXPECT_EQ(clock.now_ns(), 1'000'000'000u);
  g_now += 5000;
  EXPECT_EQ(clock.now_ns(), 1'000'005'000u);
  EXPECT_EQ(g_reads, 2u);
}

TEST_F(VerbClockTest, inside_a_verb_that_moves_nothing__the_verbs_start_without_a_reading) {
  clock.begin(g_now, g_moved);
  g_now += 300;  // the engine's own work
  EXPECT_EQ(clock.now_ns(), 1'000'000'000u);
  EXPECT_EQ(clock.now_ns(), 1'000'000'000u);
  EXPECT_EQ(g_reads, 0u);
}

TEST_F(VerbClockTest, a_move_of_packets__one_fresh_reading_then_that_one_until_the_next_move) {
  clock.begin(g_now, g_moved);
  g_now += 1600;  // a sendmmsg
  g_moved += 2;
  EXPECT_EQ(clock.now_ns(), 1'000'001'600u);
  g_now += 200;
  EXPECT_EQ(clock.now_ns(), 1'000'001'600u);
  EXPECT_EQ(g_reads, 1u);
  g_now += 900;  // a recvmmsg that found packets
  g_moved += 2;
  EXPECT_EQ(clock.now_ns(), 1'000'002'700u);
  EXPECT_EQ(g_reads, 2u);
}

TEST_F(VerbClockTest, after_the_verb_ends__the_time_the_program_spent_is_read_not_assumed) {
  clock.begin(g_now, g_moved);
  EXPECT_EQ(clock.now_ns(), 1'000'000'000u);
  clock.end();
  g_now += 2'000'000;  // the program computes for 2 ms without a verb
  EXPECT_EQ(clock.now_ns(), 1'002'000'000u);
  clock.begin(g_now + 10, g_moved);  // the next verb starts from its own reading
  EXPECT_EQ(clock.now_ns(), 1'002'000'010u);
}

TEST_F(VerbClockTest, a_precise_reading__reads_inside_the_verb_and_the_stretch_goes_on_from_it) {
  clock.begin(g_now, g_moved);
  g_now += 700;  // the engine works through a receive batch
  EXPECT_EQ(clock.precise_now_ns(), 1'000'000'700u);
  g_now += 300;
  EXPECT_EQ(clock.now_ns(), 1'000'000'700u);  // never earlier than the precise reading
  EXPECT_EQ(clock.precise_now_ns(), 1'000'001'000u);
  clock.end();
  g_now += 50;
  EXPECT_EQ(clock.precise_now_ns(), 1'000'001'050u);
}

}  // namespace
}  // namespace vrnic::live
