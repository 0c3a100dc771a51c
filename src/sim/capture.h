// Per-host captures of a simulation: DIR/host-<i>.pcap for each host asked for, with every
// frame its NIC sent or received (RoCEv2 data as whole Ethernet/IP/UDP frames, PFC as MAC
// control frames), stamped with the virtual time in nanoseconds.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/event_queue.h"
#include "sim/network.h"

namespace vrnic::sim {

class HostCaptures : public FrameTap {
 public:
  // host_node[i]: host i's node in the network; `hosts`: the hosts captured. Throws
  // std::runtime_error naming a file it cannot create.
  HostCaptures(const SimClock& clock, const std::string& dir, const std::vector<uint32_t>& hosts,
               const std::vector<uint32_t>& host_node, const Network& net);
  ~HostCaptures() override;  // writes out what is buffered, closes the files
  HostCaptures(const HostCaptures&) = delete;
  HostCaptures& operator=(const HostCaptures&) = delete;

  void data_frame(uint32_t node, const Packet& p) override;
  void pfc_frame(uint32_t node, bool sent, uint8_t prio, uint16_t quanta) override;
  uint64_t frames() const { return frames_; }

 private:
  struct File {
    std::FILE* f = nullptr;
    std::string path;
    std::vector<uint8_t> buf;
    uint8_t mac_last = 0;  // the host's MAC, as wire::build_frame derives it from its IP
  };
  void record(File& file, const std::vector<uint8_t>& frame);
  void drain(File& file);

  const SimClock& clock_;
  std::unordered_map<uint32_t, size_t> by_node_;
  std::vector<File> files_;
  uint64_t frames_ = 0;
};

// "all", or host indices and ranges: "0,3,5-7". Throws std::runtime_error on anything else
// or on a host >= count.
std::vector<uint32_t> parse_host_list(const std::string& text, uint32_t count);

}  // namespace vrnic::sim
