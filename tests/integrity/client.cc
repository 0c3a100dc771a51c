// Integrity test client: data transfers of many sizes, concurrent atomics, access errors and
// the recovery of the QPs they end.
#include <arpa/inet.h>

#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "channel.h"
#include "protocol.h"
#include "server.h"

namespace vrnic_test {
namespace {

// Sizes from 1 B to 16 MiB: odd, around MTU and page boundaries.
const uint64_t kSizes[] = {1,     2,     3,     7,     8,     63,        64,       65,
                           255,   256,   1023,  1024,  1025,  4095,      4096,     4097,
                           8191,  65535, 65536, 65537, (1 << 20) + 13, 4 << 20, 16 << 20};

class Session {
 public:
  Session(const Device& dev, const std::string& host, uint16_t port, Mode mode)
      : dev_(dev), ch_(Channel::connect_to(host, port)) {
    CHECK_OR_DIE(ch_.ok(), "connect to server");
    CHECK_OR_DIE(ch_.send(mode), "hello");
    connect();
  }
  ~Session() {
    Request r;
    r.cmd = Cmd::kBye;
    call(r);
  }

  void connect() {
    ep_.reset();
    ep_ = std::make_unique<RcEndpoint>(dev_);
    CHECK_OR_DIE(ch_.recv(info_), "server info");
    CHECK_OR_DIE(ch_.send(ep_->local_info()), "send qp info");
    ep_->connect(info_.qp);
  }
  void new_qp() {
    Request r;
    r.cmd = Cmd::kNewQp;
    CHECK_OR_DIE(ch_.send(r), "new qp");
    connect();
    Reply rep;
    CHECK_OR_DIE(ch_.recv(rep) && rep.ok, "new qp reply");
  }

  // The session QP (in ERR) and the server's are restarted in place, with new PSNs.
  void recover_qp() {
    Request r;
    r.cmd = Cmd::kRecoverQp;
    CHECK_OR_DIE(ch_.send(r), "recover qp");
    ep_->reset();
    QpInfo peer;
    CHECK_OR_DIE(ch_.recv(peer) && ch_.send(ep_->local_info()), "recover exchange");
    ep_->connect(peer);
    Reply rep;
    CHECK_OR_DIE(ch_.recv(rep) && rep.ok, "recover qp reply");
  }

  Reply call(const Request& r) {
    Reply rep;
    CHECK_OR_DIE(ch_.send(r) && ch_.recv(rep), "server call");
    return rep;
  }
  bool expect_ok(const Request& r, const char* what) {
    Reply rep = call(r);
    if (!rep.ok) fprintf(stderr, "client: FAIL %s: %s\n", what, rep.msg);
    return rep.ok;
  }

  ibv_wc post_and_wait(ibv_send_wr& wr) {
    ibv_send_wr* bad = nullptr;
    errno = ibv_post_send(ep_->qp(), &wr, &bad);
    CHECK_OR_DIE(errno == 0, "ibv_post_send");
    return ep_->wait_one();
  }

