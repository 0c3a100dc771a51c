// The CM guard's policy: what a dead process's connections are owed, and when (farewells.h).
#include "guard/farewells.h"

#include <algorithm>

namespace vrnic::guard {

void Farewells::apply(const cm::GuardRecord& r) {
  if (r.op == cm::GuardRecord::kKeep) {
    owed_[r.conn] = Owed{.rec = r};
  } else {
    owed_.erase(r.conn);
  }
}

void Farewells::start(uint64_t now) {
  for (auto& [conn, o] : owed_) o.at = now;
}

std::vector<const cm::GuardRecord*> Farewells::due(uint64_t now) {
  std::vector<const cm::GuardRecord*> out;
  for (auto& [conn, o] : owed_) {
    if (o.at > now) continue;
    out.push_back(&o.rec);
    ++o.sent;
    o.at = o.sent == kTries ? UINT64_MAX : now + (kFirstGapNs << (o.sent - 1));
  }
  return out;
}

uint64_t Farewells::next() const {
  uint64_t t = UINT64_MAX;
  for (const auto& [conn, o] : owed_) t = std::min(t, o.at);
  return t;
}

}  // namespace vrnic::guard
