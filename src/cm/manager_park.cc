// Requests for a service between two listeners: held briefly, handed to the next listener, or rejected when the wait ends.
#include <algorithm>

#include "cm/manager.h"

namespace vrnic::cm {

namespace wc = wire::cm;

// A server that stops listening and listens again (perftest -R between its two connections) is
// not raced by a client quick to send its next REQ: a REQ or SIDR_REQ that finds no listener,
// for a port on which a listener stopped within relisten_wait_ns (in any port space: perftest
// -c UD -R's first connection is RC, its second SIDR), waits that long for a new one. A
// client that meets no listener at all is still rejected at once (IBA 12.6.5: REJ reason 8;
// SIDR_REP status 1), as is a request whose wait ends.
bool Manager::park(const Endpoint& from, const Endpoint& to, uint64_t tid, const wc::Message& m,
                   uint64_t service_id, uint32_t remote_id) {
  const uint64_t now = clock_.now_ns();
  auto it = stopped_at_.find(wc::service_port(service_id));
  if (it == stopped_at_.end() || now - it->second >= cfg_.relisten_wait_ns) return false;
  for (const Parked& p : parked_) {
    const uint32_t id = std::holds_alternative<wc::Req>(p.msg)
                            ? std::get<wc::Req>(p.msg).local_comm_id
                            : std::get<wc::SidrReq>(p.msg).request_id;
    if (id == remote_id && p.from.same_address(from)) {  // a resent request: still waiting
      ++ctr_.duplicates;
      return true;
    }
  }
  parked_.push_back(Parked{from, to, tid, m, now + cfg_.relisten_wait_ns});
  ++ctr_.parked;
  return true;
}

static uint64_t requested_service(const wc::Message& m) {
  return std::holds_alternative<wc::Req>(m) ? std::get<wc::Req>(m).service_id
                                            : std::get<wc::SidrReq>(m).service_id;
}

void Manager::dispatch_request(const Parked& p, bool may_park) {
  if (const auto* req = std::get_if<wc::Req>(&p.msg)) {
    on_req(p.from, p.to, p.tid, *req, may_park);
  } else {
    on_sidr_req(p.from, p.to, p.tid, std::get<wc::SidrReq>(p.msg), may_park);
  }
}

// Takes the waiting requests `due` selects out of the queue, in their order of arrival, and
// hands them on (no second wait: a listener that does not match, or none, rejects them).
template <typename Pred>
void Manager::dispatch_parked(Pred due) {
  auto first = std::stable_partition(parked_.begin(), parked_.end(),
                                     [&](const Parked& p) { return !due(p); });
  std::vector<Parked> taken(std::make_move_iterator(first),
                            std::make_move_iterator(parked_.end()));
  parked_.erase(first, parked_.end());
  for (const Parked& p : taken) dispatch_request(p, false);
}

// A new listener takes the requests that waited for its service; the others wait on.
void Manager::replay_parked(uint64_t service_id) {
  dispatch_parked([&](const Parked& p) { return requested_service(p.msg) == service_id; });
}

void Manager::expire_parked(uint64_t now) {
  std::erase_if(stopped_at_,
                [&](const auto& kv) { return now - kv.second >= cfg_.relisten_wait_ns; });
  dispatch_parked([&](const Parked& p) { return p.until <= now; });  // no listener came
}

}  // namespace vrnic::cm
