// DCQCN's reaction point: rate cuts on CNPs, alpha, fast recovery, additive and hyper
// increase from the timer and byte counter, and the pacer.
#include "engine/dcqcn.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace vrnic::engine {

void Dcqcn::on_cnp(uint64_t now) {
  advance(now);
  if (!started_) {
    // The QP's first CNP gives it a rate limiter, at rate_to_set_on_first_cnp or else at the
    // rate it sends now; it cuts nothing (NVIDIA's behaviour).
    started_ = limited_ = true;
    if (p_.first_cnp_rate_bps > 0) rc_ = std::min(p_.first_cnp_rate_bps, p_.line_rate_bps);
    rt_ = rc_;
    alpha_ = alpha_base_ = p_.initial_alpha;
    quiet_ = 0;
    alpha_start_ = now;
    cnp_in_period_ = false;
    last_cut_ = now;
    cut_pending_ = false;
    next_send_ = std::max(next_send_, now);
    restart_increase(now);
    return;
  }
  if (!limited_) {
    // Released back at line rate: the limiter takes hold again at once, with alpha as it
    // decayed meanwhile, and this CNP cuts (else a QP whose byte counter brings it back
    // between sparse CNPs would never be slowed).
    limited_ = true;
    advance_alpha(now);
    next_send_ = std::max(next_send_, now);
  }
  cnp_in_period_ = true;  // alpha rises at the end of this alpha period
  if (now - last_cut_ >= p_.rate_reduce_period_ns) cut(now);
  else cut_pending_ = true;  // at most one cut per rate-reduce period: this one at its end
}

void Dcqcn::cut(uint64_t now) {
  rt_ = rc_;
  const double fraction = std::min(alpha_ / 2, p_.min_dec_fraction);
  rc_ = std::max(rc_ * (1 - fraction), p_.min_rate_bps);
  last_cut_ = now;
  cut_pending_ = false;
  restart_increase(now);
}

void Dcqcn::restart_increase(uint64_t now) {
  t_count_ = 0;
  b_count_ = 0;
  bytes_ = 0;
  next_timer_ = now + p_.timer_ns;
}

// One timer or byte-counter event (its count already raised): fast recovery while neither
// count exceeds F, hyper increase once both do, additive increase in between; then the
// current rate moves halfway to the target. Back at line rate, the limiter is released.
void Dcqcn::increase() {
  const uint32_t f = p_.threshold;
  if (std::max(t_count_, b_count_) <= f) {
    // fast recovery: the target stays
  } else if (std::min(t_count_, b_count_) > f) {
    rt_ += p_.hai_rate_bps;
  } else {
    rt_ += p_.ai_rate_bps;
  }
  rt_ = std::min(rt_, p_.line_rate_bps);
  rc_ = (rt_ + rc_) / 2;
  if (rt_ >= p_.line_rate_bps && p_.line_rate_bps - rc_ < p_.ai_rate_bps) {
    limited_ = false;
    rc_ = rt_ = p_.line_rate_bps;
  }
}

// Alpha at each alpha-period boundary up to `now`: (1 - g) alpha + g if a CNP came in the
// period, (1 - g) alpha if none did. Kept as the value after the last period with a CNP and
// the count of quiet periods since, so that alpha at a boundary is the same whether it was
// brought up to date at every boundary or once after many (whenever a timer, a packet or a
// CNP happens to look): nothing depends on how often the device's timer runs.
void Dcqcn::advance_alpha(uint64_t now) {
  const uint64_t period = p_.alpha_period_ns;
  if (period == 0 || now < alpha_start_ + period) return;
  if (cnp_in_period_) {
    alpha_base_ = (1 - p_.g) * alpha_ + p_.g;
    quiet_ = 0;
  } else {
    ++quiet_;
  }
  cnp_in_period_ = false;
  alpha_start_ += period;
  const uint64_t quiet = (now - alpha_start_) / period;  // whole periods with no CNP
  quiet_ += quiet;
  alpha_start_ += quiet * period;
  alpha_ = decayed(alpha_base_, quiet_);
}

double Dcqcn::decayed(double base, uint64_t quiet) const {
  return quiet == 0 ? base : base * std::pow(1 - p_.g, static_cast<double>(quiet));
}

// advance_alpha(now) without changing anything.
double Dcqcn::alpha_at(uint64_t now) const {
  const uint64_t period = p_.alpha_period_ns;
  if (!limited_ || period == 0 || now < alpha_start_ + period) return alpha_;
  const uint64_t later = (now - alpha_start_ - period) / period;  // after the first boundary
  if (cnp_in_period_) return decayed((1 - p_.g) * alpha_ + p_.g, later);
  return decayed(alpha_base_, quiet_ + 1 + later);
}

void Dcqcn::advance(uint64_t now) {
  while (limited_) {
    const uint64_t cut_at = cut_pending_ ? last_cut_ + p_.rate_reduce_period_ns : UINT64_MAX;
    const uint64_t at = std::min(cut_at, next_timer_);
    if (at > now) break;
    advance_alpha(at);
    if (cut_at <= next_timer_) {
      cut(at);
    } else {
      ++t_count_;
      next_timer_ += p_.timer_ns;
      increase();
    }
  }
  if (limited_) advance_alpha(now);
}

uint64_t Dcqcn::next_event_ns() const {
  if (!limited_) return UINT64_MAX;
  const uint64_t cut_at = cut_pending_ ? last_cut_ + p_.rate_reduce_period_ns : UINT64_MAX;
  return std::min(cut_at, next_timer_);
}

void Dcqcn::on_sent(uint64_t bytes, uint64_t now) {
  advance(now);
  if (limited_) {
    bytes_ += bytes;
    while (bytes_ >= p_.byte_reset && p_.byte_reset > 0 && limited_) {
      bytes_ -= p_.byte_reset;
      ++b_count_;
      increase();
    }
  }
  if (!limited_ && !p_.pace_at_line_rate) return;
  // The pacer: this packet takes bytes * 8 / rate of the link; a sender that fell behind
  // (woken late) may catch up by at most pacer_burst_ns.
  const uint64_t floor = now > p_.pacer_burst_ns ? now - p_.pacer_burst_ns : 0;
  const uint64_t start = std::max(next_send_, floor);
  next_send_ = start + static_cast<uint64_t>(std::ceil(static_cast<double>(bytes) * 8e9 / rc_));
}

}  // namespace vrnic::engine
