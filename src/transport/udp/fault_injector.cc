// FaultInjector: parsing of the fault string and the per-packet coin flips.
#include "transport/udp/fault_injector.h"

#include <cstdlib>
#include <utility>

namespace vrnic::transport {

bool parse_fault_config(const std::string& text, FaultConfig& out, std::string& err) {
  FaultConfig c;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string::npos) {
      err = "expected key=value: " + item;
      return false;
    }
    std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    char* rest = nullptr;
    if (key == "seed") {
      c.seed = std::strtoull(value.c_str(), &rest, 0);
    } else {
      double v = std::strtod(value.c_str(), &rest);
      if (v < 0 || v > 1) {
        err = "probability out of [0,1]: " + item;
        return false;
      }
      if (key == "loss") c.loss = v;
      else if (key == "dup") c.dup = v;
      else if (key == "reorder") c.reorder = v;
      else if (key == "corrupt") c.corrupt = v;
      else {
        err = "unknown fault: " + key;
        return false;
      }
    }
    if (value.empty() || (rest && *rest)) {
      err = "bad value: " + item;
      return false;
    }
  }
  out = c;
  return true;
}

uint64_t FaultInjector::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double FaultInjector::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

void FaultInjector::apply(std::vector<engine::WirePacket>& packets) {
  std::vector<engine::WirePacket> out;
  out.reserve(packets.size() * 2);
  for (const engine::WirePacket& p : packets) {
    if (config_.loss > 0 && uniform() < config_.loss) {
      ++stats_.lost;
      continue;
    }
    if (config_.corrupt > 0 && uniform() < config_.corrupt && !p.data.empty()) {
      auto* bytes = const_cast<uint8_t*>(p.data.data());
      uint64_t bit = next() % (p.data.size() * 8);
      bytes[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
      ++stats_.corrupted;
    }
    out.push_back(p);
    if (config_.dup > 0 && uniform() < config_.dup) {
      out.push_back(p);
      ++stats_.duplicated;
    }
    if (config_.reorder > 0 && out.size() >= 2 && uniform() < config_.reorder) {
      std::swap(out[out.size() - 1], out[out.size() - 2]);
      ++stats_.reordered;
    }
  }
  packets = std::move(out);
}

}  // namespace vrnic::transport
