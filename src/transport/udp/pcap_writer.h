// A pcap file of Ethernet frames (LINKTYPE_ETHERNET), shared by every thread of a process.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "wire/icrc.h"

namespace vrnic::transport {

class PcapWriter {
 public:
  // Creates (truncates) the file and writes the pcap global header. "%p" in the path is
  // replaced by the process id, so several programs given one name do not overwrite each
  // other. Returns null and sets err (errno) on failure.
  static std::unique_ptr<PcapWriter> open(const std::string& path, int& err);
  ~PcapWriter();  // flushes and closes

  // Writes one RoCEv2 packet as the whole Ethernet/IP/UDP frame it is on the wire.
  // Thread-safe.
  void write_packet(const wire::IpUdpInfo& ip, uint8_t tos, std::span<const uint8_t> udp_payload);
  // Writes an already framed packet. Thread-safe.
  void write_frame(std::span<const uint8_t> frame);
  void flush();

  const std::string& path() const { return path_; }
  uint64_t frames() const;

 private:
  PcapWriter(std::FILE* f, std::string path) : file_(f), path_(std::move(path)) {}
  mutable std::mutex mu_;
  std::FILE* file_;
  std::string path_;
  uint64_t frames_ = 0;
};

// Expands "%p" in a path template to the process id.
std::string expand_pid(const std::string& path_template);

}  // namespace vrnic::transport
