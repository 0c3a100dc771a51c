// ATOMIC WRITE on the wire as Wireshark reads it: two engines on the loop wire, every packet
// written to a pcap as the Ethernet/IPv4/UDP frame it would be, decoded by tshark. tshark
// 4.0 names no opcode 0x1d: it shows the BTH, then the bytes after it as vendor data, which
// must be the RETH, the 8 bytes and the ICRC; the answer (RC RDMA READ response Only) it
// decodes in full. Skipped (not passed) without tshark.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "engine/test_fabric.h"
#include "transport/udp/pcap_writer.h"
#include "wire/headers.h"
#include "wire/opcode.h"

namespace vrnic::engine::testing {
namespace {

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

std::vector<std::vector<std::string>> rows(const std::string& text) {
  std::vector<std::vector<std::string>> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::string> f;
    std::istringstream fields(line);
    for (std::string x; std::getline(fields, x, '\t');) f.push_back(x);
    out.push_back(f);
  }
  return out;
}

std::string hex(const uint8_t* p, size_t n) {
  std::string s;
  char b[3];
  for (size_t i = 0; i < n; ++i) {
    snprintf(b, sizeof b, "%02x", p[i]);
    s += b;
  }
  return s;
}

TEST(AtomicWriteTshark, capture__tshark_decodes_request_and_response) {
  if (run("command -v tshark").empty()) GTEST_SKIP() << "tshark not installed";
  const std::string path = "/tmp/vrnic_atomic_write_" + std::to_string(getpid()) + ".pcap";
  int err = 0;
  auto pcap = transport::PcapWriter::open(path, err);
  ASSERT_NE(pcap, nullptr) << err;
  Fabric f;
  Node& a = f.add_node(1);
  Node& b = f.add_node(2);
  Qp* qa = a.create_qp();
  Qp* qb = b.create_qp();
  Fabric::connect(a, qa, b, qb);
  Buffer& dst = b.reg(64);
  std::vector<std::vector<uint8_t>> sent;
  f.wire().set_tap([&](const WirePacket& w) {
    wire::IpUdpInfo ip = w.ip;
    ip.ip_id_known = true;
    pcap->write_packet(ip, w.tos, w.data);
    sent.emplace_back(w.data.begin(), w.data.end());
  });
  SendWr wr;
  wr.wr_id = 1;
  wr.opcode = WrOpcode::kAtomicWrite;
  wr.send_flags = kSendSignaled;
  wr.remote_addr = dst.addr() + 8;
  wr.rkey = dst.mr.rkey;
  const uint8_t value[8] = {0xde, 0xad, 0xbe, 0xef, 0x01, 0x23, 0x45, 0x67};
  std::memcpy(&wr.compare_add, value, 8);
  ASSERT_EQ(post_send(a, qa, wr), 0);
  ASSERT_TRUE(f.run());
  pcap.reset();  // flushed and closed
  ASSERT_EQ(sent.size(), 2u);
  ASSERT_EQ(std::memcmp(dst.data() + 8, value, 8), 0);

  const std::string fields =
      " -T fields -e infiniband.bth.opcode -e infiniband.bth.destqp -e infiniband.bth.psn"
      " -e infiniband.bth.a -e infiniband.vendor -e infiniband.aeth.syndrome"
      " -e infiniband.aeth.msn -e infiniband.invariant.crc";
  auto r = rows(run("tshark -r " + path + fields + " 2>/dev/null"));
  const std::string bad =
      run("tshark -r " + path + " -Y '_ws.malformed || _ws.expert.severity >= error' 2>/dev/null");
  ASSERT_EQ(r.size(), 2u) << path;
  std::remove(path.c_str());
  ASSERT_GE(r[0].size(), 5u);
  EXPECT_EQ(r[0][0], "29");  // 0x1d
  EXPECT_EQ(std::stoul(r[0][1], nullptr, 0), b.dev->qp_num(qb));
  EXPECT_EQ(r[0][2], "100");
  EXPECT_EQ(r[0][3], "1");
  // After the BTH: RETH (VA, R_Key, length 8), the 8 bytes, the ICRC, as the engine sent them.
  const std::vector<uint8_t>& rq = sent[0];
  ASSERT_EQ(rq.size(), 12u + 16 + 8 + 4);
  // (tshark lists the vendor data twice: its first 4 bytes, then all of it.)
  EXPECT_EQ(r[0][4].substr(r[0][4].rfind(',') + 1), hex(rq.data() + 12, 16 + 8 + 4));
  EXPECT_EQ(hex(rq.data() + 12 + 12, 4), "00000008");
  EXPECT_EQ(hex(rq.data() + 28, 8), hex(value, 8));
  ASSERT_GE(r[1].size(), 8u);
  EXPECT_EQ(r[1][0], "16");  // RC RDMA READ response Only
  EXPECT_EQ(std::stoul(r[1][1], nullptr, 0), a.dev->qp_num(qa));
  EXPECT_EQ(r[1][2], "100");
  EXPECT_EQ(r[1][4], "");  // nothing tshark cannot name
  EXPECT_EQ(std::stoul(r[1][5], nullptr, 0), 0x1fu);  // ACK
  EXPECT_EQ(r[1][6], "1");
  // The ICRC field shows the four bytes in wire order.
  EXPECT_EQ(r[1][7], "0x" + hex(sent[1].data() + sent[1].size() - 4, 4));
  EXPECT_EQ(bad, "");
}

}  // namespace
}  // namespace vrnic::engine::testing
