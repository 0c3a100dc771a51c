// The simulator's congestion-control schemes besides the engine's own DCQCN, as controllers
// of the engine's optional interface (engine/rate_control.h): DCQCN+w (DCQCN with a window
// of one BDP scaled by the current rate, as the HPCC simulator's dcqcn_vwin) and HPCC (Li et
// al., SIGCOMM 2019: INT records stamped by the switches on data packets and echoed in ACKs;
// window and rate from them). docs/sim.md "Congestion control".
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/dcqcn.h"
#include "engine/rate_control.h"

namespace vrnic::sim {

enum class CcScheme : uint8_t { kDcqcn, kDcqcnWindow, kHpcc };
// "dcqcn", "dcqcn+w", "hpcc"; parse_scheme throws std::runtime_error for another name.
const char* scheme_name(CcScheme s);
CcScheme parse_scheme(const std::string& name);

// One switch egress port's INT record (HPCC's per-hop fields), stamped as a data packet
// leaves the port.
struct IntHop {
  uint64_t ts_ns = 0;     // when the packet left
  uint64_t tx_bytes = 0;  // bytes the port had sent before it (all priorities)
  uint64_t qlen = 0;      // bytes the port held after it left (all priorities)
  double rate_bps = 0;    // the port's link rate
};
inline constexpr uint32_t kMaxIntHops = 5;  // as the HPCC simulator's IntHeader
// The INT header's bytes on the wire (HPCC simulator: 5 hops of 8 bytes and a hop count).
inline constexpr uint32_t kIntHeaderBytes = kMaxIntHops * 8 + 2;

struct IntRecord {
  uint32_t hops = 0;
  std::array<IntHop, kMaxIntHops> hop{};
  void push(const IntHop& h) {
    if (hops < kMaxIntHops) hop[hops++] = h;
  }
};

struct HpccParams {
  double eta = 0.95;            // target utilisation (the paper: 95 %)
  uint32_t max_stage = 5;       // additive-increase stages before a multiplicative update
  double ai_rate_bps = 40e6;    // W_AI as a rate (W_AI = ai_rate x T); HPCC sim: 10 Mb/s x bw/25G
  double min_rate_bps = 1e9;    // the rate never goes below this (HPCC sim's MIN_RATE)
  uint64_t base_rtt_ns = 0;     // T; 0: the fabric's longest base RTT (set at build)
  uint32_t ack_interval = 0;    // data packets per ACK asked for; 0: the engine's (16)
};

// What the schemes need besides their own parameters: the NIC's line rate, the base RTT
// (T) and one BDP (line rate x T), as the HPCC simulator sets them (its GLOBAL_T: the
// longest host pair's).
struct CcPath {
  double line_rate_bps = 100e9;
  uint64_t base_rtt_ns = 0;
  uint64_t bdp_bytes = 0;
};

// DCQCN+w: the engine's DCQCN reaction point, paced at line rate until the first CNP, with
// a window of bdp x rate / line rate (at least 1 byte: one packet in flight).
class DcqcnWindow : public engine::RateControl {
 public:
  DcqcnWindow(const engine::DcqcnParams& p, uint64_t bdp_bytes) : rp_(p), p_(p), bdp_(bdp_bytes) {}
  void on_cnp(uint64_t now) override { rp_.on_cnp(now); }
  void on_sent(uint64_t bytes, uint64_t now) override { rp_.on_sent(bytes, now); }
  void advance(uint64_t now) override { rp_.advance(now); }
  uint64_t next_event_ns() const override { return rp_.next_event_ns(); }
  uint64_t next_send_ns() const override { return rp_.next_send_ns(); }
  uint64_t window_bytes() const override;
  double rate_bps() const override { return rp_.rate_bps(); }

 private:
  engine::Dcqcn rp_;
  engine::DcqcnParams p_;
  uint64_t bdp_;
};

// HPCC (the paper's Algorithm 1 with the HPCC simulator's rate form): per ACK, the INT it
// echoes gives each hop's utilisation u = txRate / B + min(qlen, last qlen) / (B x T); the
// largest, U, is smoothed over T (EWMA by the time the hop's records span). With
// Rc the reference rate: if U / eta >= 1 or the increase stage has reached max_stage,
// R = Rc / (U / eta) + R_AI, else R = Rc + R_AI; the reference (Rc, stage) moves only once
// per RTT (an ACK past the PSN sent at the last such update). The window is R x T, the
// pacer sends at R. A flow starts at line rate.
class Hpcc : public engine::RateControl {
 public:
  Hpcc(const HpccParams& p, const CcPath& path);
  // An ACK of `ack_psn` (the PSN it acknowledges) echoing `rec`, at `now`.
  void on_ack(uint32_t ack_psn, const IntRecord& rec, uint64_t now);
  void on_cnp(uint64_t) override {}  // HPCC does not use ECN
  void on_sent(uint64_t bytes, uint64_t now) override;
  void advance(uint64_t) override {}
  uint64_t next_event_ns() const override { return UINT64_MAX; }
  uint64_t next_send_ns() const override { return next_send_; }
  uint64_t window_bytes() const override;
  double rate_bps() const override { return rate_; }
  uint32_t ack_interval() const override { return p_.ack_interval; }
  double utilisation() const { return u_; }
  double reference_rate_bps() const { return rc_; }
  uint32_t stage() const { return stage_; }

 private:
  double measure(const IntRecord& rec, uint64_t& span_ns);
  HpccParams p_;
  CcPath path_;
  double rate_, rc_;
  double u_ = 0;
  uint32_t stage_ = 0;
  bool have_hops_ = false;
  IntRecord last_;
  uint32_t sent_ = 0;          // packets sent: the next PSN (the simulator's QPs start at 0)
  uint32_t update_psn_ = 0;    // the next PSN when Rc was last updated
  uint64_t next_send_ = 0;
};

// The factory the simulator gives its engines (DeviceConfig::rate_control).
class SchemeFactory : public engine::RateControlFactory {
 public:
  SchemeFactory(CcScheme s, const engine::DcqcnParams& dcqcn, const HpccParams& hpcc,
                const CcPath& path)
      : scheme_(s), dcqcn_(dcqcn), hpcc_(hpcc), path_(path) {}
  std::unique_ptr<engine::RateControl> make(uint32_t qpn) override;

 private:
  CcScheme scheme_;
  engine::DcqcnParams dcqcn_;
  HpccParams hpcc_;
  CcPath path_;
};

}  // namespace vrnic::sim