  const Device& dev_;
  Channel ch_;
  ServerInfo info_;
  std::unique_ptr<RcEndpoint> ep_;
};

// Local buffers: the message is cut into nsge pieces with 11-byte gaps at an odd offset.
struct LocalBuf {
  std::vector<uint8_t> mem;
  ibv_mr* mr = nullptr;
  LocalBuf(const Device& dev, size_t n) : mem(n) {
    mr = dev.reg(mem.data(), mem.size(), IBV_ACCESS_LOCAL_WRITE);
  }
  ~LocalBuf() { ibv_dereg_mr(mr); }
  std::vector<ibv_sge> sges(uint64_t len, uint32_t nsge) {
    std::vector<ibv_sge> v;
    uint64_t pos = 3, left = len;
    for (uint32_t i = 0; i < nsge; ++i) {
      uint64_t piece = i + 1 == nsge ? left : left / (nsge - i);
      v.push_back({reinterpret_cast<uintptr_t>(mem.data() + pos), static_cast<uint32_t>(piece),
                   mr->lkey});
      pos += piece + 11;
      left -= piece;
    }
    return v;
  }
  void scatter(const std::vector<ibv_sge>& s, const uint8_t* src) {
    for (auto& e : s) {
      memcpy(reinterpret_cast<void*>(e.addr), src, e.length);
      src += e.length;
    }
  }
  std::vector<uint8_t> gather(const std::vector<ibv_sge>& s) {
    std::vector<uint8_t> out;
    for (auto& e : s) {
      auto* p = reinterpret_cast<uint8_t*>(e.addr);
      out.insert(out.end(), p, p + e.length);
    }
    return out;
  }
};

int run_data(const Device& dev, const std::string& host, uint16_t port) {
  Session s(dev, host, port, Mode::kData);
  LocalBuf buf(dev, kRegionSize + 64);
  int failures = 0, transfers = 0, inline_used = 0;
  uint64_t bytes = 0;
  uint64_t seed = 1000;
  for (uint64_t len : kSizes) {
    for (Op op : {Op::kWrite, Op::kWriteImm, Op::kSend, Op::kRead}) {
      ++seed;
      uint32_t nsge = static_cast<uint32_t>(std::min<uint64_t>(len, 1 + seed % 3));
      uint64_t offset = (seed * 7) % 61;  // unaligned target address
      std::vector<uint8_t> data(len);
      gen(data.data(), len, seed);
      auto sges = buf.sges(len, nsge);
      Request r{Cmd::kVerifyRegion, op, seed, offset, len, nsge, 0};
      if (op == Op::kWriteImm) r.imm = htonl(static_cast<uint32_t>(seed * 2654435761u) | 1);
      if (op == Op::kSend || op == Op::kWriteImm) {
        Request p = r;
        p.cmd = Cmd::kPrepareRecv;
        p.nsge = op == Op::kSend ? nsge : 1;
        if (!s.expect_ok(p, "prepare recv")) { ++failures; continue; }
      }
      if (op == Op::kRead) {
        Request f = r;
        f.cmd = Cmd::kFillRegion;
        if (!s.expect_ok(f, "fill")) { ++failures; continue; }
        memset(buf.mem.data(), 0, len + 64);
      } else {
        buf.scatter(sges, data.data());
      }
      ibv_send_wr wr{};
      wr.wr_id = seed;
      wr.sg_list = sges.data();
      wr.num_sge = static_cast<int>(sges.size());
      wr.send_flags = IBV_SEND_SIGNALED;
      if (op != Op::kRead && len <= s.ep_->max_inline() && seed % 2 == 0) {
        wr.send_flags |= IBV_SEND_INLINE;
        ++inline_used;
      }
      wr.opcode = op == Op::kWrite ? IBV_WR_RDMA_WRITE
                  : op == Op::kWriteImm ? IBV_WR_RDMA_WRITE_WITH_IMM
                  : op == Op::kSend ? IBV_WR_SEND : IBV_WR_RDMA_READ;
      wr.imm_data = r.imm;
      wr.wr.rdma.remote_addr = s.info_.region_addr + offset;
      wr.wr.rdma.rkey = s.info_.region_rkey;
      ibv_wc wc = s.post_and_wait(wr);
      ++transfers;
      bytes += len;
      bool ok = wc.status == IBV_WC_SUCCESS && wc.wr_id == seed;
      ibv_wc_opcode want_opc = op == Op::kRead ? IBV_WC_RDMA_READ
                               : op == Op::kSend ? IBV_WC_SEND : IBV_WC_RDMA_WRITE;
      if (!ok || wc.opcode != want_opc || (op == Op::kRead && wc.byte_len != len)) {
        fprintf(stderr, "client: FAIL %s len %" PRIu64 ": CQE %s opcode %d byte_len %u\n",
                op_name(op), len, ibv_wc_status_str(wc.status), wc.opcode, wc.byte_len);
        ++failures;
        continue;
      }
      if (op == Op::kRead) {
        if (buf.gather(sges) != data) {
          fprintf(stderr, "client: FAIL READ len %" PRIu64 " sge %u: bytes differ\n", len, nsge);
          ++failures;
        }
        continue;
      }
      r.cmd = op == Op::kWrite ? Cmd::kVerifyRegion : Cmd::kCheckRecv;
      if (!s.expect_ok(r, op_name(op))) ++failures;
    }
  }
  printf("client: data: %d transfers, %" PRIu64 " bytes, sizes 1 B .. 16 MiB, %d inline, "
         "%d failures\n", transfers, bytes, inline_used, failures);
  return failures;
}

// Fetch-and-Add +1 with up to 8 in flight, then Compare-and-Swap hit and miss.
int run_atomic_thread(const Device& dev, const std::string& host, uint16_t port, int iters) {
  Session s(dev, host, port, Mode::kAtomic);
  LocalBuf buf(dev, 8 * 64);
  std::vector<uint64_t> originals;
  int failures = 0, posted = 0, done = 0, inflight = 0;
  while (done < iters) {
    while (posted < iters && inflight < 8) {
      ibv_sge sge{reinterpret_cast<uintptr_t>(buf.mem.data() + 8 * (posted % 8)), 8, buf.mr->lkey};
      ibv_send_wr wr{}, *bad = nullptr;
      wr.wr_id = static_cast<uint64_t>(posted % 8);
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
      wr.send_flags = IBV_SEND_SIGNALED;
      wr.wr.atomic.remote_addr = s.info_.counter_addr;
      wr.wr.atomic.rkey = s.info_.counter_rkey;
      wr.wr.atomic.compare_add = 1;
      CHECK_OR_DIE(ibv_post_send(s.ep_->qp(), &wr, &bad) == 0, "post FAA");
      ++posted;
      ++inflight;
    }
    ibv_wc wc = s.ep_->wait_one();
    --inflight;
    ++done;
    if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_FETCH_ADD || wc.byte_len != 8) {
      fprintf(stderr, "client: FAIL FAA CQE %s\n", ibv_wc_status_str(wc.status));
      ++failures;
      break;
    }
    uint64_t v;
    memcpy(&v, buf.mem.data() + 8 * wc.wr_id, 8);
    originals.push_back(v);
  }
  Request r;
  r.cmd = Cmd::kAtomicDone;
  CHECK_OR_DIE(s.ch_.send(r) && s.ch_.send_vec(originals), "send originals");
  Reply rep;
  CHECK_OR_DIE(s.ch_.recv(rep) && rep.ok, "atomic done");

