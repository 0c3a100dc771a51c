// The pcap format bytes (global header, records, snap length) and the PFC frame's fields,
// read back by the vectors' pcap reader.
#include "wire/pcap.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "wire/vectors_reader.h"

namespace vrnic::wire {
namespace {

uint32_t u32(const std::vector<uint8_t>& b, size_t off) {
  uint32_t v;
  std::memcpy(&v, b.data() + off, 4);
  return v;
}

TEST(Pcap, header_and_records_read_back) {
  std::vector<uint8_t> f = pcap_header(true);
  ASSERT_EQ(f.size(), 24u);
  EXPECT_EQ(u32(f, 0), kPcapMagicNano);
  EXPECT_EQ(f[4] | f[5] << 8, 2);  // version 2.4 (little-endian host)
  EXPECT_EQ(f[6] | f[7] << 8, 4);
  EXPECT_EQ(u32(f, 16), kPcapSnapLen);
  EXPECT_EQ(u32(f, 20), 1u);  // Ethernet
  EXPECT_EQ(u32(pcap_header(false), 0), kPcapMagicMicro);
  const std::vector<uint8_t> a(70, 0xab), big(kPcapSnapLen + 10, 0xcd);
  append_pcap_record(f, 3, 999'999'999, a);
  append_pcap_record(f, 4, 5, big);
  EXPECT_EQ(u32(f, 24), 3u);
  EXPECT_EQ(u32(f, 28), 999'999'999u);
  EXPECT_EQ(u32(f, 32), 70u);
  EXPECT_EQ(u32(f, 36), 70u);
  const size_t second = 24 + 16 + 70;
  EXPECT_EQ(u32(f, second + 8), kPcapSnapLen);    // cut
  EXPECT_EQ(u32(f, second + 12), big.size());    // original length kept
  const auto frames = vector_files::read_pcap(std::string(f.begin(), f.end()));
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0], a);
  EXPECT_EQ(frames[1].size(), kPcapSnapLen);
}

TEST(Pcap, pfc_frame_fields) {
  const auto f = build_pfc_frame({2, 0, 0, 0, 0, 7}, 3, 0xffff);
  ASSERT_EQ(f.size(), 60u);
  const std::vector<uint8_t> head = {0x01, 0x80, 0xc2, 0, 0, 1, 2, 0, 0, 0, 0, 7,
                                     0x88, 0x08, 0x01, 0x01, 0x00, 0x08};
  EXPECT_EQ(std::vector<uint8_t>(f.begin(), f.begin() + 18), head);
  for (int q = 0; q < 8; ++q) {
    const int t = f[18 + 2 * q] << 8 | f[19 + 2 * q];
    EXPECT_EQ(t, q == 3 ? 0xffff : 0) << q;
  }
  for (size_t i = 34; i < 60; ++i) EXPECT_EQ(f[i], 0) << i;  // padding
  const auto xon = build_pfc_frame({2, 0, 0, 0, 0, 7}, 0, 0);
  EXPECT_EQ(xon[17], 0x01);
  EXPECT_EQ(xon[18] | xon[19], 0);
}

}  // namespace
}  // namespace vrnic::wire
