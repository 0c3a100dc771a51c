// DCQCN+w and HPCC as the engine's rate controllers (congestion.h).
#include "sim/congestion.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace vrnic::sim {

const char* scheme_name(CcScheme s) {
  return s == CcScheme::kDcqcn ? "dcqcn" : s == CcScheme::kDcqcnWindow ? "dcqcn+w" : "hpcc";
}

CcScheme parse_scheme(const std::string& name) {
  if (name == "dcqcn") return CcScheme::kDcqcn;
  if (name == "dcqcn+w") return CcScheme::kDcqcnWindow;
  if (name == "hpcc") return CcScheme::kHpcc;
  throw std::runtime_error("scenario: congestion control \"" + name +
                           "\" is not \"dcqcn\", \"dcqcn+w\" or \"hpcc\"");
}

uint64_t DcqcnWindow::window_bytes() const {
  const double w = static_cast<double>(bdp_) * rp_.rate_bps() / p_.line_rate_bps;
  return std::max<uint64_t>(1, static_cast<uint64_t>(w));
}

Hpcc::Hpcc(const HpccParams& p, const CcPath& path)
    : p_(p), path_(path), rate_(path.line_rate_bps), rc_(path.line_rate_bps) {
  if (p_.base_rtt_ns == 0) p_.base_rtt_ns = path.base_rtt_ns;
}

uint64_t Hpcc::window_bytes() const {
  const double w = rate_ / 8e9 * static_cast<double>(p_.base_rtt_ns);
  return std::max<uint64_t>(1, static_cast<uint64_t>(w));
}

void Hpcc::on_sent(uint64_t bytes, uint64_t now) {
  ++sent_;
  next_send_ = std::max(next_send_, now) +
               static_cast<uint64_t>(std::ceil(static_cast<double>(bytes) * 8e9 / rate_));
}

// The largest utilisation any hop reports since the last record (0 if none is comparable);
// `span_ns`: the time the largest one's two records span.
double Hpcc::measure(const IntRecord& rec, uint64_t& span_ns) {
  double u_max = 0;
  span_ns = 0;
  const double t = static_cast<double>(p_.base_rtt_ns) * 1e-9;
  for (uint32_t i = 0; i < rec.hops && i < last_.hops; ++i) {
    const IntHop& now = rec.hop[i];
    const IntHop& then = last_.hop[i];
    if (now.ts_ns <= then.ts_ns || now.rate_bps <= 0) continue;
    const uint64_t tau = now.ts_ns - then.ts_ns;
    const double tx_rate = static_cast<double>(now.tx_bytes - then.tx_bytes) * 8e9 /
                           static_cast<double>(tau);
    const double qlen = static_cast<double>(std::min(now.qlen, then.qlen));
    const double u = tx_rate / now.rate_bps + qlen * 8 / (now.rate_bps * t);
    if (u > u_max) u_max = u, span_ns = tau;
  }
  return u_max;
}

void Hpcc::on_ack(uint32_t ack_psn, const IntRecord& rec, uint64_t) {
  if (!have_hops_ || rec.hops != last_.hops) {  // the first record (or a new path): kept
    last_ = rec;
    have_hops_ = true;
    update_psn_ = sent_;
    return;
  }
  uint64_t span = 0;
  const double u_new = measure(rec, span);
  last_ = rec;
  if (span == 0) return;
  const double t = static_cast<double>(p_.base_rtt_ns);
  const double dt = std::min(static_cast<double>(span), t);
  u_ = (u_ * (t - dt) + u_new * dt) / t;
  const double k = u_ / p_.eta;
  const bool multiplicative = k >= 1 || stage_ >= p_.max_stage;
  double r = multiplicative ? rc_ / k + p_.ai_rate_bps : rc_ + p_.ai_rate_bps;
  r = std::clamp(r, p_.min_rate_bps, path_.line_rate_bps);
  rate_ = r;
  // Once per RTT: the reference moves when the ACK covers what was sent at the last move.
  if (static_cast<int32_t>((ack_psn + 1 - update_psn_) << 8) > 0) {
    rc_ = r;
    stage_ = multiplicative ? 0 : stage_ + 1;
    update_psn_ = sent_;
  }
}

std::unique_ptr<engine::RateControl> SchemeFactory::make(uint32_t) {
  if (scheme_ == CcScheme::kHpcc) return std::make_unique<Hpcc>(hpcc_, path_);
  return std::make_unique<DcqcnWindow>(dcqcn_, path_.bdp_bytes);
}

}  // namespace vrnic::sim
