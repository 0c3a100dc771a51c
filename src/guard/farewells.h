// The CM guard's policy, sans-IO: which DREQs a dead process owes, when each is sent and resent.
#pragma once
#include <cstdint>
#include <map>
#include <vector>

#include "cm/guard_record.h"

namespace vrnic::guard {

// Fed the process's records while it lives, then, once it is gone, asked at each `now` what
// to send: every kept connection's DREQ at once, then again after kFirstGapNs, doubling, kTries
// times in all. The DREPs cannot come back to the guard (they go to the dead process's port
// 4791, which the guard leaves free for the next program on that address), so every DREQ is
// sent kTries times: a lost one is covered, and a peer that got it counts the rest as
// duplicates.
class Farewells {
 public:
  static constexpr int kTries = 3;
  static constexpr uint64_t kFirstGapNs = 100'000'000;

  void apply(const cm::GuardRecord& r);  // kKeep adds (or replaces), kDrop forgets
  size_t kept() const { return owed_.size(); }

  // The process is gone: from `now` on, send.
  void start(uint64_t now);
  // The DREQs due at `now` (each counted as one try); their next send is scheduled.
  std::vector<const cm::GuardRecord*> due(uint64_t now);
  // When due() next has something (UINT64_MAX: never again); done() once nothing is owed.
  uint64_t next() const;
  bool done() const { return next() == UINT64_MAX; }

 private:
  struct Owed {
    cm::GuardRecord rec;
    int sent = 0;
    uint64_t at = UINT64_MAX;  // next send
  };
  std::map<uint32_t, Owed> owed_;  // by our comm ID
};

}  // namespace vrnic::guard