  // Compare-and-Swap on a word of this session's region: hit, then miss.
  Request f{Cmd::kFillRegion, Op::kWrite, 77, 64, 8, 1, 0};
  CHECK_OR_DIE(s.expect_ok(f, "fill"), "fill");
  uint64_t v0;
  gen(reinterpret_cast<uint8_t*>(&v0), 8, 77);
  const uint64_t v1 = 0x0123456789abcdefull;
  for (int round = 0; round < 2; ++round) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf.mem.data()), 8, buf.mr->lkey};
    ibv_send_wr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.atomic.remote_addr = s.info_.region_addr + 64;
    wr.wr.atomic.rkey = s.info_.region_rkey;
    wr.wr.atomic.compare_add = v0;  // matches in round 0; stale in round 1
    wr.wr.atomic.swap = round == 0 ? v1 : 0xdeadbeefull;
    ibv_wc wc = s.post_and_wait(wr);
    uint64_t orig;
    memcpy(&orig, buf.mem.data(), 8);
    uint64_t want_orig = round == 0 ? v0 : v1;
    if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_COMP_SWAP || orig != want_orig) {
      fprintf(stderr, "client: FAIL CAS round %d: %s orig %" PRIx64 " want %" PRIx64 "\n", round,
              ibv_wc_status_str(wc.status), orig, want_orig);
      ++failures;
    }
    // Memory must hold v1 after both rounds: swapped by the hit, untouched by the miss.
    uint64_t want_mem = v1;
    ibv_sge rs{reinterpret_cast<uintptr_t>(buf.mem.data() + 8), 8, buf.mr->lkey};
    ibv_send_wr rd{};
    rd.sg_list = &rs;
    rd.num_sge = 1;
    rd.opcode = IBV_WR_RDMA_READ;
    rd.send_flags = IBV_SEND_SIGNALED;
    rd.wr.rdma.remote_addr = s.info_.region_addr + 64;
    rd.wr.rdma.rkey = s.info_.region_rkey;
    wc = s.post_and_wait(rd);
    uint64_t mem;
    memcpy(&mem, buf.mem.data() + 8, 8);
    if (wc.status != IBV_WC_SUCCESS || mem != want_mem) {
      fprintf(stderr, "client: FAIL CAS round %d: memory %" PRIx64 " want %" PRIx64 "\n", round,
              mem, want_mem);
      ++failures;
    }
  }
  return failures;
}

