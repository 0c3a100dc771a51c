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

}  // namespace vrnic::engine
