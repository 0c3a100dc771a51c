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
  for (auto it = owed_.begin(); it != owed_.end();) {
    Owed& o = it->second;
    if (o.at > now) {
      ++it;
      continue;
    }
    if (o.sent == kTries) {  // no DREP after every try: the peer is gone too, or unreachable
      ++unanswered_;
      it = owed_.erase(it);
      continue;
    }
    out.push_back(&o.rec);
    o.at = now + (kFirstTimeoutNs << o.sent);
    ++o.sent;
    ++it;
  }
  return out;
}

bool Farewells::answered(const cm::Endpoint& peer, uint32_t conn) {
  auto it = owed_.find(conn);
  if (it == owed_.end() || it->second.sent == 0 || !it->second.rec.to.same_address(peer))
    return false;
  owed_.erase(it);
  return true;
}

uint64_t Farewells::next() const {
  uint64_t t = UINT64_MAX;
  for (const auto& [conn, o] : owed_) t = std::min(t, o.at);
  return t;
}

}  // namespace vrnic::guard