int run_atomic(const Device& dev, const std::string& host, uint16_t port, int threads, int iters) {
  std::vector<std::thread> ts;
  std::vector<int> fails(threads, 0);
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] { fails[t] = run_atomic_thread(dev, host, port, iters); });
  for (auto& t : ts) t.join();
  int f = 0;
  for (int x : fails) f += x;
  printf("client: atomic: %d threads x %d Fetch-and-Add, CAS hit+miss each, %d failures\n",
         threads, iters, f);
  return f;
}

// After a failure: the QPs restarted in place (RESET, INIT, RTR, RTS), with a WR flushed in
// ERR and never polled; the next completion must be a new WRITE's success (the flush went
// with the RESET), its bytes in the server's region.
int recover_and_write(Session& s, LocalBuf& buf, const char* name, uint64_t seed) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf.mem.data()), 64, buf.mr->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = 7;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  CHECK_OR_DIE(ibv_post_send(s.ep_->qp(), &wr, &bad) == 0, "post in ERR");
  s.recover_qp();
  gen(buf.mem.data(), 64, seed);
  wr.wr_id = seed;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.wr.rdma.remote_addr = s.info_.region_addr + 128;
  wr.wr.rdma.rkey = s.info_.region_rkey;
  ibv_wc wc = s.post_and_wait(wr);
  if (wc.status != IBV_WC_SUCCESS || wc.wr_id != seed) {
    fprintf(stderr, "client: FAIL %s: after recovery wr %" PRIu64 " %s, want WRITE SUCCESS\n",
            name, wc.wr_id, ibv_wc_status_str(wc.status));
    return 1;
  }
  Request v{Cmd::kVerifyRegion, Op::kWrite, seed, 128, 64, 1, 0};
  return s.expect_ok(v, "WRITE after recovery") ? 0 : 1;
}

// One remote access that must fail with REM_ACCESS_ERR, flush the WR behind it, and leave
// every byte of the target unchanged. Then a new QP, or (recover) the same QPs restarted.
int access_case(Session& s, LocalBuf& buf, const char* name, ibv_wr_opcode opcode,
                uint64_t addr, uint32_t rkey, uint32_t len, bool recover = false) {
  Request snap{Cmd::kSnapshot};
  CHECK_OR_DIE(s.expect_ok(snap, "snapshot"), "snapshot");
  memset(buf.mem.data(), 0x77, len);
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf.mem.data()), len, buf.mr->lkey};
  ibv_send_wr wr[2] = {};
  for (int i = 0; i < 2; ++i) {
    wr[i].wr_id = 100 + i;
    wr[i].sg_list = &sge;
    wr[i].num_sge = 1;
    wr[i].opcode = opcode;
    wr[i].send_flags = IBV_SEND_SIGNALED;
    if (opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
      wr[i].wr.atomic.remote_addr = addr;
      wr[i].wr.atomic.rkey = rkey;
      wr[i].wr.atomic.compare_add = 5;
    } else {
      wr[i].wr.rdma.remote_addr = addr;
      wr[i].wr.rdma.rkey = rkey;
    }
  }
  wr[0].next = &wr[1];
  ibv_send_wr* bad = nullptr;
  CHECK_OR_DIE(ibv_post_send(s.ep_->qp(), wr, &bad) == 0, "post access case");
  ibv_wc a = s.ep_->wait_one(), b = s.ep_->wait_one();
  int f = 0;
  if (a.wr_id != 100 || a.status != IBV_WC_REM_ACCESS_ERR) {
    fprintf(stderr, "client: FAIL %s: first CQE wr %" PRIu64 " %s, want REM_ACCESS_ERR\n", name,
            a.wr_id, ibv_wc_status_str(a.status));
    ++f;
  }
  if (b.wr_id != 101 || b.status != IBV_WC_WR_FLUSH_ERR) {
    fprintf(stderr, "client: FAIL %s: second CQE wr %" PRIu64 " %s, want WR_FLUSH_ERR\n", name,
            b.wr_id, ibv_wc_status_str(b.status));
    ++f;
  }
  Request cmp{Cmd::kCompareSnapshot};
  if (!s.expect_ok(cmp, name)) ++f;
  printf("client: access: %-28s -> %s, then %s; target unchanged: %s\n", name,
         ibv_wc_status_str(a.status), ibv_wc_status_str(b.status), f ? "see above" : "yes");
  if (!recover) {
    s.new_qp();
    return f;
  }
  const int r = recover_and_write(s, buf, name, 9000 + rkey % 1000);
  printf("client: access: %-28s -> QPs restarted in place, WRITE after it: %s\n", name,
         r ? "FAILED" : "ok");
  return f + r;
}

