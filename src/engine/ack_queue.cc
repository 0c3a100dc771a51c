// ACK queue: grouped ring of READ / atomic responder resources with a two-level PSN lookup.
#include "engine/ack_queue.h"

#include "wire/psn.h"

namespace vrnic::engine {

using wire::psn_diff;

AckQueue::AckQueue(uint32_t capacity) { reset(capacity); }

void AckQueue::reset(uint32_t capacity) {
  if (capacity == 0) capacity = 1;
  group_size_ = capacity < kGroupSize ? capacity : kGroupSize;
  capacity = (capacity + group_size_ - 1) / group_size_ * group_size_;
  slots_.assign(capacity, AckEntry{});
  group_psn_.assign(capacity / group_size_, 0);
  next_seq_ = 0;
  count_ = 0;
}

void AckQueue::clear() {
  next_seq_ = 0;
  count_ = 0;
}

AckEntry& AckQueue::push(const AckEntry& e) {
  if (count_ == slots_.size()) --count_;  // evict the oldest
  uint64_t n = next_seq_++;
  if (n % group_size_ == 0) group_psn_[(n / group_size_) % group_psn_.size()] = e.psn;
  AckEntry& slot = at_seq(n);
  slot = e;
  ++count_;
  return slot;
}

uint32_t AckQueue::group_start_psn(uint64_t group) const {
  uint64_t oldest = next_seq_ - count_;
  if (group == oldest / group_size_) return slots_[oldest % slots_.size()].psn;
  return group_psn_[group % group_psn_.size()];
}

AckEntry* AckQueue::find(uint32_t psn, uint32_t* probes) {
  uint32_t probed = 0;
  AckEntry* hit = nullptr;
  if (count_ > 0) {
    uint64_t oldest = next_seq_ - count_;
    uint32_t base = slots_[oldest % slots_.size()].psn;
    int64_t key = psn_diff(psn, base);  // PSNs in the queue are increasing from base
    if (key >= 0) {
      // First level: the last group whose start PSN is <= psn (binary search on the AQC).
      uint64_t lo = oldest / group_size_, hi = (next_seq_ - 1) / group_size_;
      while (lo < hi) {
        uint64_t mid = lo + (hi - lo + 1) / 2;
        ++probed;
        if (psn_diff(group_start_psn(mid), base) <= key) lo = mid; else hi = mid - 1;
      }
      // Second level: binary search inside that group only.
      uint64_t first = lo * group_size_ > oldest ? lo * group_size_ : oldest;
      uint64_t last = lo * group_size_ + group_size_ - 1;
      if (last > next_seq_ - 1) last = next_seq_ - 1;
      uint64_t a = first, b = last;
      while (a < b) {
        uint64_t mid = a + (b - a + 1) / 2;
        ++probed;
        if (psn_diff(at_seq(mid).psn, base) <= key) a = mid; else b = mid - 1;
      }
      AckEntry& e = at_seq(a);
      ++probed;
      int32_t off = psn_diff(psn, e.psn);
      if (off >= 0 && static_cast<uint32_t>(off) < e.span) hit = &e;
    }
  }
  if (probes) *probes = probed;
  return hit;
}

AckEntry* AckQueue::find_linear(uint32_t psn, uint32_t* probes) {
  uint32_t probed = 0;
  AckEntry* hit = nullptr;
  for (uint64_t n = next_seq_ - count_; n < next_seq_; ++n) {
    AckEntry& e = at_seq(n);
    ++probed;
    int32_t off = psn_diff(psn, e.psn);
    if (off >= 0 && static_cast<uint32_t>(off) < e.span) {
      hit = &e;
      break;
    }
  }
  if (probes) *probes = probed;
  return hit;
}

}  // namespace vrnic::engine
