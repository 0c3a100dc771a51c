// Tests of the authenticated mode's trailer: what it holds, and that nothing can be changed.
#include "wire/auth_trailer.h"

#include <gtest/gtest.h>

#include <vector>

namespace vrnic::wire {
namespace {

struct Trailer : ::testing::Test {
  AuthKey key{};
  std::vector<uint8_t> body = std::vector<uint8_t>(100);
  uint8_t trailer[kAuthTrailerSize] = {};
  void SetUp() override {
    for (size_t i = 0; i < key.size(); ++i) key[i] = uint8_t(i * 7 + 1);
    for (size_t i = 0; i < body.size(); ++i) body[i] = uint8_t(i);
    auth_seal(key, 0x0102030405060708ull, body, trailer);
  }
};

TEST_F(Trailer, auth_seal__sequence_number_big_endian_then_tag) {
  const uint8_t seq[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_TRUE(std::equal(seq, seq + 8, trailer));
  uint64_t got = 0;
  EXPECT_TRUE(auth_open(key, body, trailer, got));
  EXPECT_EQ(got, 0x0102030405060708ull);
}

TEST_F(Trailer, auth_open__every_flipped_bit_refused) {
  uint64_t got = 0;
  for (size_t byte = 0; byte < body.size(); ++byte) {
    body[byte] ^= 0x10;
    EXPECT_FALSE(auth_open(key, body, trailer, got)) << "body byte " << byte;
    body[byte] ^= 0x10;
  }
  for (size_t byte = 0; byte < kAuthTrailerSize; ++byte) {
    trailer[byte] ^= 0x01;
    EXPECT_FALSE(auth_open(key, body, trailer, got)) << "trailer byte " << byte;
    trailer[byte] ^= 0x01;
  }
  EXPECT_TRUE(auth_open(key, body, trailer, got));
}

TEST_F(Trailer, auth_open__other_key_shorter_body_or_other_number_refused) {
  uint64_t got = 0;
  AuthKey other = key;
  other[0] ^= 1;
  EXPECT_FALSE(auth_open(other, body, trailer, got));
  EXPECT_FALSE(auth_open(key, std::span(body).first(99), trailer, got));
  uint8_t again[kAuthTrailerSize];
  auth_seal(key, 0x0102030405060709ull, body, again);  // the same packet, the next number
  EXPECT_FALSE(std::equal(trailer + 8, trailer + 24, again + 8));
}

}  // namespace
}  // namespace vrnic::wire
