// Per-host pcap files of a simulation (capture.h).
#include "sim/capture.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "wire/frame.h"
#include "wire/headers.h"
#include "wire/icrc.h"
#include "wire/pcap.h"

namespace vrnic::sim {
namespace {
constexpr size_t kFlushBytes = 1 << 20;
}  // namespace

HostCaptures::HostCaptures(const SimClock& clock, const std::string& dir,
                           const std::vector<uint32_t>& hosts,
                           const std::vector<uint32_t>& host_node, const Network& net)
    : clock_(clock) {
  files_.reserve(hosts.size());
  for (uint32_t h : hosts) {
    File f;
    f.path = dir + "/host-" + std::to_string(h) + ".pcap";
    f.f = std::fopen(f.path.c_str(), "wb");
    if (!f.f) {
      const int err = errno;
      for (File& o : files_) std::fclose(o.f);
      throw std::runtime_error("cannot create " + f.path + ": " + std::strerror(err));
    }
    f.buf = wire::pcap_header(true);
    f.mac_last = static_cast<uint8_t>(net.ipv4_of(host_node[h]));
    by_node_[host_node[h]] = files_.size();
    files_.push_back(std::move(f));
  }
}

HostCaptures::~HostCaptures() {
  for (File& f : files_) {
    drain(f);
    std::fclose(f.f);
  }
}

void HostCaptures::drain(File& file) {
  if (!file.buf.empty() && std::fwrite(file.buf.data(), 1, file.buf.size(), file.f) != file.buf.size())
    std::fprintf(stderr, "vrnic sim: writing %s failed: %s\n", file.path.c_str(),
                 std::strerror(errno));
  file.buf.clear();
}

void HostCaptures::record(File& file, const std::vector<uint8_t>& frame) {
  const uint64_t t = clock_.now_ns();
  wire::append_pcap_record(file.buf, static_cast<uint32_t>(t / 1'000'000'000),
                           static_cast<uint32_t>(t % 1'000'000'000), frame);
  ++frames_;
  if (file.buf.size() >= kFlushBytes) drain(file);
}

void HostCaptures::data_frame(uint32_t node, const Packet& p) {
  const auto it = by_node_.find(node);
  if (it == by_node_.end()) return;
  // The engines may leave the ICRC out (NicParams::icrc): the capture has it right either way.
  std::vector<uint8_t> bytes = p.bytes;
  if (bytes.size() >= wire::kIcrcSize) {
    const size_t body = bytes.size() - wire::kIcrcSize;
    wire::store_icrc(wire::compute_icrc(p.ip, {bytes.data(), body}), bytes.data() + body);
  }
  record(files_[it->second], wire::build_frame(p.ip, bytes, p.tos));
}

// A PFC frame the host's NIC sent (from its MAC) or received (from its switch's port, shown
// as 02:00:00:00:ff:fe).
void HostCaptures::pfc_frame(uint32_t node, bool sent, uint8_t prio, uint16_t quanta) {
  const auto it = by_node_.find(node);
  if (it == by_node_.end()) return;
  File& f = files_[it->second];
  const std::array<uint8_t, 6> mac = sent ? std::array<uint8_t, 6>{2, 0, 0, 0, 0, f.mac_last}
                                          : std::array<uint8_t, 6>{2, 0, 0, 0, 0xff, 0xfe};
  record(f, wire::build_pfc_frame(mac, prio, quanta));
}

std::vector<uint32_t> parse_host_list(const std::string& text, uint32_t count) {
  std::vector<uint32_t> out;
  if (text == "all") {
    for (uint32_t i = 0; i < count; ++i) out.push_back(i);
    return out;
  }
  const auto bad = [&] {
    return std::runtime_error("--pcap: \"" + text + "\" is not \"all\" or host numbers below " +
                              std::to_string(count) + " (e.g. 0,3,5-7)");
  };
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    unsigned long a = 0, b = 0;
    char* end = nullptr;
    if (item.empty() || !std::isdigit(static_cast<unsigned char>(item[0]))) throw bad();
    a = b = std::strtoul(item.c_str(), &end, 10);
    if (*end == '-') b = std::strtoul(end + 1, &end, 10);
    if (*end != '\0' || a > b || b >= count) throw bad();
    for (unsigned long h = a; h <= b; ++h) out.push_back(static_cast<uint32_t>(h));
    pos = comma + 1;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace vrnic::sim
