// Packet building and batching for the engine's transmit side.
#include "engine/tx_batch.h"

#include <cstring>

#include "wire/opcode.h"

namespace vrnic::engine {

std::span<uint8_t> TxBatch::start(const wire::Packet& p, size_t payload_len,
                                  const wire::IpUdpInfo& ip) {
  if (bufs_.size() <= used_) bufs_.resize(used_ + 1);
  if (pkts_.size() <= used_) pkts_.resize(used_ + 1);
  std::vector<uint8_t>& buf = bufs_[used_];
  wire::Packet hdr = p;
  uint8_t pad = wire::pad_for(payload_len);
  hdr.bth.pad_count = pad;
  header_len_ = wire::header_size(hdr.bth.opcode);
  payload_len_ = payload_len;
  opcode_ = hdr.bth.opcode;
  buf.resize(header_len_ + payload_len + pad + wire::kIcrcSize);
  wire::write_headers(hdr, buf.data());
  pkts_[used_].ip = ip;
  pkts_[used_].tos = 0;
  return {buf.data() + header_len_, payload_len};
}

void TxBatch::commit(PacketPort& port, Counters& c) {
  std::vector<uint8_t>& buf = bufs_[used_];
  size_t pad = wire::pad_for(payload_len_);
  size_t body = header_len_ + payload_len_ + pad;
  std::memset(buf.data() + header_len_ + payload_len_, 0, pad);
  uint32_t icrc = wire::compute_icrc(pkts_[used_].ip, {buf.data(), body});
  wire::store_icrc(icrc, buf.data() + body);
  pkts_[used_].data = {buf.data(), buf.size()};
  ++used_;

  ++c.tx_packets;
  c.tx_bytes += buf.size();
  switch (wire::opcode_info(opcode_).kind) {
    case wire::OpKind::kSend: ++c.tx_send; break;
    case wire::OpKind::kWrite: ++c.tx_write; break;
    case wire::OpKind::kReadRequest: ++c.tx_read_request; break;
    case wire::OpKind::kReadResponse: ++c.tx_read_response; break;
    case wire::OpKind::kCompareSwap:
    case wire::OpKind::kFetchAdd: ++c.tx_atomic; break;
    case wire::OpKind::kAtomicAck: ++c.tx_atomic_ack; break;
    case wire::OpKind::kAck: break;  // ACK / NAK kinds are counted by the responder
    case wire::OpKind::kCnp: ++c.tx_cnp; break;
  }
  if (used_ >= kMaxBatch) flush(port);
}

void TxBatch::flush(PacketPort& port) {
  if (used_ == 0) return;
  port.send({pkts_.data(), used_});
  used_ = 0;
}

}  // namespace vrnic::engine
