// The CM tests' virtual wire: two Managers joined by a queue of MADs, virtual time, chosen and seeded losses.
#pragma once
#include "cm/manager.h"

#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace vrnic::cm {
namespace {

namespace wc = wire::cm;

struct VirtualClock : engine::Clock {
  uint64_t t = 0;
  uint64_t now_ns() const override { return t; }
};

struct Mad {
  Endpoint from, to;
  std::vector<uint8_t> bytes;
  wc::Attr attr() const { return static_cast<wc::Attr>(bytes[16] << 8 | bytes[17]); }
};

// Two CMs, A (index 0, the passive side by convention) and B, joined by a queue of MADs.
class Wire {
 public:
  struct Port : MadPort {
    Wire* w = nullptr;
    void send_mad(const Endpoint& from, const Endpoint& to,
                  std::span<const uint8_t, wc::kMadSize> mad) override {
      w->queue_.push_back({from, to, {mad.begin(), mad.end()}});
    }
  };

  explicit Wire(uint32_t seed = 1) : rng_(seed) {
    for (int i = 0; i < 2; ++i) {
      addr[i].ip = {10, 0, 0, uint8_t(i + 1)};
      port_[i].w = this;
      Config cfg;
      cfg.seed = seed * 7 + i;
      cfg.ca_guid = 0x0200'00ff'fe00'0000ull + i;
      cm[i] = std::make_unique<Manager>(cfg, port_[i], clock);
    }
  }

  // Delivers queued MADs (those `drop` refuses, and a seeded share under loss, are lost),
  // runs due timers, and jumps the clock to the next timer when the wire is idle; until
  // `done` holds or `limit_ns` of virtual time has passed.
  bool run(const std::function<bool()>& done, uint64_t limit_ns = 600'000'000'000ull) {
    const uint64_t end = clock.t + limit_ns;
    while (!done()) {
      if (!queue_.empty()) {
        Mad m = std::move(queue_.front());
        queue_.pop_front();
        sent.push_back(m);
        if (drop && drop(m)) continue;
        if (loss > 0 && uni_(rng_) < loss) continue;
        const int n = (dup > 0 && uni_(rng_) < dup) ? 2 : 1;
        for (int k = 0; k < n; ++k) deliver(m);
        continue;
      }
      const uint64_t next = std::min(cm[0]->next_timer_ns(), cm[1]->next_timer_ns());
      if (next == UINT64_MAX || next > end) return done();
      clock.t = std::max(clock.t, next);
      cm[0]->on_timer();
      cm[1]->on_timer();
    }
    return true;
  }

  // The next event of side i, if any (collected into events[i] as it goes).
  bool got(int i, EventType t) {
    Event e;
    while (cm[i]->poll_event(e)) events[i].push_back(e);
    for (const Event& x : events[i]) {
      if (x.type == t) return true;
    }
    return false;
  }
  const Event& first(int i, EventType t) {
    got(i, t);
    for (const Event& x : events[i]) {
      if (x.type == t) return x;
    }
    static Event none;
    ADD_FAILURE() << "no " << to_string(t) << " on side " << i;
    return none;
  }
  int count(int i, EventType t) {
    got(i, t);
    int n = 0;
    for (const Event& x : events[i]) n += x.type == t;
    return n;
  }
  int sent_of(wc::Attr a) const {
    int n = 0;
    for (const Mad& m : sent) n += m.attr() == a;
    return n;
  }

  VirtualClock clock;
  Endpoint addr[2];
  std::unique_ptr<Manager> cm[2];
  std::vector<Event> events[2];
  std::vector<Mad> sent;  // every MAD put on the wire, lost or not
  std::function<bool(const Mad&)> drop;
  double loss = 0, dup = 0;

 private:
  void deliver(const Mad& m) {
    for (int i = 0; i < 2; ++i) {
      if (addr[i].same_address(m.to)) cm[i]->receive(m.from, m.to, m.bytes);
    }
  }
  Port port_[2];
  std::deque<Mad> queue_;
  std::mt19937 rng_;
  std::uniform_real_distribution<double> uni_{0.0, 1.0};
};

constexpr uint16_t kTcp = uint16_t(wc::PortSpace::kTcp), kUdp = uint16_t(wc::PortSpace::kUdp);
constexpr uint16_t kPort = 7174;

uint32_t listen_on_a(Wire& w, uint16_t ps = kTcp) {
  uint32_t l = 0;
  EXPECT_EQ(w.cm[0]->listen(ps, kPort, w.addr[0], false, 16, &l), 0);
  return l;
}

ConnectArgs args_from_b(const Wire& w, std::string pd = "hello") {
  ConnectArgs a;
  a.local = w.addr[1];
  a.local.port = 41000;
  a.remote = w.addr[0];
  a.remote.port = kPort;
  a.port_space = kTcp;
  a.params.qpn = 0x123;
  a.params.starting_psn = 0xabcdef;
  a.params.responder_resources = 4;
  a.params.initiator_depth = 2;
  a.params.path_mtu = 5;
  a.params.retry_count = 6;
  a.params.rnr_retry_count = 5;
  a.params.private_data.assign(pd.begin(), pd.end());
  return a;
}

Params accept_params(std::string pd = "welcome") {
  Params p;
  p.qpn = 0x456;
  p.starting_psn = 0x1234;
  p.responder_resources = 2;
  p.initiator_depth = 4;
  p.rnr_retry_count = 3;
  p.private_data.assign(pd.begin(), pd.end());
  return p;
}

// B connects to A; A accepts at once; B establishes when the REP arrives.
struct Connected {
  uint32_t a = 0, b = 0;
};
Connected connect_both(Wire& w) {
  Connected c;
  EXPECT_EQ(w.cm[1]->connect(args_from_b(w), &c.b), 0);
  EXPECT_TRUE(w.run([&] { return w.got(0, EventType::kConnectRequest); }));
  c.a = w.first(0, EventType::kConnectRequest).conn;
  EXPECT_EQ(w.cm[0]->accept(c.a, accept_params()), 0);
  EXPECT_TRUE(w.run([&] { return w.got(1, EventType::kConnectResponse); }));
  EXPECT_EQ(w.cm[1]->establish(c.b), 0);
  EXPECT_TRUE(w.run([&] { return w.got(0, EventType::kEstablished); }));
  return c;
}

std::string text(const std::vector<uint8_t>& v) {
  std::string s(v.begin(), v.end());
  return s.substr(0, s.find('\0'));
}

}  // namespace
}  // namespace vrnic::cm
