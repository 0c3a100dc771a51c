// A stream rsocket's flow control: windows, credits, the receive ring and credit updates.
#include "rdmacm/rsocket_flow.h"

#include <algorithm>

namespace vrnic::rdmacm::rs {

StreamFlow::StreamFlow(const Local& local, uint8_t* table) : local_(local), table_(table) {
  iomaps_.resize(local.iomap_entries);
}

ConnData StreamFlow::conn_data() const {
  ConnData c;
  c.flags = kConnFlagIomap | (host_be_ ? kConnFlagNet : 0);
  c.credits = local_.rq_size;
  c.iomap_scale = iomap_scale_of(local_.iomap_entries);
  c.target_sgl = {local_.table_addr, local_.table_rkey, kTargetSgeCount};
  c.data_buf = {local_.rbuf_addr, local_.rbuf_rkey, half()};  // the first window
  return c;
}

bool StreamFlow::start(const ConnData& peer) {
  // rdma-core writes its first credit update to entry 1, then 0, 1, …: two entries at least.
  if (peer.target_sgl.length < kTargetSgeCount) return false;
  peer_sgl_ = peer.target_sgl;
  peer_sge_ = 1;
  peer_be_ = peer.flags & kConnFlagNet;
  if (peer.flags & kConnFlagIomap) {
    peer_iomap_ = {peer_sgl_.addr + kSgeSize * peer_sgl_.length, peer_sgl_.key,
                   iomap_size_of(peer.iomap_scale)};
  }
  target_[0] = peer.data_buf;
  target_[1] = {};
  target_index_ = 0;
  sseq_comp_ = peer.credits;
  // The first half of this side's buffer went out in the connection data; the second is
  // handed over by the first credit update.
  rbuf_free_offset_ = half();
  rbuf_avail_ = half();
  rseq_comp_ = local_.rq_size / 2;
  started_ = true;
  return true;
}

bool StreamFlow::can_send() const { return sseq_no_ != sseq_comp_ && window() != 0; }

uint32_t StreamFlow::window() const { return target_[target_index_].length; }

// The peer writes a new window only into an entry this side has used up (it hands a half of
// its buffer back once it has read all of it), so an entry is read again from the table only
// while its copy is empty, and only after a credit update's completion, when the write that
// carried it has landed.
void StreamFlow::refresh_windows() {
  for (uint32_t i = 0; i < kTargetSgeCount; ++i) {
    if (target_[i].length == 0) target_[i] = get_sge(table_ + i * kSgeSize, host_be_);
  }
}

Write StreamFlow::data(uint32_t len) {
  Sge& t = target_[target_index_];
  const Write w{t.addr, t.key, imm_of(Op::kData, len), len};
  t.addr += len;
  t.length -= len;
  if (t.length == 0) {
    put_sge(table_ + target_index_ * kSgeSize, t, host_be_);  // used up: the peer may refill it
    target_index_ = (target_index_ + 1) % kTargetSgeCount;
  }
  ++sseq_no_;
  return w;
}

Write StreamFlow::iomap(uint32_t index, const IomapEntry& e, uint8_t bytes[kIomapEntrySize]) {
  put_iomap_entry(bytes, e, peer_be_);
  ++sseq_no_;
  return {peer_iomap_.addr + uint64_t(index) * kIomapEntrySize, peer_iomap_.key,
          imm_of(Op::kIomapSgl, index), uint32_t(kIomapEntrySize)};
}

Write StreamFlow::ctrl(Ctrl c) {
  ++ctrl_sent_;
  return {0, 0, imm_of(Op::kCtrl, uint32_t(c)), 0};
}

Rx StreamFlow::on_imm(uint32_t imm) {
  const uint32_t arg = imm_data(imm);
  switch (imm_op(imm)) {
    case Op::kData:
      if (arg > local_.rbuf_size) return Rx::kBad;
      if (arg == 0) {
        ++rseq_no_;  // nothing to read: consumed at once
      } else {
        rmsg_.push_back(arg);
      }
      return Rx::kData;
    case Op::kSgl:
      sseq_comp_ = static_cast<uint16_t>(arg);
      refresh_windows();
      return Rx::kCredit;
    case Op::kIomapSgl: {
      const uint32_t index = arg & 0xffff;
      if (index < iomaps_.size()) {
        const uint8_t* at = table_ + kTargetSgeCount * kSgeSize + index * kIomapEntrySize;
        iomaps_[index] = get_iomap_entry(at, host_be_);
      }
      return Rx::kIomap;
    }
    case Op::kCtrl:
      if (arg == uint32_t(Ctrl::kDisconnect)) return Rx::kDisconnect;
      if (arg == uint32_t(Ctrl::kShutdown)) return Rx::kShutdown;
      return Rx::kIgnored;
    default: return Rx::kIgnored;
  }
}

const IomapEntry* StreamFlow::find_iomap(uint64_t offset) const {
  for (const IomapEntry& e : iomaps_) {
    if (e.sge.length && offset >= e.offset && offset < e.offset + e.sge.length) return &e;
  }
  return nullptr;
}

std::vector<Chunk> StreamFlow::chunks(size_t want) const {
  std::vector<Chunk> out;
  uint32_t at = rbuf_offset_;
  for (uint32_t left : rmsg_) {
    while (left && want) {
      const auto n = static_cast<uint32_t>(std::min<size_t>({want, left, local_.rbuf_size - at}));
      out.push_back({at, n});
      at = (at + n) % local_.rbuf_size;
      left -= n;
      want -= n;
    }
    if (!want) break;
  }
  return out;
}

void StreamFlow::consume(size_t n) {
  while (n && !rmsg_.empty()) {
    const auto step = static_cast<uint32_t>(std::min<size_t>(n, rmsg_.front()));
    rbuf_offset_ = (rbuf_offset_ + step) % local_.rbuf_size;
    rbuf_avail_ += step;
    n -= step;
    if ((rmsg_.front() -= step) == 0) {
      rmsg_.pop_front();
      ++rseq_no_;
    }
  }
}

// Due once half the buffer is free again (a new window goes with it) or half the message
// credits were used (a bare update); either way the peer may have rq_size messages unread.
std::optional<Grant> StreamFlow::grant(bool may_send) {
  const bool window_due = rbuf_avail_ >= half();
  const bool credits_due = static_cast<int16_t>(uint16_t(rseq_no_ - rseq_comp_)) >= 0;
  if (!may_send || !ctrl_avail() || (!window_due && !credits_due)) return std::nullopt;
  ++ctrl_sent_;
  rseq_comp_ = static_cast<uint16_t>(rseq_no_ + local_.rq_size / 2);
  Grant g;
  g.write.imm = imm_of(Op::kSgl, uint32_t(rseq_no_) + local_.rq_size);
  if (window_due) {
    g.with_sge = true;
    g.sge = {local_.rbuf_addr + rbuf_free_offset_, local_.rbuf_rkey, half()};
    put_sge(g.bytes.data(), g.sge, peer_be_);
    g.write.remote_addr = peer_sgl_.addr + uint64_t(peer_sge_) * kSgeSize;
    g.write.rkey = peer_sgl_.key;
    g.write.length = kSgeSize;
    rbuf_avail_ -= half();
    rbuf_free_offset_ = (rbuf_free_offset_ + half()) % local_.rbuf_size;
    if (++peer_sge_ == peer_sgl_.length) peer_sge_ = 0;
  }
  return g;
}

Chunk SendRing::place(uint32_t want, uint32_t low) const {
  if (want == 0) return {};
  if (pieces_.empty()) return {0, std::min(want, size_)};
  const uint32_t need = std::min(want, low);
  uint32_t at = tail_, room;
  if (wrapped_) {
    room = head_ - tail_;
  } else if (size_ - tail_ >= need) {
    room = size_ - tail_;
  } else {  // too little left at the end: start again at the front (the end stays unused)
    at = 0;
    room = head_;
  }
  if (room < need || room == 0) return {};
  return {at, std::min(want, room)};
}

Chunk SendRing::take(uint32_t want, uint32_t low) {
  const Chunk c = place(want, low);
  if (c.length == 0) return c;
  if (pieces_.empty()) {
    head_ = 0;
    wrapped_ = false;
  } else if (c.offset == 0) {
    wrapped_ = true;
  }
  tail_ = c.offset + c.length;
  pieces_.push_back(c);
  return c;
}

void SendRing::release_oldest() {
  if (pieces_.empty()) return;
  pieces_.pop_front();
  if (pieces_.empty()) return;
  const uint32_t next = pieces_.front().offset;
  if (next < head_) wrapped_ = false;  // the oldest is now the first of the front
  head_ = next;
}

}  // namespace vrnic::rdmacm::rs
