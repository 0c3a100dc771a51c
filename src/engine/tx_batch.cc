// Packet building and batching for the engine's transmit side.
#include "engine/tx_batch.h"

#include <cstring>

#include "wire/opcode.h"

namespace vrnic::engine {

namespace {

constexpr size_t kAlign = 64;
// Room for a full batch of 4 KiB-MTU packets with their headers: no growth in steady state.
constexpr size_t kInitialArena = TxBatch::kMaxBatch * 4224;

}  // namespace

void TxBatch::reserve(size_t need) {
  if (fill_ + need <= capacity_) return;
  size_t cap = capacity_ == 0 ? kInitialArena : capacity_ * 2;
  while (cap < fill_ + need) cap *= 2;
  std::unique_ptr<uint8_t[]> bigger(new uint8_t[cap]);  // not zeroed: every byte is written
  if (fill_ > 0) std::memcpy(bigger.get(), arena_.get(), fill_);
  arena_ = std::move(bigger);
  capacity_ = cap;
  for (size_t i = 0; i < used_; ++i)  // the committed packets moved with the arena
    pkts_[i].data = {arena_.get() + offset_[i], pkts_[i].data.size()};
}

std::span<uint8_t> TxBatch::start(const wire::Packet& p, size_t payload_len,
                                  const wire::IpUdpInfo& ip, uint8_t tos, uint32_t qpn) {
  wire::Packet hdr = p;
  uint8_t pad = wire::pad_for(payload_len);
  hdr.bth.pad_count = pad;
  header_len_ = wire::header_size(hdr.bth.opcode);
  payload_len_ = payload_len;
  trailer_len_ = auth_ != nullptr ? auth_->trailer_size(qpn) : 0;
  qpn_ = qpn;
  total_len_ = header_len_ + payload_len + pad + trailer_len_ + wire::kIcrcSize;
  opcode_ = hdr.bth.opcode;
  kind_ = wire::packet_kind(hdr.bth.opcode, hdr.bth.dest_qp);
  fill_ = (fill_ + kAlign - 1) & ~(kAlign - 1);
  reserve(total_len_);
  start_ = fill_;
  uint8_t* buf = arena_.get() + start_;
  wire::write_headers(hdr, buf);
  pkts_[used_].ip = ip;
  pkts_[used_].tos = tos;
  return {buf + header_len_, payload_len};
}

size_t TxBatch::commit(PacketPort& port, Counters& c) {
  uint8_t* buf = arena_.get() + start_;
  size_t pad = wire::pad_for(payload_len_);
  size_t body = header_len_ + payload_len_ + pad;
  std::memset(buf + header_len_ + payload_len_, 0, pad);
  if (trailer_len_ != 0) auth_->seal(qpn_, {buf, body}, buf + body);  // authenticated mode
  body += trailer_len_;
  const uint32_t icrc = icrc_ ? wire::compute_icrc(pkts_[used_].ip, {buf, body}) : 0;
  wire::store_icrc(icrc, buf + body);
  offset_[used_] = start_;
  pkts_[used_].data = {buf, total_len_};
  pkts_[used_].kind = kind_;
  fill_ = start_ + total_len_;
  ++used_;

  ++c.tx_packets;
  c.tx_bytes += total_len_;
  switch (wire::opcode_info(opcode_).kind) {
    case wire::OpKind::kSend: ++c.tx_send; break;
    case wire::OpKind::kWrite: ++c.tx_write; break;
    case wire::OpKind::kReadRequest: ++c.tx_read_request; break;
    case wire::OpKind::kReadResponse: ++c.tx_read_response; break;
    case wire::OpKind::kCompareSwap:
    case wire::OpKind::kFetchAdd:
    case wire::OpKind::kAtomicWrite: ++c.tx_atomic; break;
    case wire::OpKind::kAtomicAck: ++c.tx_atomic_ack; break;
    case wire::OpKind::kAck: break;  // ACK / NAK kinds are counted by the responder
    case wire::OpKind::kCnp: ++c.tx_cnp; break;
  }
  const size_t size = total_len_;
  if (used_ >= kMaxBatch) flush(port);
  return size;
}

void TxBatch::flush(PacketPort& port) {
  if (used_ == 0) return;
  port.send({pkts_.data(), used_});
  used_ = 0;
  fill_ = 0;
}

}  // namespace vrnic::engine
