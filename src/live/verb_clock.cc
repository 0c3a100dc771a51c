// The engine's clock in a live device (verb_clock.h).
#include "live/verb_clock.h"

namespace vrnic::live {

uint64_t VerbClock::now_ns() const {
  if (!in_verb_) return read_();
  const uint64_t mark = moved_(ctx_);
  if (mark != mark_) {  // packets moved since the last reading: time has passed
    at_ = read_();
    mark_ = mark;
  }
  return at_;
}

uint64_t VerbClock::precise_now_ns() const {
  const uint64_t t = read_();
  if (in_verb_) at_ = t;  // the stretch goes on from this reading: time never runs back
  return t;
}

}  // namespace vrnic::live
