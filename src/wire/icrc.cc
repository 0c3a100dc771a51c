// ICRC computation (IBA Annex A17.3.3) over zlib's CRC-32, and its check with an unseen IPv4 ID.
#include "wire/icrc.h"

#include <isa-l/crc.h>
#include <zlib.h>

#include <bit>
#include <cstdint>
#include <cstring>

#include "wire/bytes.h"
#include "wire/headers.h"

namespace vrnic::wire {
namespace {

constexpr size_t kIpv4HeaderSize = 20, kIpv6HeaderSize = 40, kUdpHeaderSize = 8;
constexpr size_t kLeadOnes = 8;  // A17.3.3: the CRC starts over 64 bits of 1s (the LRH on IB)
// BTH byte 4 (Resv8a) is replaced by 1s: on InfiniBand it carries FECN/BECN, which switches
// may change in flight.
constexpr size_t kBthMaskedByte = 4;
// Where the IPv4 ID (then flags+fragment offset) sit in the CRC input: after the 8 bytes
// of 1s and 4 bytes of IPv4 header.
constexpr size_t kIpIdOffset = kLeadOnes + 4;

// ISA-L's AVX-512 CRC (crc32_gzip_refl_by16_10, chosen on CPUs with VPCLMULQDQ) returns with
// the upper halves of the vector registers in use: it ends without VZEROUPPER. Every SSE
// instruction after it (this file's own header copies, glibc's SSE2 routines, the
// compiler's) then runs in the mixed state, and on the Xeons measured each call left about
// 130 ns of it (wire/icrc_benchmark: compute_icrc of 1 KiB 154 ns, of 64 B 28). VZEROUPPER
// (an AVX instruction: only where the CPU has AVX, the only CPUs where ISA-L leaves that
// state) ends it.
#if defined(__x86_64__) || defined(__i386__)
// __builtin_cpu_init first: this initializer may run before libgcc's own.
const bool kHasAvx = [] {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx") != 0;
}();
inline void clear_upper_vector_state() {
  if (kHasAvx) asm volatile("vzeroupper" ::: "memory");
}
#else
inline void clear_upper_vector_state() {}
#endif

// A transport packet up to this long is copied whole after the masked headers, so that its
// CRC is one crc32 call: on short packets each call costs more than the bytes it covers
// (wire/icrc_benchmark: a 64-byte SEND 43.7 ns in two calls).
constexpr size_t kWholeCopyMax = 128;
constexpr size_t kPrefixRoom = kLeadOnes + 60 + kUdpHeaderSize + kWholeCopyMax;

// CRC-32 of `prefix` (the 1s and the masked IP/UDP headers, in a buffer of kPrefixRoom
// bytes) followed by the transport packet with BTH byte 4 set to 1s. The BTH (a short packet
// whole) is appended to the prefix so that the CRC gets one run of headers and at most one of
// payload.
uint32_t crc_with_transport(uint8_t* prefix, size_t prefix_len,
                            std::span<const uint8_t> transport) {
  const size_t head = transport.size() <= kWholeCopyMax ? transport.size() : kBthSize;
  std::memcpy(prefix + prefix_len, transport.data(), head);
  if (head > kBthMaskedByte) prefix[prefix_len + kBthMaskedByte] = 0xff;
  // ISA-L's reflected IEEE CRC-32 (the same function as zlib's crc32), folded with
  // carry-less multiplies: the ICRC is on every packet's path both ways.
  uint32_t crc = crc32_gzip_refl(0, prefix, prefix_len + head);
  if (head < transport.size())
    crc = crc32_gzip_refl(crc, transport.data() + head, transport.size() - head);
  clear_upper_vector_state();
  return crc;
}

// Writes 1s, the IP header with its variant fields as 1s (A17.3.3) and the UDP header with
// its checksum as 1s; returns the number of bytes written.
size_t masked_prefix(const IpUdpInfo& ip, size_t transport_size, uint8_t* out) {
  const size_t udp_len = kUdpHeaderSize + transport_size + kIcrcSize;
  std::memset(out, 0xff, kLeadOnes);
  uint8_t* h = out + kLeadOnes;
  if (ip.ipv6) {
    h[0] = 0x6f;  // version 6; traffic class and flow label masked
    h[1] = h[2] = h[3] = 0xff;
    put16(h + 4, static_cast<uint16_t>(udp_len));
    h[6] = 17;    // next header: UDP
    h[7] = 0xff;  // hop limit masked
    std::memcpy(h + 8, ip.src.data(), 16);
    std::memcpy(h + 24, ip.dst.data(), 16);
    h += kIpv6HeaderSize;
  } else {
    h[0] = 0x45;
    h[1] = 0xff;  // TOS (DSCP/ECN) masked
    put16(h + 2, static_cast<uint16_t>(kIpv4HeaderSize + udp_len));
    put16(h + 4, ip.ip_id);
    put16(h + 6, ip.ip_flags_frag);
    h[8] = 0xff;  // TTL masked
    h[9] = 17;
    h[10] = h[11] = 0xff;  // header checksum masked
    std::memcpy(h + 12, ip.src.data(), 4);
    std::memcpy(h + 16, ip.dst.data(), 4);
    h += kIpv4HeaderSize;
  }
  put16(h, ip.src_port);
  put16(h + 2, ip.dst_port);
  put16(h + 4, static_cast<uint16_t>(udp_len));
  h[6] = h[7] = 0xff;  // UDP checksum masked
  h += kUdpHeaderSize;
  return static_cast<size_t>(h - out);
}

// The linear part of the CRC of a 4-byte message holding 1 << bit (big-endian): what a
// change of that bit of the IPv4 ID:flags word adds to the CRC register right after it.
struct FieldBasis {
  uint32_t lin[32];
  FieldBasis() {
    const uint8_t zero[4] = {};
    const uLong crc_zero = crc32_z(0, zero, 4);
    for (int bit = 0; bit < 32; ++bit) {
      const uint32_t v = 1u << bit;
      const uint8_t b[4] = {static_cast<uint8_t>(v >> 24), static_cast<uint8_t>(v >> 16),
                            static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v)};
      lin[bit] = static_cast<uint32_t>(crc32_z(0, b, 4) ^ crc_zero);
    }
  }
};

// A basis of the span of the 16 ID-bit deltas, kept in reduced form by pivot bit, with the
// set of ID bits that makes up each vector.
class IdSolver {
 public:
  void add(uint32_t v, uint16_t ids) {
    while (v != 0) {
      const int p = 31 - std::countl_zero(v);
      if (vec_[p] == 0) {
        vec_[p] = v;
        ids_[p] = ids;
        return;
      }
      v ^= vec_[p];
      ids ^= ids_[p];
    }
  }
  // The ID bits whose deltas add up to target, if any.
  bool solve(uint32_t target, uint16_t& ids) const {
    ids = 0;
    while (target != 0) {
      const int p = 31 - std::countl_zero(target);
      if (vec_[p] == 0) return false;
      target ^= vec_[p];
      ids ^= ids_[p];
    }
    return true;
  }