int run_access(const Device& dev, const std::string& host, uint16_t port) {
  Session s(dev, host, port, Mode::kAccess);
  LocalBuf buf(dev, 4096);
  const ServerInfo& i = s.info_;
  int f = 0;
  f += access_case(s, buf, "WRITE invalid rkey", IBV_WR_RDMA_WRITE, i.region_addr,
                   i.region_rkey ^ 0x5a5a00, 64);
  f += access_case(s, buf, "WRITE past the MR end", IBV_WR_RDMA_WRITE,
                   i.region_addr + i.region_len - 32, i.region_rkey, 64, true);
  f += access_case(s, buf, "WRITE before the MR start", IBV_WR_RDMA_WRITE, i.region_addr - 8,
                   i.region_rkey, 16);
  f += access_case(s, buf, "WRITE without REMOTE_WRITE", IBV_WR_RDMA_WRITE, i.ro_addr, i.ro_rkey,
                   64);
  f += access_case(s, buf, "READ without REMOTE_READ", IBV_WR_RDMA_READ, i.noacc_addr,
                   i.noacc_rkey, 64, true);
  f += access_case(s, buf, "READ past the MR end", IBV_WR_RDMA_READ, i.ro_addr + i.ro_len - 8,
                   i.ro_rkey, 64);
  f += access_case(s, buf, "FAA without REMOTE_ATOMIC", IBV_WR_ATOMIC_FETCH_AND_ADD, i.ro_addr,
                   i.ro_rkey, 8);
  f += access_case(s, buf, "FAA invalid rkey", IBV_WR_ATOMIC_FETCH_AND_ADD, i.region_addr,
                   i.region_rkey + 0x100, 8, true);

  // ibv_post_send on a QP that is not in RTS fails and points bad_wr at the WR.
  for (bool to_init : {false, true}) {
    RcEndpoint ep(dev);
    if (to_init) {
      ibv_qp_attr a{};
      a.qp_state = IBV_QPS_INIT;
      a.port_num = 1;
      a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE;
      CHECK_OR_DIE(ibv_modify_qp(ep.qp(), &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                                  IBV_QP_ACCESS_FLAGS) == 0, "to INIT");
    }
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf.mem.data()), 8, buf.mr->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    int rc = ibv_post_send(ep.qp(), &wr, &bad);
    bool ok = rc != 0 && bad == &wr;
    printf("client: access: post_send in %-5s -> rc %d (%s), bad_wr %s\n",
           to_init ? "INIT" : "RESET", rc, strerror(rc), bad == &wr ? "set" : "NOT set");
    if (!ok) ++f;
  }
  printf("client: access: %d failures\n", f);
  return f;
}

}  // namespace

int run_client(const std::string& host, uint16_t port, const std::string& mode, int threads,
               int iterations) {
  if (mode == "stop") {  // ends a server serving any number of sessions
    Channel ch = Channel::connect_to(host, port);
    return ch.ok() && ch.send(Mode::kStop) ? 0 : 1;
  }
  Device dev = Device::open();
  int f = 0;
  if (mode == "data") f = run_data(dev, host, port);
  else if (mode == "atomic") f = run_atomic(dev, host, port, threads, iterations);
  else if (mode == "access") f = run_access(dev, host, port);
  else die("unknown mode " + mode);
  printf("client %s: %s\n", mode.c_str(), f == 0 ? "PASS" : "FAIL");
  return f == 0 ? 0 : 1;
}

}  // namespace vrnic_test
