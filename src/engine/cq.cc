// Completion queue ring and notification arming.
#include "engine/cq.h"

#include <utility>

namespace vrnic::engine {

Cq::Cq(uint32_t depth, void* user_context)
    : ring_(depth == 0 ? 1 : depth), user_context_(user_context) {}

bool Cq::push(const WorkCompletion& wc) {
  if (count_ == ring_.size()) return false;
  ring_[(head_ + count_) % ring_.size()] = wc;
  ++count_;
  return true;
}

int Cq::poll(WorkCompletion* out, int n) {
  int got = 0;
  while (got < n && count_ > 0) {
    out[got++] = ring_[head_];
    head_ = static_cast<uint32_t>((head_ + 1) % ring_.size());
    --count_;
  }
  return got;
}

bool Cq::resize(uint32_t depth) {
  if (depth == 0 || depth < count_) return false;
  std::vector<WorkCompletion> ring(depth);
  for (uint32_t i = 0; i < count_; ++i) ring[i] = ring_[(head_ + i) % ring_.size()];
  ring_ = std::move(ring);
  head_ = 0;
  return true;
}

void Cq::arm(bool solicited_only) {
  // A second arm may widen a solicited-only arm to "any", never narrow it.
  solicited_only_ = armed_ ? (solicited_only_ && solicited_only) : solicited_only;
  armed_ = true;
}

bool Cq::take_notification(bool solicited, bool error) {
  if (!armed_) return false;
  if (solicited_only_ && !solicited && !error) return false;
  armed_ = false;
  return true;
}

}  // namespace vrnic::engine
