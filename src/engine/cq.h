// Completion queue: a ring of work completions with arming for completion-channel events.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/types.h"

namespace vrnic::engine {

class Cq {
 public:
  // ring: memory for `depth` CQEs that the caller supplies and frees after the CQ is gone or
  // resized (a parent domain's allocator, in the verbs); null: the CQ allocates its own.
  Cq(uint32_t depth, void* user_context, WorkCompletion* ring = nullptr);
  Cq(const Cq&) = delete;
  Cq& operator=(const Cq&) = delete;

  uint32_t depth() const { return depth_; }
  uint32_t count() const { return count_; }
  void* user_context() const { return user_context_; }

  // Appends a CQE. Returns false (and drops it) when the ring is full: a CQ overrun, which
  // the device reports as an async CQ error (IBA 11.4.2.1).
  bool push(const WorkCompletion& wc);
  int poll(WorkCompletion* out, int n);
  // A new ring of `depth` entries (in `ring` if given, as for the constructor) holding the
  // unpolled CQEs in order; false (nothing changed) if depth is smaller than count().
  bool resize(uint32_t depth, WorkCompletion* ring = nullptr);
  // Drops every unpolled CQE of QP `qpn`, keeping the others in order (a QP moved to RESET,
  // as mlx5's provider cleans its CQs, __mlx5_cq_clean). Returns how many were dropped.
  uint32_t remove_qp(uint32_t qpn);

  void arm(bool solicited_only);
  // After a push at now_ns: whether this CQE fires the armed notification (and disarms).
  // Error completions and solicited receives fire a solicited-only arm (IBA 11.4.2.2).
  // With moderation the notification is held back until enough CQEs or time have gathered;
  // notify_deadline() then says when it is due at the latest.
  bool take_notification(bool solicited, bool error, uint64_t now_ns = 0);

  // CQ moderation (ibv_modify_cq): an armed CQ notifies once `count` eligible CQEs have
  // gathered or `period_ns` has passed since the first of them, whichever is first; a 0
  // leaves that trigger off (both 0: every CQE notifies, the default).
  void set_moderation(uint16_t count, uint64_t period_ns);
  // When a held-back notification is due by time (UINT64_MAX if none is held back by time).
  uint64_t notify_deadline() const { return deadline_ns_; }
  // Fires a held-back notification whose count or period has been reached (and disarms).
  bool take_due_notification(uint64_t now_ns);
  bool timer_listed = false;  // on Core::moderated_cqs (core.h)

  uint32_t users = 0;  // QPs using this CQ (destroy_cq is EBUSY while > 0)

 private:
  std::vector<WorkCompletion> own_;  // the ring, unless the caller supplied one
  WorkCompletion* ring_;
  uint32_t depth_;
  uint32_t head_ = 0;  // next to poll
  uint32_t count_ = 0;
  void* user_context_;
  bool armed_ = false;
  bool solicited_only_ = false;
  uint16_t mod_count_ = 0;
  uint64_t mod_period_ns_ = 0;
  uint32_t held_ = 0;             // eligible CQEs since the arm, not yet notified
  uint64_t first_held_ns_ = 0;    // when the first of them came
  uint64_t deadline_ns_ = UINT64_MAX;
  void fire() {
    armed_ = false;
    held_ = 0;
    deadline_ns_ = UINT64_MAX;
  }
};

}  // namespace vrnic::engine
