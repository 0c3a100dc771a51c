// Per-host captures: every frame a host's NIC sent or received, in time order, whole
// RoCEv2 frames and PFC MAC control frames; the host list syntax.
#include "sim/capture.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "sim/simulator.h"

namespace vrnic::sim {
namespace {

struct Record {
  uint64_t t_ns;
  std::vector<uint8_t> frame;
};

std::vector<Record> read_capture(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string d((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<Record> out;
  uint32_t magic = 0;
  if (d.size() < 24) return out;
  std::memcpy(&magic, d.data(), 4);
  EXPECT_EQ(magic, 0xa1b23c4du);  // nanosecond stamps
  for (size_t off = 24; off + 16 <= d.size();) {
    uint32_t h[4];
    std::memcpy(h, d.data() + off, 16);
    off += 16;
    out.push_back({uint64_t{h[0]} * 1'000'000'000 + h[1],
                   std::vector<uint8_t>(d.begin() + off, d.begin() + off + h[2])});
    off += h[2];
  }
  return out;
}

// Two senders write 256 KB each into host 2 through a switch whose XOFF (20 KB) they pass:
// the receiver's capture holds each sender's 64 WRITE packets (4 KiB MTU) and the ACKs it
// sent; the senders' captures hold the PAUSE and XON frames the switch sent them.
TEST(SimCapture, host_files_hold_their_frames_and_pauses) {
  const auto dir = std::filesystem::temp_directory_path() / "vrnic_sim_capture_test";
  std::filesystem::create_directories(dir);
  const Scenario sc = parse_scenario(R"({"topology": {"type": "star", "hosts": 3},
    "switch": {"ecn": {"enabled": false},
               "pfc": {"enabled": true, "xoff": 20000, "xon": 10000}},
    "nic": {"cc": false},
    "flows": [{"src": [0, 1], "dst": 2, "bytes": 262144}]})");
  Simulator sim(sc);
  sim.capture(dir.string(), parse_host_list("0-2", 3));
  const Summary s = sim.run();
  ASSERT_EQ(s.flows_completed, 2u);
  ASSERT_GT(s.pfc_pause_frames, 0u);

  const auto rx = read_capture((dir / "host-2.pcap").string());
  std::map<uint8_t, int> writes_from;  // by the source IP's last byte
  int acks = 0;
  for (size_t i = 0; i < rx.size(); ++i) {
    const auto& f = rx[i].frame;
    if (i > 0) EXPECT_GE(rx[i].t_ns, rx[i - 1].t_ns);
    ASSERT_GE(f.size(), 42u + 12u);
    ASSERT_EQ(f[12] << 8 | f[13], 0x0800);        // IPv4
    ASSERT_EQ(f[36] << 8 | f[37], 4791);          // RoCEv2
    const uint8_t opcode = f[42];
    if (opcode >= 0x06 && opcode <= 0x08) ++writes_from[f[29]];
    if (opcode == 0x11 && f[33] != 3) ++acks;     // an ACK from 10.0.0.3 (host 2)
    if (opcode == 0x11) EXPECT_EQ(f[29], 3);      // only host 2 sends ACKs here
  }
  EXPECT_EQ(writes_from[1], 64);
  EXPECT_EQ(writes_from[2], 64);
  EXPECT_GT(acks, 0);

  int pauses = 0, xons = 0;
  for (const Record& r : read_capture((dir / "host-0.pcap").string())) {
    const auto& f = r.frame;
    if ((f[12] << 8 | f[13]) != 0x8808) continue;
    ASSERT_EQ(f.size(), 60u);
    EXPECT_EQ(f[14] << 8 | f[15], 0x0101);  // PFC
    EXPECT_EQ(f[17], 0x01);                 // priority 0
    const int quanta = f[18] << 8 | f[19];
    (quanta == 0 ? xons : pauses) += 1;
    if (quanta != 0) EXPECT_EQ(quanta, 0xffff);
  }
  EXPECT_GT(pauses, 0);
  EXPECT_GT(xons, 0);
  std::filesystem::remove_all(dir);
}

TEST(SimCapture, host_lists) {
  EXPECT_EQ(parse_host_list("all", 3), (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(parse_host_list("5-7,0,6", 8), (std::vector<uint32_t>{0, 5, 6, 7}));
  for (const char* bad : {"", "8", "1,", "a", "3-1", "-1", "1-2-3", " 1"})
    EXPECT_THROW(parse_host_list(bad, 8), std::runtime_error) << bad;
}

}  // namespace
}  // namespace vrnic::sim