 private:
  uint32_t vec_[32] = {};
  uint16_t ids_[32] = {};
};

// The deltas of the 32 bits of the ID:flags word and the solver over the 16 ID bits, for
// one transport length.
struct LengthBasis {
  size_t transport_size = SIZE_MAX;
  uint32_t delta[32] = {};
  IdSolver solver;
};

const LengthBasis& basis_for(size_t transport_size) {
  static const FieldBasis field;
  // A stream of messages interleaves a few lengths (full path-MTU packets, each message's
  // last, ACKs): a few entries per thread, replaced in turn, keep each built once. One entry
  // rebuilt at every change of length was 11 % of the CPU of two ranks exchanging 64 KiB.
  constexpr size_t kEntries = 8;
  thread_local LengthBasis entries[kEntries];
  thread_local size_t next = 0;
  for (LengthBasis& e : entries) {
    if (e.transport_size == transport_size) return e;
  }
  LengthBasis& cache = entries[next];
  next = (next + 1) % kEntries;
  cache = LengthBasis{};
  cache.transport_size = transport_size;
  // Bytes covered by the CRC after the ID:flags word.
  const size_t after = kLeadOnes + kIpv4HeaderSize + kUdpHeaderSize + transport_size -
                       (kIpIdOffset + 4);
  const uLong op = crc32_combine_gen(static_cast<z_off_t>(after));
  for (int bit = 0; bit < 32; ++bit) {
    cache.delta[bit] = static_cast<uint32_t>(crc32_combine_op(field.lin[bit], 0, op));
  }
  for (int i = 0; i < 16; ++i) {
    cache.solver.add(cache.delta[16 + i], static_cast<uint16_t>(1u << i));
  }
  return cache;
}

// Decision (docs/protocol.md, "Received ICRCs and the unseen IPv4 identification"): the
// ICRC covers the IPv4 identification, which a UDP socket never shows the receiver, and
// peer NICs fill it with their own counter. CRC-32 is affine over GF(2) for a fixed
// length, so
//   icrc(id, flags) = icrc(id0, flags0) ^ L((id ^ id0) << 16 | (flags ^ flags0)),
// where L is linear: each changed bit's CRC carried across the bytes that follow it. We
// solve L(x << 16) = stored ^ icrc(id0, flags0) ^ L(flags ^ flags0) for the 16 bits of x,
// with DF set and with DF clear. The 16 columns are independent (a CRC with a degree-32
// generator maps 16-bit messages injectively), so each solve has at most one answer. No
// second pass over the payload is needed: only the failed first CRC, and per new length
// one crc32_combine_gen and 32 GF(2) multiplies. The price is a weaker check on this path
// (2^-15 false accepts for random corruption), documented there.
IcrcVerdict recover_ip_id(const IpUdpInfo& ip, uint32_t computed, uint32_t stored,
                          size_t transport_size, uint16_t* recovered_ip_id) {
  const LengthBasis& b = basis_for(transport_size);
  const uint32_t* delta = b.delta;
  const IdSolver& solver = b.solver;
  for (const uint16_t flags : {uint16_t{0x4000}, uint16_t{0x0000}}) {
    uint32_t target = stored ^ computed;
    const uint16_t flag_change = flags ^ ip.ip_flags_frag;
    for (int bit = 0; bit < 16; ++bit) {
      if (flag_change & (1u << bit)) target ^= delta[bit];
    }
    uint16_t id_change = 0;
    if (solver.solve(target, id_change)) {
      if (recovered_ip_id != nullptr) *recovered_ip_id = ip.ip_id ^ id_change;
      return IcrcVerdict::kOkRecoveredIpId;
    }
  }
  return IcrcVerdict::kBad;
}

}  // namespace

