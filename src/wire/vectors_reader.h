// Test-only reader of shared/vectors: the pcap frames and the flat JSON describing each.
#pragma once
#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace vrnic::wire::vector_files {

using Bytes = std::vector<uint8_t>;

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Frames of a classic pcap file (either byte order, micro- or nanosecond stamps).
inline std::vector<Bytes> read_pcap(const std::string& data) {
  std::vector<Bytes> frames;
  if (data.size() < 24) return frames;
  const auto* p = reinterpret_cast<const uint8_t*>(data.data());
  const uint32_t magic_le = p[0] | p[1] << 8 | p[2] << 16 | static_cast<uint32_t>(p[3]) << 24;
  bool swap;
  if (magic_le == 0xa1b2c3d4 || magic_le == 0xa1b23c4d) {
    swap = false;
  } else if (magic_le == 0xd4c3b2a1 || magic_le == 0x4d3cb2a1) {
    swap = true;
  } else {
    return frames;
  }
  auto u32 = [&](size_t off) {
    const uint8_t* q = p + off;
    return swap ? (static_cast<uint32_t>(q[0]) << 24 | q[1] << 16 | q[2] << 8 | q[3])
                : (q[0] | q[1] << 8 | q[2] << 16 | static_cast<uint32_t>(q[3]) << 24);
  };
  size_t off = 24;
  while (off + 16 <= data.size()) {
    const uint32_t incl = u32(off + 8);
    off += 16;
    if (off + incl > data.size()) break;
    frames.emplace_back(p + off, p + off + incl);
    off += incl;
  }
  return frames;
}

// Each vector's JSON object, flattened to the strings, unsigned integers and booleans it
// holds (read with nlohmann-json).
struct Value {
  bool is_string = false;
  std::string str;
  uint64_t num = 0;  // also 0/1 for booleans
};
using Object = std::map<std::string, Value>;

inline bool parse_vectors_json(const std::string& text, std::vector<Object>& out) {
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_array()) return false;
  for (const auto& item : doc) {
    if (!item.is_object()) return false;
    Object o;
    for (const auto& [key, val] : item.items()) {
      Value v;
      if (val.is_string()) {
        v.is_string = true;
        v.str = val.get<std::string>();
      } else if (val.is_boolean()) {
        v.num = val.get<bool>() ? 1 : 0;
      } else if (val.is_number_unsigned()) {
        v.num = val.get<uint64_t>();
      } else {
        return false;
      }
      o[key] = std::move(v);
    }
    out.push_back(std::move(o));
  }
  return true;
}

inline Bytes from_hex(const std::string& h) {
  Bytes b;
  for (size_t i = 0; i + 1 < h.size(); i += 2) b.push_back(std::stoi(h.substr(i, 2), nullptr, 16));
  return b;
}

struct Vector {
  Object json;
  Bytes frame;
};

// The frames of BASE.pcap paired with the objects of BASE.json; empty if they disagree.
inline std::vector<Vector> load_vectors(const std::string& base) {
  std::vector<Vector> v;
  const std::string dir = VRNIC_VECTORS_DIR;
  std::vector<Object> objs;
  if (!parse_vectors_json(read_file(dir + "/" + base + ".json"), objs)) return v;
  const std::vector<Bytes> frames = read_pcap(read_file(dir + "/" + base + ".pcap"));
  if (frames.size() != objs.size()) return v;
  for (size_t i = 0; i < objs.size(); ++i) v.push_back({objs[i], frames[i]});
  return v;
}

// rocev2.pcap / rocev2.json: the transport vectors.
inline const std::vector<Vector>& vectors() {
  static const std::vector<Vector> all = load_vectors("rocev2");
  return all;
}

// rocev2_cm.pcap / rocev2_cm.json: CM MADs to QP1.
inline const std::vector<Vector>& cm_vectors() {
  static const std::vector<Vector> all = load_vectors("rocev2_cm");
  return all;
}

inline bool has(const Object& o, const char* k) { return o.count(k) != 0; }
inline uint64_t num(const Object& o, const char* k) { return o.at(k).num; }

constexpr size_t kEth = 14;
// The last vector was captured on a ConnectX-4 Lx: its MACs are the NIC's own and its
// DSCP differs, so the rebuild compares from the IP header on with that TOS.
inline bool is_hardware_capture(const Vector& v) { return v.json.at("name").str == "cx4lx_captured_cnp"; }

}  // namespace vrnic::wire::vector_files
