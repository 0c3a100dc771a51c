// Unpredictable names: QP numbers and memory keys drawn from a ChaCha20 keystream seeded from
// outside the engine (DeviceConfig::name_seed), so that no name tells anything of the next.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace vrnic::engine {

// A CSPRNG: libsodium's ChaCha20 stream under the seed as key, a new 64-bit nonce for each
// block of output. The engine takes no randomness of its own (sans-IO): the live device
// seeds it from getrandom(2), tests from a fixed seed (repeatable runs).
class NameSource {
 public:
  using Seed = std::array<uint8_t, 32>;
  explicit NameSource(const Seed& seed) : key_(seed) {}

  // Uniform in [0, 2^24): a QPN or the name part of a memory key.
  uint32_t next24();

 private:
  void refill();

  Seed key_;
  uint64_t nonce_ = 0;
  std::array<uint8_t, 240> block_{};  // a multiple of 3 bytes: one name each
  size_t used_ = block_.size();
};

// Names handed out lately: a name freed goes in here, so the next few hundred drawn are
// never one that just left (a late packet or a stale key then names nothing). Older names
// may return, each with chance 2^-24 per draw.
class RecentNames {
 public:
  static constexpr size_t kSize = 256;
  void add(uint32_t name) {
    ring_[next_] = name;
    next_ = (next_ + 1) % kSize;
  }
  bool contains(uint32_t name) const {
    for (uint32_t n : ring_)
      if (n == name) return true;
    return false;
  }

 private:
  std::array<uint32_t, kSize> ring_{};  // 0 is never a name handed out
  size_t next_ = 0;
};

// Name -> index for random names (never 0): open addressing with the name's low bits as its
// home cell (the names are uniform already: no hashing), linear probing, deletion by
// backward shift (no tombstones), at most half full; a lookup is one cell in the common
// case, the cost the slot-indexed keys had (a node-based map measured 7-9 % fewer packets/s
// in engine_benchmark).
class NameIndex {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;
  uint32_t find(uint32_t name) const {
    if (cells_.empty() || name == 0) return kNone;
    for (size_t i = name & mask_;; i = (i + 1) & mask_) {
      if (cells_[i].name == name) return cells_[i].value;
      if (cells_[i].name == 0) return kNone;
    }
  }
  bool contains(uint32_t name) const { return find(name) != kNone; }
  void insert(uint32_t name, uint32_t value);  // name != 0 and not present
  void erase(uint32_t name);                   // if present
  size_t size() const { return used_; }

 private:
  struct Cell {
    uint32_t name = 0, value = 0;
  };
  void place(uint32_t name, uint32_t value);
  std::vector<Cell> cells_;
  size_t mask_ = 0, used_ = 0;
};

}  // namespace vrnic::engine
