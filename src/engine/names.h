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

// Name -> value for random names (never 0): open addressing with the name's low bits as its
// home cell (the names are uniform already: no hashing), linear probing, deletion by
// backward shift (no tombstones), at most half full; a lookup is one cell in the common
// case, the cost the slot-indexed keys had (a node-based map measured 7-9 % fewer packets/s
// in engine_benchmark). `None` is what find returns for a name not present.
template <class V, V None>
class NameTable {
 public:
  static constexpr V kNone = None;
  V find(uint32_t name) const {
    if (cells_.empty() || name == 0) return kNone;
    for (size_t i = name & mask_;; i = (i + 1) & mask_) {
      if (cells_[i].name == name) return cells_[i].value;
      if (cells_[i].name == 0) return kNone;
    }
  }
  bool contains(uint32_t name) const { return find(name) != kNone; }
  // The cell a lookup of `name` reads first (a prefetch hint); null while empty.
  const void* home(uint32_t name) const {
    return cells_.empty() ? nullptr : &cells_[name & mask_];
  }
  void insert(uint32_t name, V value);  // name != 0 and not present
  void erase(uint32_t name);            // if present
  size_t size() const { return used_; }

 private:
  struct Cell {
    uint32_t name = 0;
    V value{};
  };
  void place(uint32_t name, V value) {
    size_t i = name & mask_;
    while (cells_[i].name != 0) i = (i + 1) & mask_;
    cells_[i] = {name, value};
  }
  std::vector<Cell> cells_;
  size_t mask_ = 0, used_ = 0;
};

template <class V, V None>
void NameTable<V, None>::insert(uint32_t name, V value) {
  if ((used_ + 1) * 2 > cells_.size()) {
    std::vector<Cell> old;
    old.swap(cells_);
    cells_.assign(old.empty() ? 64 : old.size() * 2, Cell{});
    mask_ = cells_.size() - 1;
    for (const Cell& c : old)
      if (c.name != 0) place(c.name, c.value);
  }
  place(name, value);
  ++used_;
}

template <class V, V None>
void NameTable<V, None>::erase(uint32_t name) {
  if (cells_.empty() || name == 0) return;
  size_t i = name & mask_;
  while (cells_[i].name != name) {
    if (cells_[i].name == 0) return;
    i = (i + 1) & mask_;
  }
  // Backward shift: a later cell of the run whose home is not in (i, j] moves into the hole.
  for (size_t j = (i + 1) & mask_; cells_[j].name != 0; j = (j + 1) & mask_) {
    const size_t home = cells_[j].name & mask_;
    const bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
    if (stays) continue;
    cells_[i] = cells_[j];
    i = j;
  }
  cells_[i] = Cell{};
  --used_;
}

// Name -> slot index (memory keys).
using NameIndex = NameTable<uint32_t, UINT32_MAX>;

}  // namespace vrnic::engine
