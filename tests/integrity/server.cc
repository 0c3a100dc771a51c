// Integrity test server: serves sessions, checks every byte and CQE that clients cause.
#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <memory>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

#include "channel.h"
#include "protocol.h"
#include "server.h"

namespace vrnic_test {
namespace {

uint64_t fnv(const uint8_t* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

struct Shared {
  Device dev;
  uint64_t* counter = nullptr;  // the Fetch-and-Add target of every atomic session
  ibv_mr* counter_mr = nullptr;
  std::vector<uint8_t> ro, noacc;
  ibv_mr* ro_mr = nullptr;
  ibv_mr* noacc_mr = nullptr;
  std::mutex mu;
  // Every Fetch-and-Add original value returned, one bit per value (a soak returns millions:
  // kept as a list, they were the server's growth): the values must be exactly 0..count-1.
  struct Originals {
    std::vector<uint64_t> seen;  // bit v: v was returned
    uint64_t count = 0, max = 0;
    bool wrong = false;  // a value twice, or one no counter of this run can have reached
    void add(uint64_t v) {
      if (v >= kMaxOriginal) {
        wrong = true;
        return;
      }
      if (v / 64 >= seen.size()) seen.resize(v / 64 + 1);
      wrong |= (seen[v / 64] >> (v % 64) & 1) != 0;
      seen[v / 64] |= uint64_t{1} << (v % 64);
      ++count;
      max = std::max(max, v);
    }
    bool exactly_0_to_count() const { return !wrong && (count == 0 || max == count - 1); }
    static constexpr uint64_t kMaxOriginal = uint64_t{1} << 36;
  } originals;
  int atomic_done = 0;
  std::atomic<int> failures{0};
};

class Session {
 public:
  Session(Shared& s, Channel ch) : s_(s), ch_(std::move(ch)) {}

  void run() {
    region_.assign(kRegionSize, 0);
    recv_buf_.assign(kRegionSize + 64, 0);
    region_mr_ = s_.dev.reg(region_.data(), region_.size(),
                            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
    recv_mr_ = s_.dev.reg(recv_buf_.data(), recv_buf_.size(), IBV_ACCESS_LOCAL_WRITE);
    new_qp();
    Request r;
    while (ch_.recv(r)) {
      if (r.cmd == Cmd::kBye) {
        reply(true, "bye");
        break;
      }
      handle(r);
    }
    ep_.reset();
    ibv_dereg_mr(region_mr_);
    ibv_dereg_mr(recv_mr_);
  }

 private:
  void reply(bool ok, const char* fmt, ...) __attribute__((format(printf, 3, 4))) {
    Reply rep;
    rep.ok = ok;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rep.msg, sizeof rep.msg, fmt, ap);
    va_end(ap);
    if (!ok) {
      s_.failures++;
      fprintf(stderr, "server: FAIL %s\n", rep.msg);
    }
    ch_.send(rep);
  }

  void new_qp() {
    ep_.reset();
    ep_ = std::make_unique<RcEndpoint>(s_.dev);
    ServerInfo info;
    info.qp = ep_->local_info();
    info.region_addr = reinterpret_cast<uintptr_t>(region_.data());
    info.region_len = region_.size();
    info.region_rkey = region_mr_->rkey;
    info.counter_addr = reinterpret_cast<uintptr_t>(s_.counter);
    info.counter_rkey = s_.counter_mr->rkey;
    info.ro_addr = reinterpret_cast<uintptr_t>(s_.ro.data());
    info.ro_len = s_.ro.size();
    info.ro_rkey = s_.ro_mr->rkey;
    info.noacc_addr = reinterpret_cast<uintptr_t>(s_.noacc.data());
    info.noacc_len = s_.noacc.size();
    info.noacc_rkey = s_.noacc_mr->rkey;
    QpInfo peer;
    CHECK_OR_DIE(ch_.send(info) && ch_.recv(peer), "exchange");
    ep_->connect(peer);
  }

  // The receive buffer is cut into nsge pieces with 13-byte gaps (unaligned, discontiguous).
  std::vector<ibv_sge> recv_sges(uint64_t len, uint32_t nsge) {
    std::vector<ibv_sge> sges;
    uint64_t pos = 5, left = len;
    for (uint32_t i = 0; i < nsge; ++i) {
      uint64_t piece = i + 1 == nsge ? left : left / (nsge - i);
      sges.push_back({reinterpret_cast<uintptr_t>(recv_buf_.data() + pos),
                      static_cast<uint32_t>(piece), recv_mr_->lkey});
      pos += piece + 13;
      left -= piece;
    }
    return sges;
  }

  void handle(const Request& r) {
    switch (r.cmd) {
      case Cmd::kVerifyRegion: {
        std::vector<uint8_t> want(r.len);
        gen(want.data(), r.len, r.seed);
        auto* got = region_.data() + r.offset;
        auto m = std::mismatch(want.begin(), want.end(), got);
        if (m.first == want.end()) return reply(true, "ok");
        return reply(false, "%s len %" PRIu64 ": first wrong byte at %zd", op_name(r.op), r.len,
                     m.first - want.begin());
      }
      case Cmd::kFillRegion:
        gen(region_.data() + r.offset, r.len, r.seed);
        return reply(true, "filled");
      case Cmd::kPrepareRecv: {
        auto sges = recv_sges(r.len, r.nsge);
        ibv_recv_wr wr{}, *bad = nullptr;
        wr.wr_id = r.seed;
        wr.sg_list = sges.data();
        wr.num_sge = static_cast<int>(sges.size());
        int rc = ibv_post_recv(ep_->qp(), &wr, &bad);
        return reply(rc == 0, "post_recv rc %d", rc);
      }
      case Cmd::kCheckRecv:
        return check_recv(r);
      case Cmd::kNewQp:
        new_qp();
        return reply(true, "new qp");
      case Cmd::kRecoverQp: {
        ep_->reset();
        QpInfo peer;
        CHECK_OR_DIE(ch_.send(ep_->local_info()) && ch_.recv(peer), "exchange");
        ep_->connect(peer);
        return reply(true, "qp recovered");
      }
      case Cmd::kSnapshot:
        snapshot_ = hash_areas();
        return reply(true, "snapshot");
      case Cmd::kCompareSnapshot: {
        bool same = hash_areas() == snapshot_;
        return reply(same, "target memory %s", same ? "unchanged" : "CHANGED");
      }
      case Cmd::kAtomicDone: {
        std::vector<uint64_t> v;
        CHECK_OR_DIE(ch_.recv_vec(v), "recv originals");
        std::lock_guard<std::mutex> g(s_.mu);
        for (uint64_t x : v) s_.originals.add(x);
        s_.atomic_done++;
        return reply(true, "recorded %zu originals", v.size());
      }
      default:
        return reply(false, "unknown command %u", static_cast<unsigned>(r.cmd));
    }
  }

  void check_recv(const Request& r) {
    ibv_wc wc = ep_->wait_one();
    if (wc.status != IBV_WC_SUCCESS)
      return reply(false, "%s recv CQE status %s", op_name(r.op), ibv_wc_status_str(wc.status));
    bool imm_op = r.op == Op::kWriteImm;
    if (wc.opcode != (imm_op ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV))
      return reply(false, "%s recv CQE opcode %d", op_name(r.op), wc.opcode);
    if (wc.byte_len != r.len)
      return reply(false, "%s byte_len %u want %" PRIu64, op_name(r.op), wc.byte_len, r.len);
    if (wc.wr_id != r.seed) return reply(false, "recv wr_id %" PRIu64, wc.wr_id);
    if (wc.qp_num != ep_->qp()->qp_num) return reply(false, "recv qp_num %u", wc.qp_num);
    bool has_imm = (wc.wc_flags & IBV_WC_WITH_IMM) != 0;
    if (has_imm != (r.imm != 0) || (has_imm && wc.imm_data != r.imm))
      return reply(false, "%s imm flag %d data %08x want %08x", op_name(r.op), has_imm,
                   wc.imm_data, r.imm);
    std::vector<uint8_t> want(r.len), got;
    gen(want.data(), r.len, r.seed);
    if (imm_op) {
      got.assign(region_.data() + r.offset, region_.data() + r.offset + r.len);
    } else {
      for (auto& s : recv_sges(r.len, r.nsge)) {
        auto* p = reinterpret_cast<uint8_t*>(s.addr);
        got.insert(got.end(), p, p + s.length);
      }
    }
    if (got != want) {
      auto m = std::mismatch(want.begin(), want.end(), got.begin());
      return reply(false, "%s len %" PRIu64 " sge %u: first wrong byte at %zd", op_name(r.op),
                   r.len, r.nsge, m.first - want.begin());
    }
    reply(true, "ok");
  }

  uint64_t hash_areas() const {
    return fnv(region_.data(), region_.size()) ^ (fnv(s_.ro.data(), s_.ro.size()) * 3) ^
           (fnv(s_.noacc.data(), s_.noacc.size()) * 7);
  }

  Shared& s_;
  Channel ch_;
  std::vector<uint8_t> region_, recv_buf_;
  ibv_mr* region_mr_ = nullptr;
  ibv_mr* recv_mr_ = nullptr;
  std::unique_ptr<RcEndpoint> ep_;
  uint64_t snapshot_ = 0;
};

}  // namespace

int run_server(uint16_t port, int sessions, int atomic_sessions) {
  Shared s;
  s.dev = Device::open();
  s.counter = static_cast<uint64_t*>(aligned_alloc(64, 64));
  *s.counter = 0;
  s.counter_mr = s.dev.reg(s.counter, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC |
                                              IBV_ACCESS_REMOTE_READ);
  s.ro.assign(65536, 0xA5);
  s.noacc.assign(65536, 0x5A);
  s.ro_mr = s.dev.reg(s.ro.data(), s.ro.size(), IBV_ACCESS_REMOTE_READ);
  s.noacc_mr = s.dev.reg(s.noacc.data(), s.noacc.size(), IBV_ACCESS_LOCAL_WRITE);

  int lfd = Channel::listen_on(port);
  CHECK_OR_DIE(lfd >= 0, "listen");
  printf("server: listening on %u, device GID index 0 ready\n", port);
  fflush(stdout);
  // sessions 0: any number, until a client says stop (the soak's server). Finished sessions'
  // threads are joined as new ones come, so a long run keeps no dead thread.
  struct Running {
    std::thread t;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<Running> threads;
  int served = 0;
  for (int i = 0; sessions == 0 || i < sessions; ++i) {
    Channel ch = Channel::accept_from(lfd);
    CHECK_OR_DIE(ch.ok(), "accept");
    Mode mode{};
    if (!ch.recv(mode)) continue;
    if (mode == Mode::kStop) break;
    for (auto it = threads.begin(); it != threads.end();)
      if (it->done->load()) {
        it->t.join();
        it = threads.erase(it);
      } else {
        ++it;
      }
    auto done = std::make_shared<std::atomic<bool>>(false);
    threads.push_back({std::thread([&s, c = std::move(ch), done]() mutable {
                         Session(s, std::move(c)).run();
                         *done = true;
                       }), done});
    ++served;
  }
  for (auto& r : threads) r.t.join();
  if (sessions == 0) printf("server: %d sessions\n", served);

  if (atomic_sessions > 0 || (sessions == 0 && s.atomic_done > 0)) {
    const uint64_t total = s.originals.count;
    const bool unique = s.originals.exactly_0_to_count();
    printf("server: atomic sessions %d, Fetch-and-Add issued %" PRIu64 ", counter %" PRIu64
           ", originals are exactly 0..%" PRIu64 "-1: %s\n",
           s.atomic_done, total, *s.counter, total, unique ? "yes" : "NO");
    const bool all_came = atomic_sessions == 0 || s.atomic_done == atomic_sessions;
    if (!all_came || *s.counter != total || !unique) s.failures++;
  }
  int f = s.failures.load();
  printf("server: %s (%d failures)\n", f == 0 ? "PASS" : "FAIL", f);
  return f == 0 ? 0 : 1;
}

}  // namespace vrnic_test
