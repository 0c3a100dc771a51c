// libFuzzer harness of the CM state machine: two Managers on a virtual wire, fuzzed, with invariants after each step.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "cm/manager.h"

// The input drives A (10.0.0.1, listening on the TCP port space) and B (10.0.0.2): deliver,
// drop or duplicate the next MAD on the wire; forge a MAD (256 raw bytes, or a well-formed
// CM message naming known comm IDs); move the clock and run the timers; or an application
// call on either side. After each step: events name known, undestroyed connections;
// ESTABLISHED comes once per connection; one request and peer make one connection; no timer
// is due after on_timer(); counters only grow; a request left unanswered for the backlog
// meets a full backlog (requests not yet taken by the application), and none is refused.
namespace {

using namespace vrnic::cm;
namespace wc = vrnic::wire::cm;

constexpr uint16_t kTcp = uint16_t(wc::PortSpace::kTcp), kUdp = uint16_t(wc::PortSpace::kUdp);
constexpr uint16_t kPort = 7174;
constexpr int kMaxSteps = 256;

struct VirtualClock : vrnic::engine::Clock {
  uint64_t t = 1'000'000;
  uint64_t now_ns() const override { return t; }
};

struct WireMad {
  Endpoint from, to;
  std::vector<uint8_t> bytes;
};

struct Port : MadPort {
  std::deque<WireMad>* queue = nullptr;
  void send_mad(const Endpoint& from, const Endpoint& to,
                std::span<const uint8_t, wc::kMadSize> mad) override {
    queue->push_back({from, to, {mad.begin(), mad.end()}});
  }
};

// What the harness knows of one side, to judge its events.
struct Side {
  Endpoint addr;
  Port port;
  std::unique_ptr<Manager> cm;
  std::vector<uint32_t> ids;                 // every connection id it named, in order
  std::set<uint32_t> known, destroyed, established, taken;
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> by_peer;  // (peer IPv4, remote id) -> conn
  std::set<std::pair<uint32_t, uint32_t>> seen_reqs;       // every request delivered
  std::set<std::pair<uint32_t, uint32_t>> maybe_replayed;  // those a new listener may have taken
  std::vector<uint32_t> listeners;
  std::map<uint32_t, std::pair<uint64_t, int>> listener_info;  // id -> (service ID, backlog)
  std::map<uint32_t, uint32_t> listener_of;                   // passive conn -> its listener
  Counters last{};
};

[[noreturn]] void broken() { abort(); }

bool grew(const Counters& a, const Counters& b) {  // every counter of b >= that of a
  for (int i = 0; i < 16; ++i) {
    if (b.tx[i] < a.tx[i] || b.rx[i] < a.rx[i]) return false;
  }
  return b.retries >= a.retries && b.timeouts >= a.timeouts &&
         b.rejects_sent >= a.rejects_sent && b.rejects_received >= a.rejects_received &&
         b.duplicates >= a.duplicates && b.rx_malformed >= a.rx_malformed &&
         b.rx_unmatched >= a.rx_unmatched && b.rx_bad_state >= a.rx_bad_state &&
         b.backlog_drops >= a.backlog_drops;
}

uint32_t peer_key(const Endpoint& e) {
  return uint32_t(e.ip[0]) << 24 | e.ip[1] << 16 | e.ip[2] << 8 | e.ip[3];
}

class Harness {
 public:
  explicit Harness(FuzzedDataProvider& in) : in_(in) {
    for (int i = 0; i < 2; ++i) {
      Side& s = side_[i];
      s.addr.ip = {10, 0, 0, uint8_t(i + 1)};
      s.port.queue = &queue_;
      Config cfg;
      cfg.seed = 7 + i;
      cfg.ca_guid = 0x0200'00ff'fe00'0000ull + i;
      cfg.cm_response_timeout = in_.ConsumeIntegralInRange<uint8_t>(0, 24);
      cfg.max_cm_retries = in_.ConsumeIntegralInRange<uint8_t>(0, 15);
      s.cm = std::make_unique<Manager>(cfg, s.port, clock_);
    }
    uint32_t l = 0;
    if (side_[0].cm->listen(kTcp, kPort, side_[0].addr, false, 4, &l) != 0) broken();
    side_[0].listeners.push_back(l);
    side_[0].listener_info[l] = {wc::service_id(kTcp, kPort), 4};
  }

