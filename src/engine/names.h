// Unpredictable names: QP numbers and memory keys drawn from a ChaCha20 keystream seeded from
// outside the engine (DeviceConfig::name_seed), so that no name tells anything of the next.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

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

}  // namespace vrnic::engine
