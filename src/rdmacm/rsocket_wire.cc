// rdma-core v44's rsocket formats: encoders and decoders (see rsocket_wire.h).
#include "rdmacm/rsocket_wire.h"

#include <netinet/in.h>

#include <cstring>

#include "wire/bytes.h"

namespace vrnic::rdmacm::rs {
namespace {

uint32_t get32_in(const uint8_t* p, bool big_endian) {
  if (big_endian) return wire::get32(p);
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

uint64_t get64_in(const uint8_t* p, bool big_endian) {
  if (big_endian) return wire::get64(p);
  return uint64_t(get32_in(p, false)) | uint64_t(get32_in(p + 4, false)) << 32;
}

void put32_in(uint8_t* p, uint32_t v, bool big_endian) {
  if (big_endian) return wire::put32(p, v);
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

void put64_in(uint8_t* p, uint64_t v, bool big_endian) {
  if (big_endian) return wire::put64(p, v);
  put32_in(p, static_cast<uint32_t>(v), false);
  put32_in(p + 4, static_cast<uint32_t>(v >> 32), false);
}

}  // namespace

void put_sge(uint8_t* p, const Sge& s, bool big_endian) {
  put64_in(p, s.addr, big_endian);
  put32_in(p + 8, s.key, big_endian);
  put32_in(p + 12, s.length, big_endian);
}

Sge get_sge(const uint8_t* p, bool big_endian) {
  return {get64_in(p, big_endian), get32_in(p + 8, big_endian), get32_in(p + 12, big_endian)};
}

void put_iomap_entry(uint8_t* p, const IomapEntry& e, bool big_endian) {
  put64_in(p, e.offset, big_endian);
  put_sge(p + 8, e.sge, big_endian);
}

IomapEntry get_iomap_entry(const uint8_t* p, bool big_endian) {
  return {get64_in(p, big_endian), get_sge(p + 8, big_endian)};
}

void encode_conn_data(const ConnData& c, uint8_t out[kConnDataSize]) {
  std::memset(out, 0, kConnDataSize);
  out[0] = c.version;
  out[1] = c.flags;
  wire::put16(out + 2, c.credits);
  out[7] = c.iomap_scale;  // bytes 4..6 are reserved (zero)
  put_sge(out + 8, c.target_sgl, true);
  put_sge(out + 24, c.data_buf, true);
}

std::optional<ConnData> decode_conn_data(std::span<const uint8_t> b) {
  if (b.size() < kConnDataSize || b[0] != kConnVersion) return std::nullopt;
  ConnData c;
  c.version = b[0];
  c.flags = b[1];
  c.credits = wire::get16(&b[2]);
  c.iomap_scale = b[7];
  c.target_sgl = get_sge(&b[8], true);
  c.data_buf = get_sge(&b[24], true);
  return c;
}

uint8_t iomap_scale_of(uint32_t entries) {
  if (entries <= 128) return static_cast<uint8_t>(entries);
  return static_cast<uint8_t>(128 | (entries >> 8));
}

uint32_t iomap_size_of(uint8_t scale) {
  if (scale <= 128) return scale;
  return uint32_t(scale & 0x7f) << 8;
}

size_t put_ds_header(uint8_t* out, const sockaddr* self) {
  if (self->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(self);
    out[0] = 4;
    out[1] = kDsHeaderV4;
    std::memcpy(out + 2, &in->sin_port, 2);
    std::memcpy(out + 4, &in->sin_addr, 4);
    return kDsHeaderV4;
  }
  if (self->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(self);
    out[0] = 6;
    out[1] = kDsHeaderV6;
    std::memcpy(out + 2, &in6->sin6_port, 2);
    std::memcpy(out + 4, &in6->sin6_flowinfo, 4);
    std::memcpy(out + 8, &in6->sin6_addr, 16);
    return kDsHeaderV6;
  }
  return 0;
}

size_t get_ds_header(std::span<const uint8_t> b, sockaddr_storage& from) {
  std::memset(&from, 0, sizeof from);
  if (b.size() >= kDsHeaderV4 && b[0] == 4 && b[1] == kDsHeaderV4) {
    auto* in = reinterpret_cast<sockaddr_in*>(&from);
    in->sin_family = AF_INET;
    std::memcpy(&in->sin_port, &b[2], 2);
    std::memcpy(&in->sin_addr, &b[4], 4);
    return kDsHeaderV4;
  }
  if (b.size() >= kDsHeaderV6 && b[0] == 6 && b[1] == kDsHeaderV6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&from);
    in6->sin6_family = AF_INET6;
    std::memcpy(&in6->sin6_port, &b[2], 2);
    std::memcpy(&in6->sin6_flowinfo, &b[4], 4);
    std::memcpy(&in6->sin6_addr, &b[8], 16);
    return kDsHeaderV6;
  }
  return 0;
}

size_t put_ds_udp_header(uint8_t* out, Op op, uint32_t qpn, const sockaddr* self) {
  const bool v6 = self->sa_family == AF_INET6;
  if (!v6 && self->sa_family != AF_INET) return 0;
  const size_t len = v6 ? kDsUdpHeaderV6 : kDsUdpHeaderV4;
  wire::put32(out, kDsUdpTag);
  out[4] = v6 ? 6 : 4;
  out[5] = static_cast<uint8_t>(op);
  out[6] = static_cast<uint8_t>(len);
  out[7] = 0;
  wire::put32(out + 8, qpn & 0xffffff);
  if (v6) {
    std::memcpy(out + 12, &reinterpret_cast<const sockaddr_in6*>(self)->sin6_addr, 16);
  } else {
    std::memcpy(out + 12, &reinterpret_cast<const sockaddr_in*>(self)->sin_addr, 4);
  }
  return len;
}

std::optional<DsUdpHeader> get_ds_udp_header(std::span<const uint8_t> b, int family) {
  if (b.size() < kDsUdpHeaderV4 || wire::get32(&b[0]) != kDsUdpTag) return std::nullopt;
  const bool v4 = b[4] == 4 && family == AF_INET && b[6] == kDsUdpHeaderV4;
  const bool v6 = b[4] == 6 && family == AF_INET6 && b[6] == kDsUdpHeaderV6;
  if ((!v4 && !v6) || b.size() < b[6]) return std::nullopt;
  return DsUdpHeader{static_cast<Op>(b[5]), wire::get32(&b[8]) & 0xffffff, b[6]};
}

}  // namespace vrnic::rdmacm::rs
