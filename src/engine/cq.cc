// Completion queue ring and notification arming.
#include "engine/cq.h"

#include <new>
#include <utility>

namespace vrnic::engine {

Cq::Cq(uint32_t depth, void* user_context, WorkCompletion* ring)
    : depth_(depth == 0 ? 1 : depth), user_context_(user_context) {
  if (ring) {
    ring_ = ring;
    for (uint32_t i = 0; i < depth_; ++i) new (&ring_[i]) WorkCompletion{};
  } else {
    own_.resize(depth_);
    ring_ = own_.data();
  }
}

bool Cq::push(const WorkCompletion& wc) {
  if (count_ == depth_) return false;
  ring_[(head_ + count_) % depth_] = wc;
  ++count_;
  return true;
}

int Cq::poll(WorkCompletion* out, int n) {
  int got = 0;
  while (got < n && count_ > 0) {
    out[got++] = ring_[head_];
    head_ = static_cast<uint32_t>((head_ + 1) % depth_);
    --count_;
  }
  return got;
}

bool Cq::resize(uint32_t depth, WorkCompletion* ring) {
  if (depth == 0 || depth < count_) return false;
  std::vector<WorkCompletion> own;
  if (ring) {
    for (uint32_t i = 0; i < depth; ++i) new (&ring[i]) WorkCompletion{};
  } else {
    own.resize(depth);
    ring = own.data();
  }
  for (uint32_t i = 0; i < count_; ++i) ring[i] = ring_[(head_ + i) % depth_];
  own_ = std::move(own);  // the old ring, if it was the CQ's own, goes now
  ring_ = ring;
  depth_ = depth;
  head_ = 0;
  return true;
}

uint32_t Cq::remove_qp(uint32_t qpn) {
  uint32_t kept = 0;
  for (uint32_t i = 0; i < count_; ++i) {
    const WorkCompletion& wc = ring_[(head_ + i) % depth_];
    if (wc.qp_num == qpn) continue;
    if (kept != i) ring_[(head_ + kept) % depth_] = wc;
    ++kept;
  }
  const uint32_t dropped = count_ - kept;
  count_ = kept;
  return dropped;
}

void Cq::arm(bool solicited_only) {
  if (!armed_) held_ = 0;
  // A second arm may widen a solicited-only arm to "any", never narrow it.
  solicited_only_ = armed_ ? (solicited_only_ && solicited_only) : solicited_only;
  armed_ = true;
}

bool Cq::take_notification(bool solicited, bool error, uint64_t now_ns) {
  if (!armed_) return false;
  if (solicited_only_ && !solicited && !error) return false;
  if (++held_ == 1) first_held_ns_ = now_ns;
  if ((mod_count_ == 0 && mod_period_ns_ == 0) || (mod_count_ != 0 && held_ >= mod_count_)) {
    fire();
    return true;
  }
  if (mod_period_ns_ != 0) deadline_ns_ = first_held_ns_ + mod_period_ns_;
  return false;
}

void Cq::set_moderation(uint16_t count, uint64_t period_ns) {
  mod_count_ = count;
  mod_period_ns_ = period_ns;
  // CQEs already held back are measured against the new values.
  deadline_ns_ = (armed_ && held_ > 0 && period_ns != 0) ? first_held_ns_ + period_ns
                                                           : UINT64_MAX;
}

bool Cq::take_due_notification(uint64_t now_ns) {
  if (!armed_ || held_ == 0) return false;
  const bool by_count = mod_count_ == 0 ? mod_period_ns_ == 0 : held_ >= mod_count_;
  if (!by_count && now_ns < deadline_ns_) return false;
  fire();
  return true;
}

}  // namespace vrnic::engine
