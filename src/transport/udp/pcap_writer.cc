// PcapWriter: classic pcap (microsecond timestamps), one record per Ethernet frame.
#include "transport/udp/pcap_writer.h"

#include <unistd.h>

#include <cerrno>
#include <ctime>

#include "wire/frame.h"

namespace vrnic::transport {
namespace {

constexpr uint32_t kPcapMagic = 0xa1b2c3d4;  // microsecond resolution, host byte order
constexpr uint32_t kLinkTypeEthernet = 1;
constexpr uint32_t kSnapLen = 262144;

struct GlobalHeader {
  uint32_t magic = kPcapMagic;
  uint16_t version_major = 2, version_minor = 4;
  int32_t thiszone = 0;
  uint32_t sigfigs = 0;
  uint32_t snaplen = kSnapLen;
  uint32_t network = kLinkTypeEthernet;
};

struct RecordHeader {
  uint32_t ts_sec, ts_usec, incl_len, orig_len;
};

}  // namespace

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
  GlobalHeader h;
  if (std::fwrite(&h, sizeof h, 1, f) != 1) {
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
  RecordHeader r;
  r.ts_sec = static_cast<uint32_t>(ts.tv_sec);
  r.ts_usec = static_cast<uint32_t>(ts.tv_nsec / 1000);
  r.orig_len = static_cast<uint32_t>(frame.size());
  r.incl_len = r.orig_len < kSnapLen ? r.orig_len : kSnapLen;
  std::lock_guard<std::mutex> g(mu_);
  if (!file_) return;
  std::fwrite(&r, sizeof r, 1, file_);
  std::fwrite(frame.data(), 1, r.incl_len, file_);
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
