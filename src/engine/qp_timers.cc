// QpTimers: the dense table of the QPs' timer bounds (qp_timers.h).
#include "engine/qp_timers.h"

#include "engine/qp.h"

namespace vrnic::engine {

void QpTimers::add(Qp& qp) {
  qp.timer_slot = static_cast<uint32_t>(qp_.size());
  qp_.push_back(&qp);
  at_.push_back(UINT64_MAX);
}

// The last slot moves into the freed one.
void QpTimers::remove(Qp& qp) {
  const uint32_t s = qp.timer_slot;
  qp_[s] = qp_.back();
  at_[s] = at_.back();
  qp_[s]->timer_slot = s;
  qp_.pop_back();
  at_.pop_back();
}

void QpTimers::lower(const Qp& qp, uint64_t t) {
  uint64_t& at = at_[qp.timer_slot];
  if (t < at) at = t;
}

void QpTimers::set(const Qp& qp, uint64_t t) { at_[qp.timer_slot] = t; }

void QpTimers::due(uint64_t now, std::vector<Qp*>& out) const {
  for (std::size_t i = 0; i < at_.size(); ++i)
    if (at_[i] <= now) out.push_back(qp_[i]);
}

// The smallest bound below t is either true (then it is the answer: every other QP's
// deadline is at least its bound) or is set to the true value and the search goes on.
uint64_t QpTimers::earliest(uint64_t t, Exact next) {
  for (;;) {
    std::size_t best = at_.size();
    uint64_t low = t;
    for (std::size_t i = 0; i < at_.size(); ++i)
      if (at_[i] < low) low = at_[i], best = i;
    if (best == at_.size()) return t;
    const uint64_t n = next(*qp_[best]);
    if (n == low) return n;
    at_[best] = n;
  }
}

}  // namespace vrnic::engine