  void run() {
    for (int step = 0; step < kMaxSteps && in_.remaining_bytes() > 0; ++step) {
      one_step();
      for (int i = 0; i < 2; ++i) check(i);
    }
  }

 private:
  void one_step();
  void check(int i);
  void check_event(int i, const Event& e);
  void deliver(const WireMad& m);
  int pending(int i, uint64_t service_id) const;
  void check_backlog(int i, uint64_t service_id, size_t sent_before, uint64_t drops_before);
  void forged_mad();
  wc::Message forged_message(uint16_t which, uint32_t local_id, uint32_t remote_id);
  wc::Req forged_req(uint32_t local_id);
  void timers();
  void app_call(int i, uint8_t op);
  void app_connect(int i, bool sidr);
  void app_listen(int i);
  void app_destroy(int i, uint32_t conn);
  void app_shutdown(int i);
  uint32_t pick_id(int i);
  Params params();

  FuzzedDataProvider& in_;
  VirtualClock clock_;
  std::deque<WireMad> queue_;
  Side side_[2];
  std::vector<std::pair<uint32_t, uint32_t>> delivered_reqs_[2];  // (peer, remote id) this step
};

void Harness::one_step() {
  delivered_reqs_[0].clear();
  delivered_reqs_[1].clear();
  const uint8_t op = in_.ConsumeIntegralInRange<uint8_t>(0, 19);
  if (op <= 5) {  // the wire: deliver (most often), drop or duplicate the next MAD
    if (queue_.empty()) return;
    WireMad m = std::move(queue_.front());
    queue_.pop_front();
    if (op == 4) return;
    deliver(m);
    if (op == 5) deliver(m);
  } else if (op == 6) {
    forged_mad();
  } else if (op == 7) {
    timers();
  } else {
    app_call(in_.ConsumeBool() ? 1 : 0, op - 8);
  }
}

void Harness::deliver(const WireMad& m) {
  for (int i = 0; i < 2; ++i) {
    if (!side_[i].addr.same_address(m.to)) continue;
    wc::Mad mad;
    uint64_t sid = 0;
    if (wc::parse_mad(m.bytes, mad) == wc::MadError::kOk) {
      if (const auto* r = std::get_if<wc::Req>(&mad.msg)) {
        delivered_reqs_[i].push_back({peer_key(m.from), r->local_comm_id});
        side_[i].seen_reqs.insert(delivered_reqs_[i].back());
        sid = r->service_id;
      } else if (const auto* s = std::get_if<wc::SidrReq>(&mad.msg)) {
        delivered_reqs_[i].push_back({peer_key(m.from), s->request_id});
        side_[i].seen_reqs.insert(delivered_reqs_[i].back());
        sid = s->service_id;
      }
    }
    const size_t before = queue_.size();
    const uint64_t drops = side_[i].cm->counters().backlog_drops;
    side_[i].cm->receive(m.from, m.to, m.bytes);
    if (sid != 0) check_backlog(i, sid, before, drops);
  }
}

// Requests of a service's listener the application has not taken (nor answered) yet; -1 if
// no listener of side i serves it, -2 if they fill its backlog.
int Harness::pending(int i, uint64_t service_id) const {
  const Side& s = side_[i];
  for (const auto& [l, info] : s.listener_info) {
    if (info.first != service_id) continue;
    int n = 0;
    for (const auto& [conn, of] : s.listener_of) {
      const State st = s.cm->state(conn);
      n += of == l && !s.destroyed.count(conn) && !s.taken.count(conn) &&
           (st == State::kReqRcvd || st == State::kMraReqSent || st == State::kSidrReqRcvd);
    }
    return info.second > 0 && n >= info.second ? -2 : n;  // -2: the backlog is full
  }
  return -1;
}

// A full backlog leaves a request unanswered (as ucma): a drop needs a listener whose
// backlog the application really filled, and nothing refuses a request for it (a REJ from
// comm ID 0 with reason ConsumerReject, or a SIDR_REP Rejected for no known request).
void Harness::check_backlog(int i, uint64_t service_id, size_t sent_before,
                            uint64_t drops_before) {
  if (side_[i].cm->counters().backlog_drops > drops_before &&
      pending(i, service_id) != -2) {
    broken();
  }
  for (size_t k = sent_before; k < queue_.size(); ++k) {
    wc::Mad out;
    if (wc::parse_mad(queue_[k].bytes, out) != wc::MadError::kOk) broken();
    if (const auto* r = std::get_if<wc::Rej>(&out.msg)) {
      if (r->local_comm_id == 0 && r->reason == uint16_t(wc::RejReason::kConsumerReject)) {
        broken();
      }
    } else if (const auto* r = std::get_if<wc::SidrRep>(&out.msg)) {
      const std::pair<uint32_t, uint32_t> key{peer_key(queue_[k].to), r->request_id};
      if (r->status == uint8_t(wc::SidrStatus::kRejected) && !side_[i].by_peer.count(key) &&
          !side_[i].maybe_replayed.count(key)) {
        broken();
      }
    }
  }
}

// A MAD from the fuzz bytes: 256 raw bytes, or a well-formed CM message whose comm IDs
// name connections that exist (or not), so that it reaches the deep states.
void Harness::forged_mad() {
  const int to = in_.ConsumeBool() ? 1 : 0;
  WireMad m;
  m.to = side_[to].addr;
  m.from = side_[1 - to].addr;
  if (in_.ConsumeIntegralInRange<uint8_t>(0, 7) == 0) m.from.ip[3] = 9;  // a stranger
  if (in_.ConsumeBool()) {
    m.bytes = in_.ConsumeBytes<uint8_t>(wc::kMadSize);
    m.bytes.resize(wc::kMadSize);
    return deliver(m);
  }
  const uint16_t which = in_.ConsumeIntegralInRange<uint16_t>(0, 8);
  const uint32_t local_id = pick_id(1 - to), remote_id = pick_id(to);
  wc::Mad mad{.hdr = {}, .msg = forged_message(which, local_id, remote_id)};
  mad.hdr.tid = in_.ConsumeIntegral<uint8_t>();
  m.bytes.resize(wc::kMadSize);
  wc::build_mad(mad, m.bytes.data());
  deliver(m);
}

wc::Req Harness::forged_req(uint32_t local_id) {
  wc::Req r;
  r.local_comm_id = local_id;
  r.service_id = wc::service_id(in_.ConsumeBool() ? kTcp : kUdp,
                                in_.ConsumeBool() ? kPort : in_.ConsumeIntegral<uint16_t>());
  r.transport = in_.ConsumeIntegralInRange<uint8_t>(0, 3);
  r.local_cm_response_timeout = in_.ConsumeIntegralInRange<uint8_t>(0, 31);
  r.max_cm_retries = in_.ConsumeIntegralInRange<uint8_t>(0, 15);
  r.local_qpn = in_.ConsumeIntegralInRange<uint32_t>(0, 0xffffff);
  const wc::IpCmHeader h{.version = 0, .ipv6 = false, .src_port = 41000,
                         .src = side_[1].addr.ip, .dst = side_[0].addr.ip};
  if (in_.ConsumeIntegralInRange<uint8_t>(0, 7) != 0) {
    wc::write_ip_cm_header(h, r.private_data.data());
  }
  return r;
}

wc::Message Harness::forged_message(uint16_t which, uint32_t local_id, uint32_t remote_id) {
  const auto ref = static_cast<wc::MsgRef>(in_.ConsumeIntegralInRange<uint8_t>(0, 2));
  switch (which) {
    case 0: return forged_req(local_id);
    case 1: return wc::Mra{.local_comm_id = local_id, .remote_comm_id = remote_id,
                           .msg_mraed = ref,
                           .service_timeout = in_.ConsumeIntegralInRange<uint8_t>(0, 31)};
    case 2: return wc::Rej{.local_comm_id = local_id, .remote_comm_id = remote_id,
                           .msg_rejected = ref, .reason = in_.ConsumeIntegral<uint8_t>()};
    case 3: return wc::Rep{.local_comm_id = local_id, .remote_comm_id = remote_id,
                           .local_qpn = in_.ConsumeIntegralInRange<uint32_t>(0, 0xffffff)};
    case 4: return wc::Rtu{.local_comm_id = local_id, .remote_comm_id = remote_id};
    case 5: return wc::Dreq{.local_comm_id = local_id, .remote_comm_id = remote_id};
    case 6: return wc::Drep{.local_comm_id = local_id, .remote_comm_id = remote_id};
    case 7: {
      wc::SidrReq s{.request_id = local_id, .service_id = wc::service_id(kUdp, kPort)};
      const wc::IpCmHeader h{.version = 0, .ipv6 = false, .src_port = 41001,
                             .src = side_[1].addr.ip, .dst = side_[0].addr.ip};
      wc::write_ip_cm_header(h, s.private_data.data());
      return s;
    }
    default: return wc::SidrRep{.request_id = remote_id,
                                .status = in_.ConsumeIntegralInRange<uint8_t>(0, 5)};
  }
}

// The clock moves (to the next timer, or by a fuzzed amount) and both sides run their timers.
void Harness::timers() {
  const uint64_t next = std::min(side_[0].cm->next_timer_ns(), side_[1].cm->next_timer_ns());
  if (in_.ConsumeBool() && next != UINT64_MAX) {
    clock_.t = std::max(clock_.t, next);
  } else {
    clock_.t += in_.ConsumeIntegralInRange<uint64_t>(0, 20'000'000'000ull);
  }
  for (Side& s : side_) {
    s.cm->on_timer();
    if (s.cm->next_timer_ns() <= clock_.t) broken();  // a due timer left unrun
  }
}

// A connection id of side i: one it named (the most likely), or any number.
uint32_t Harness::pick_id(int i) {
  const auto& ids = side_[i].ids;
  if (ids.empty() || in_.ConsumeIntegralInRange<uint8_t>(0, 15) == 0) {
    return in_.ConsumeIntegral<uint32_t>();
  }
  return ids[in_.ConsumeIntegralInRange<size_t>(0, ids.size() - 1)];
}

Params Harness::params() {
  Params p;
  p.qpn = in_.ConsumeIntegralInRange<uint32_t>(0, 0xffffff);
  p.starting_psn = in_.ConsumeIntegralInRange<uint32_t>(0, 0xffffff);
  p.private_data = in_.ConsumeBytes<uint8_t>(in_.ConsumeIntegralInRange<size_t>(0, 230));
  return p;
}

void Harness::app_connect(int i, bool sidr) {
  Side& s = side_[i];
  ConnectArgs a;
  a.local = s.addr;
  a.local.port = 41000;
  a.remote = side_[1 - i].addr;
  a.remote.port = in_.ConsumeBool() ? kPort : in_.ConsumeIntegral<uint16_t>();
  a.port_space = sidr ? kUdp : kTcp;
  a.params = params();
  uint32_t conn = 0;
  const int rc = sidr ? s.cm->resolve_sidr(a, &conn) : s.cm->connect(a, &conn);
  if (rc != 0) return;
  if (s.known.count(conn)) broken();  // a fresh id must be new
  s.known.insert(conn);
  s.ids.push_back(conn);
}

void Harness::app_listen(int i) {
  Side& s = side_[i];
  if (!s.listeners.empty() && in_.ConsumeBool()) {
    const size_t k = in_.ConsumeIntegralInRange<size_t>(0, s.listeners.size() - 1);
    s.cm->stop_listening(s.listeners[k]);
    s.listener_info.erase(s.listeners[k]);
    s.listeners.erase(s.listeners.begin() + k);
    return;
  }
  uint32_t l = 0;
  const uint16_t ps = in_.ConsumeBool() ? kTcp : kUdp;
  const int backlog = in_.ConsumeIntegralInRange<int>(0, 4);
  if (s.cm->listen(ps, kPort, s.addr, in_.ConsumeBool(), backlog, &l) == 0) {
    s.listeners.push_back(l);
    s.listener_info[l] = {wc::service_id(ps, kPort), backlog > 0 ? backlog : 1024};
  }
}

void Harness::app_destroy(int i, uint32_t conn) {
  Side& s = side_[i];
  s.cm->destroy(conn);
  if (!s.known.count(conn)) return;
  s.destroyed.insert(conn);
  std::erase_if(s.by_peer, [&](const auto& kv) { return kv.second == conn; });
}

// The process exits: every connection ends; none may report anything after.
void Harness::app_shutdown(int i) {
  Side& s = side_[i];
  s.cm->shutdown();
  s.destroyed.insert(s.known.begin(), s.known.end());
  s.by_peer.clear();
}

void Harness::app_call(int i, uint8_t op) {
  Side& s = side_[i];
  const uint32_t conn = pick_id(i);
  const size_t pd_len = in_.ConsumeIntegralInRange<size_t>(0, 230);
  const std::vector<uint8_t> pd = in_.ConsumeBytes<uint8_t>(pd_len);
  switch (op) {
    case 0: return app_connect(i, false);
    case 1: return app_connect(i, true);
    case 2: (void)s.cm->accept(conn, params()); return;
    case 3: (void)s.cm->reject(conn, pd, in_.ConsumeIntegral<uint8_t>()); return;
    case 4: (void)s.cm->establish(conn); return;
    case 5: (void)s.cm->disconnect(conn, pd); return;
    case 6: return app_destroy(i, conn);
    case 7: return app_listen(i);
    case 8: (void)s.cm->accept_sidr(conn, 0x42, 0x1234, pd); return;
    case 9: (void)s.cm->reject_sidr(conn, wc::SidrStatus::kRejected, pd); return;
    case 10:
      s.cm->request_taken(conn);
      s.taken.insert(conn);
      return;
    default:
      if (in_.ConsumeIntegralInRange<uint8_t>(0, 15) == 0) return app_shutdown(i);
      (void)s.cm->notify_established(conn);
      return;
  }
}

void Harness::check_event(int i, const Event& e) {
  Side& s = side_[i];
  if (e.type == EventType::kConnectRequest) {
    if (s.known.count(e.conn)) broken();  // a new connection with an old id
    const State st = s.cm->state(e.conn);
    if (st != State::kReqRcvd && st != State::kMraReqSent && st != State::kSidrReqRcvd) broken();
    s.known.insert(e.conn);
    s.ids.push_back(e.conn);
    s.listener_of[e.conn] = e.listener;
    // It came from a REQ or SIDR_REQ delivered in this step; one connection per such request
    // and peer, however often it arrives.
    for (const auto& key : delivered_reqs_[i]) {
      auto [it, fresh] = s.by_peer.try_emplace(key, e.conn);
      if (!fresh && it->second != e.conn && !s.destroyed.count(it->second)) broken();
      it->second = e.conn;
    }
    // None delivered in this step: a request that waited for this new listener (the port's
    // last listener had just stopped). Which one of those is not known here, so each of
    // them may now have a connection (its refusal is then no backlog refusal).
    if (delivered_reqs_[i].empty()) s.maybe_replayed.insert(s.seen_reqs.begin(), s.seen_reqs.end());
    return;
  }
  if (!s.known.count(e.conn)) broken();     // names a connection that never existed
  if (s.destroyed.count(e.conn)) broken();  // a destroyed connection reports nothing more
  if (e.type == EventType::kEstablished && !s.established.insert(e.conn).second) broken();
}

void Harness::check(int i) {
  Side& s = side_[i];
  Event e;
  while (s.cm->poll_event(e)) check_event(i, e);
  if (!grew(s.last, s.cm->counters())) broken();
  s.last = s.cm->counters();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  Harness h(in);
  h.run();
  return 0;
}
