// DCQCN's reaction point (Zhu et al., SIGCOMM 2015) for one QP, and its pacer: the rate a
// CNP cuts and the timer and byte counter restore, and when the QP's next packet may leave.
// Pure arithmetic on the times it is given (sans-IO); docs/protocol.md "Congestion control"
// states the rules step by step.
#pragma once
#include <cstdint>

namespace vrnic::engine {

// Every parameter, with the name NVIDIA's NICs give it (mlxconfig / sysfs), and their
// defaults. Rates in bits per second, times in ns.
struct DcqcnParams {
  bool enabled = true;                   // roce_cc_prio_mask: DCQCN on for the device's QPs
  double line_rate_bps = 25e9;           // the port's rate: the limiter starts and ends here
  double first_cnp_rate_bps = 0;         // rate_to_set_on_first_cnp (0: the current rate)
  double g = 5.0 / 1024;                 // 1 - dce_tcp_g/1024 (dce_tcp_g 1019)
  uint64_t alpha_period_ns = 1000;       // dce_tcp_rtt: 1 us
  double initial_alpha = 1023.0 / 1024;  // initial_alpha_value 1023
  uint64_t rate_reduce_period_ns = 4000; // rate_reduce_monitor_period: 4 us
  double min_dec_fraction = 0.5;         // rpg_min_dec_fac 50 %: one cut removes at most this
  double min_rate_bps = 1e6;             // rpg_min_rate: 1 Mb/s
  double ai_rate_bps = 5e6;              // rpg_ai_rate: 5 Mb/s
  double hai_rate_bps = 50e6;            // rpg_hai_rate: 50 Mb/s
  uint64_t timer_ns = 300000;            // rpg_time_reset: 300 us
  uint64_t byte_reset = 32767;           // rpg_byte_reset: 32767 B
  uint32_t threshold = 1;                // rpg_threshold (F)
  uint64_t min_time_between_cnps_ns = 4000;  // the notification point: min_time_between_cnps
  uint8_t cnp_dscp = 48;                 // cnp_dscp
  uint8_t data_dscp = 0;                 // DSCP of data packets whose QP sets no traffic class
  uint64_t pacer_burst_ns = 50000;       // how far behind the pace a late sender may catch up
  // Pace every QP at line rate, limiter or not: the NIC's own serialiser, for a device
  // whose port is a simulated link. Off in live mode, where the kernel's socket is the
  // serialiser (docs/protocol.md "Congestion control").
  bool pace_at_line_rate = false;
};

class Dcqcn {
 public:
  explicit Dcqcn(const DcqcnParams& p) : p_(p), rc_(p.line_rate_bps), rt_(p.line_rate_bps) {}

  // A CNP for this QP at `now`. The QP's first one starts the limiter (at first_cnp_rate or
  // the current rate, no cut); later ones cut the rate, at most once per rate-reduce period,
  // also when the limiter had been released back at line rate.
  void on_cnp(uint64_t now);
  // `bytes` left at `now`: the byte counter and the pacer.
  void on_sent(uint64_t bytes, uint64_t now);
  // Runs the timer events due by `now` (the increase timer, a cut deferred by the
  // rate-reduce period) and decays alpha.
  void advance(uint64_t now);
  // When the next timer event is due (UINT64_MAX: none; the limiter is released, alpha
  // decays on its own and is brought up to date at the next CNP).
  uint64_t next_event_ns() const;
  // When the pacer lets the next packet leave (<= now: at once).
  uint64_t next_send_ns() const { return limited_ || p_.pace_at_line_rate ? next_send_ : 0; }

  bool limited() const { return limited_; }
  double rate_bps() const { return rc_; }
  double target_bps() const { return rt_; }
  double alpha() const { return alpha_; }  // as of the last boundary brought up to date
  double alpha_at(uint64_t now) const;     // as of `now`
  uint32_t timer_events() const { return t_count_; }
  uint32_t byte_events() const { return b_count_; }

 private:
  void cut(uint64_t now);
  void increase();
  void restart_increase(uint64_t now);
  void advance_alpha(uint64_t now);
  double decayed(double base, uint64_t quiet) const;  // base x (1 - g)^quiet

  DcqcnParams p_;
  bool started_ = false;  // a CNP has come: alpha is kept from then on
  bool limited_ = false;
  double rc_, rt_;
  double alpha_ = 0;
  uint64_t alpha_start_ = 0;  // start of the alpha period in progress
  double alpha_base_ = 0;     // alpha after the last period that had a CNP (or the first CNP)
  uint64_t quiet_ = 0;        // periods without a CNP since: alpha_ = alpha_base_ (1 - g)^quiet_
  bool cnp_in_period_ = false;
  uint64_t last_cut_ = 0;
  bool cut_pending_ = false;
  uint64_t next_timer_ = 0;
  uint32_t t_count_ = 0, b_count_ = 0;
  uint64_t bytes_ = 0;  // sent since the last byte-counter event
  uint64_t next_send_ = 0;
};

}  // namespace vrnic::engine
