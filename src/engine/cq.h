// Completion queue: a ring of work completions with arming for completion-channel events.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/types.h"

namespace vrnic::engine {

class Cq {
 public:
  Cq(uint32_t depth, void* user_context);

  uint32_t depth() const { return static_cast<uint32_t>(ring_.size()); }
  uint32_t count() const { return count_; }
  void* user_context() const { return user_context_; }

  // Appends a CQE. Returns false (and drops it) when the ring is full: a CQ overrun, which
  // the device reports as an async CQ error (IBA 11.4.2.1).
  bool push(const WorkCompletion& wc);
  int poll(WorkCompletion* out, int n);
  // A new ring of `depth` entries holding the unpolled CQEs in order; false (nothing
  // changed) if depth is smaller than count().
  bool resize(uint32_t depth);

  void arm(bool solicited_only);
  // After a push: whether this CQE fires the armed notification (and disarms). Error
  // completions and solicited receives fire a solicited-only arm (IBA 11.4.2.2).
  bool take_notification(bool solicited, bool error);

  uint32_t users = 0;  // QPs using this CQ (destroy_cq is EBUSY while > 0)

 private:
  std::vector<WorkCompletion> ring_;
  uint32_t head_ = 0;  // next to poll
  uint32_t count_ = 0;
  void* user_context_;
  bool armed_ = false;
  bool solicited_only_ = false;
};

}  // namespace vrnic::engine
