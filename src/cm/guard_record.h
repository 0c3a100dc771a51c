// The records a process sends its CM guard over a pipe: keep a connection's DREQ, drop it.
#pragma once
#include <array>
#include <cstdint>
#include <cstring>
#include <span>

#include "cm/types.h"
#include "wire/cm_mad.h"

namespace vrnic::cm {

// One record, written whole (under PIPE_BUF, so a write is atomic). Little-endian host order:
// writer and reader are the same build on the same machine.
struct GuardRecord {
  enum Op : uint8_t { kKeep = 1, kDrop = 2 };
  uint8_t op = kKeep;
  uint32_t conn = 0;
  Endpoint from, to;                            // addresses only (ipv6, ip)
  std::array<uint8_t, wire::cm::kMadSize> mad{};  // kKeep: the DREQ to send

  static constexpr size_t kSize = 1 + 4 + 1 + 16 + 16 + wire::cm::kMadSize;
  using Bytes = std::array<uint8_t, kSize>;

  Bytes encode() const {
    Bytes b{};
    b[0] = op;
    std::memcpy(&b[1], &conn, 4);
    b[5] = from.ipv6 ? 1 : 0;
    std::memcpy(&b[6], from.ip.data(), 16);
    std::memcpy(&b[22], to.ip.data(), 16);
    std::memcpy(&b[38], mad.data(), mad.size());
    return b;
  }
  // False for an op this build does not know.
  bool decode(std::span<const uint8_t, kSize> b) {
    op = static_cast<Op>(b[0]);
    std::memcpy(&conn, &b[1], 4);
    from.ipv6 = to.ipv6 = b[5] != 0;
    std::memcpy(from.ip.data(), &b[6], 16);
    std::memcpy(to.ip.data(), &b[22], 16);
    std::memcpy(mad.data(), &b[38], mad.size());
    return op == kKeep || op == kDrop;
  }
};

}  // namespace vrnic::cm
