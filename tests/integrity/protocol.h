// Messages of the integrity test's out-of-band TCP exchange, and its deterministic data.
#pragma once
#include <cstdint>
#include <cstring>

#include "rc_endpoint.h"

namespace vrnic_test {

// kStop: no session; a server started for any number of sessions ends (the soak's).
enum class Mode : uint32_t { kData = 1, kAtomic = 2, kAccess = 3, kStop = 4 };

enum class Cmd : uint32_t {
  kVerifyRegion = 1,  // region[offset, +len) == gen(seed)?
  kFillRegion,        // region[offset, +len) := gen(seed)
  kPrepareRecv,       // post one receive of nsge SGEs able to hold len bytes
  kCheckRecv,         // poll the receive completion and compare it (op, len, imm, bytes)
  kNewQp,             // replace the session QP (the old one may be in ERR)
  kRecoverQp,         // restart the session QP in place: RESET, INIT, RTR, RTS, new PSNs
  kSnapshot,          // remember a hash of every area this session may touch
  kCompareSnapshot,   // ... and compare against it
  kAtomicDone,        // followed by the vector of Fetch-and-Add originals
  kBye,
};

enum class Op : uint32_t { kWrite = 0, kWriteImm, kSend, kRead };
inline const char* op_name(Op op) {
  static const char* n[] = {"WRITE", "WRITE_WITH_IMM", "SEND", "READ"};
  return n[static_cast<uint32_t>(op)];
}

struct Request {
  Cmd cmd{};
  Op op{};
  uint64_t seed = 0, offset = 0, len = 0;
  uint32_t nsge = 1, imm = 0;
};

struct Reply {
  uint32_t ok = 0;
  char msg[124] = {};
};

// What the server offers each session.
struct ServerInfo {
  QpInfo qp;
  uint64_t region_addr = 0, region_len = 0;
  uint32_t region_rkey = 0;
  uint64_t counter_addr = 0;
  uint32_t counter_rkey = 0;
  uint64_t ro_addr = 0, ro_len = 0;  // registered with REMOTE_READ only
  uint32_t ro_rkey = 0;
  uint64_t noacc_addr = 0, noacc_len = 0;  // registered with LOCAL_WRITE only
  uint32_t noacc_rkey = 0;
};

inline constexpr uint64_t kRegionSize = (16u << 20) + 8192;

// Deterministic pseudo-random bytes: byte i of gen(seed) depends only on (seed, i).
inline uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
inline void gen(uint8_t* out, uint64_t len, uint64_t seed) {
  for (uint64_t i = 0; i < len; i += 8) {
    uint64_t w = splitmix(seed * 0x100000001b3ull + i / 8);
    memcpy(out + i, &w, len - i < 8 ? len - i : 8);
  }
}

}  // namespace vrnic_test
