// NameSource: ChaCha20 keystream blocks (libsodium) cut into 24-bit names.
#include "engine/names.h"

#include <sodium.h>

namespace vrnic::engine {

void NameSource::refill() {
  std::array<uint8_t, crypto_stream_chacha20_NONCEBYTES> nonce{};
  for (size_t i = 0; i < nonce.size(); ++i) nonce[i] = static_cast<uint8_t>(nonce_ >> (8 * i));
  ++nonce_;  // 2^64 blocks before a nonce repeats
  crypto_stream_chacha20(block_.data(), block_.size(), nonce.data(), key_.data());
  used_ = 0;
}

uint32_t NameSource::next24() {
  if (used_ + 3 > block_.size()) refill();
  const uint8_t* b = block_.data() + used_;
  used_ += 3;
  return uint32_t{b[0]} | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16;
}

void NameIndex::place(uint32_t name, uint32_t value) {
  size_t i = name & mask_;
  while (cells_[i].name != 0) i = (i + 1) & mask_;
  cells_[i] = {name, value};
}

void NameIndex::insert(uint32_t name, uint32_t value) {
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

void NameIndex::erase(uint32_t name) {
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

}  // namespace vrnic::engine
