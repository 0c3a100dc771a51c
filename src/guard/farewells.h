// The CM guard's policy, sans-IO: which DREQs a dead process owes, when each is sent and resent.
#pragma once
#include <cstdint>
#include <map>
#include <vector>

#include "cm/guard_record.h"

namespace vrnic::guard {

// Fed the process's records while it lives, then, once it is gone, asked at each `now` what
// to send: every kept connection's DREQ at once, resent on the kernel CM's pattern of a
// response timeout (here kFirstTimeoutNs, doubling) until its DREP comes or kTries are spent.
class Farewells {
 public:
  static constexpr int kTries = 4;
  static constexpr uint64_t kFirstTimeoutNs = 250'000'000;

  void apply(const cm::GuardRecord& r);  // kKeep adds (or replaces), kDrop forgets
  size_t kept() const { return owed_.size(); }

  // The process is gone: from `now` on, send.
  void start(uint64_t now);
  // The DREQs due at `now` (each counted as one try); their next resend is scheduled.
  std::vector<const cm::GuardRecord*> due(uint64_t now);
  // A DREP from `peer` for our comm ID `conn` (its remote_comm_id): that DREQ is answered.
  // False if no DREQ waits for it (not ours, or from another address).
  bool answered(const cm::Endpoint& peer, uint32_t conn);
  // When due() next has something (UINT64_MAX: never again); done() once nothing is owed.
  uint64_t next() const;
  bool done() const { return next() == UINT64_MAX; }
  uint64_t unanswered() const { return unanswered_; }  // DREQs given up after kTries

 private:
  struct Owed {
    cm::GuardRecord rec;
    int sent = 0;
    uint64_t at = UINT64_MAX;  // next send
  };
  std::map<uint32_t, Owed> owed_;  // by our comm ID
  uint64_t unanswered_ = 0;
};

}  // namespace vrnic::guard
