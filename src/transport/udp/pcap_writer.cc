// PcapWriter: classic pcap (microsecond timestamps, wire/pcap.h), one record per Ethernet frame.
#include "transport/udp/pcap_writer.h"

#include <unistd.h>

#include <cerrno>
#include <ctime>

#include "wire/frame.h"
#include "wire/pcap.h"

namespace vrnic::transport {

std::string expand_pid(const std::string& path_template) {
  std::string out;
  for (size_t i = 0; i < path_template.size(); ++i) {
    if (path_template[i] == '%' && i + 1 < path_template.size() && path_template[i + 1] == 'p') {
      out += std::to_string(getpid());
      ++i;
    } else {
      out += path_template[i];
    }
  }
  return out;
}

std::unique_ptr<PcapWriter> PcapWriter::open(const std::string& path_template, int& err) {
  std::string path = expand_pid(path_template);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) {
    err = errno;
    return nullptr;
  }
  const std::vector<uint8_t> h = wire::pcap_header(false);
  if (std::fwrite(h.data(), 1, h.size(), f) != h.size()) {
    err = errno ? errno : EIO;
    std::fclose(f);
    return nullptr;
  }
  err = 0;
  return std::unique_ptr<PcapWriter>(new PcapWriter(f, std::move(path)));
}

PcapWriter::~PcapWriter() {
  std::lock_guard<std::mutex> g(mu_);
  if (file_) std::fclose(file_);
}

void PcapWriter::write_packet(const wire::IpUdpInfo& ip, uint8_t tos,
                              std::span<const uint8_t> udp_payload) {
  std::vector<uint8_t> frame = wire::build_frame(ip, udp_payload, tos);
  write_frame(frame);
}

void PcapWriter::write_frame(std::span<const uint8_t> frame) {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  std::vector<uint8_t> rec;
  wire::append_pcap_record(rec, static_cast<uint32_t>(ts.tv_sec),
                           static_cast<uint32_t>(ts.tv_nsec / 1000), frame);
  std::lock_guard<std::mutex> g(mu_);
  if (!file_) return;
  std::fwrite(rec.data(), 1, rec.size(), file_);
  ++frames_;
}

void PcapWriter::flush() {
  std::lock_guard<std::mutex> g(mu_);
  if (file_) std::fflush(file_);
}

uint64_t PcapWriter::frames() const {
  std::lock_guard<std::mutex> g(mu_);
  return frames_;
}

}  // namespace vrnic::transport
