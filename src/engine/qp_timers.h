// The QPs' timers in one dense table: which QPs a device's timer event has to look at, and
// the exact next deadline of them all, without walking every QP.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace vrnic::engine {

class Qp;

// Each QP holds a slot (Qp::timer_slot) with a lower bound of its next deadline (ACK and RNR
// timers, the pacer, the rate controller's timer events). Arming a deadline lowers it
// (Core::note_qp_deadline); cancelling or postponing one leaves it low, which costs a look at
// the QP, never a wrong answer: earliest() refines only the bounds below its answer. A QP
// whose bound lies ahead has nothing due, and its timer processing would change nothing.
class QpTimers {
 public:
  using Exact = uint64_t (*)(const Qp&);

  void add(Qp& qp);
  void remove(Qp& qp);
  void lower(const Qp& qp, uint64_t t);
  void set(const Qp& qp, uint64_t t);  // the QP's true next deadline
  // The QPs whose bound is <= now, appended in slot order.
  void due(uint64_t now, std::vector<Qp*>& out) const;
  // min(t, every QP's next deadline), exact: `next` gives a QP's true next deadline, asked
  // only of the QPs whose bound is below the answer so far.
  uint64_t earliest(uint64_t t, Exact next);
  std::size_t size() const { return qp_.size(); }

 private:
  std::vector<Qp*> qp_;
  std::vector<uint64_t> at_;  // the bounds, by slot
};

}  // namespace vrnic::engine