uint32_t compute_icrc(const IpUdpInfo& ip, std::span<const uint8_t> transport) {
  uint8_t prefix[kPrefixRoom];
  const size_t n = masked_prefix(ip, transport.size(), prefix);
  return crc_with_transport(prefix, n, transport);
}

bool compute_icrc_ip_packet(std::span<const uint8_t> pkt, uint32_t& icrc) {
  if (pkt.empty()) return false;
  const uint8_t* p = pkt.data();
  // The masked copy of the IP header (with options, for IPv4) and the UDP header.
  uint8_t prefix[kPrefixRoom];
  std::memset(prefix, 0xff, kLeadOnes);
  uint8_t* h = prefix + kLeadOnes;
  size_t ip_hdr = 0, ip_total = 0;
  if ((p[0] >> 4) == 4) {
    ip_hdr = static_cast<size_t>(p[0] & 0x0f) * 4;
    if (ip_hdr < kIpv4HeaderSize || pkt.size() < ip_hdr || p[9] != 17) return false;
    ip_total = get16(p + 2);
    std::memcpy(h, p, ip_hdr);
    h[1] = 0xff;
    h[8] = 0xff;
    h[10] = h[11] = 0xff;
  } else if ((p[0] >> 4) == 6) {
    ip_hdr = kIpv6HeaderSize;
    if (pkt.size() < ip_hdr || p[6] != 17) return false;
    ip_total = ip_hdr + get16(p + 4);
    std::memcpy(h, p, ip_hdr);
    h[0] |= 0x0f;
    h[1] = h[2] = h[3] = 0xff;
    h[7] = 0xff;
  } else {
    return false;
  }
  if (ip_total > pkt.size() || ip_total < ip_hdr + kUdpHeaderSize + kIcrcSize) return false;
  h += ip_hdr;
  std::memcpy(h, p + ip_hdr, kUdpHeaderSize);
  h[6] = h[7] = 0xff;
  h += kUdpHeaderSize;
  const size_t start = ip_hdr + kUdpHeaderSize;
  icrc = crc_with_transport(prefix, static_cast<size_t>(h - prefix),
                            pkt.subspan(start, ip_total - start - kIcrcSize));
  return true;
}

uint32_t icrc_with_ip_id_change(uint32_t icrc, size_t transport_size, uint16_t id_xor) {
  if (id_xor == 0) return icrc;
  const uint32_t* delta = basis_for(transport_size).delta;
  for (int bit = 0; bit < 16; ++bit) {
    if (id_xor & (1u << bit)) icrc ^= delta[16 + bit];
  }
  return icrc;
}

uint32_t stored_icrc(std::span<const uint8_t> udp_payload) {
  if (udp_payload.size() < kIcrcSize) return 0;
  const uint8_t* p = udp_payload.data() + udp_payload.size() - kIcrcSize;
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

void store_icrc(uint32_t icrc, uint8_t* out4) {
  for (int i = 0; i < 4; ++i) out4[i] = static_cast<uint8_t>(icrc >> (8 * i));
}

IcrcVerdict verify_icrc(const IpUdpInfo& ip, std::span<const uint8_t> udp_payload,
                        uint16_t* recovered_ip_id) {
  if (udp_payload.size() < kIcrcSize) return IcrcVerdict::kBad;
  const auto transport = udp_payload.first(udp_payload.size() - kIcrcSize);
  const uint32_t stored = stored_icrc(udp_payload);
  const uint32_t computed = compute_icrc(ip, transport);
  if (computed == stored) return IcrcVerdict::kOk;
  // The slow path runs only for packets that failed the direct check.
  if (ip.ipv6 || ip.ip_id_known) return IcrcVerdict::kBad;
  return recover_ip_id(ip, computed, stored, transport.size(), recovered_ip_id);
}

}  // namespace vrnic::wire
