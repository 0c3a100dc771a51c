// vrnic_inject: forged RoCEv2 packets at a live connected QP (ReDMArk's injection), sent from
// an ordinary UDP socket: from another address, outside the PSN window, with guessed R_Keys,
// and (authenticated mode) with everything right but the tag. After each case the target's
// memory must be unchanged, its counters must name the case, and the connection must still
// carry a WRITE and a READ.
//
//   vrnic_inject <addr> <port> <stranger addr> <vrnic binary> [auth]
//
// One process, two RC QPs connected to each other through the RDMA CM on <addr> (the target
// is the passive side's); packets are built with vrnic's own wire writer. Prints
// "inject: PASS" or "inject: FAIL (...)". Built against the system's <rdma/rdma_cma.h>; run
// under `vrnic run --ip <addr> [--auth]`.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "wire/headers.h"
#include "wire/icrc.h"
#include "wire/opcode.h"

namespace {

constexpr size_t kLen = 4096;
int failures = 0;

[[noreturn]] void die(const char* what) {
  std::printf("inject: FAIL (%s: %s)\n", what, std::strerror(errno));
  std::exit(1);
}

void check(bool ok, const std::string& what) {
  std::printf("  %s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

rdma_cm_event* expect(rdma_event_channel* ch, rdma_cm_event_type want) {
  pollfd p{ch->fd, POLLIN, 0};
  if (poll(&p, 1, 10000) != 1) die(rdma_event_str(want));
  rdma_cm_event* ev = nullptr;
  if (rdma_get_cm_event(ch, &ev) != 0) die("rdma_get_cm_event");
  if (ev->event != want) {
    std::fprintf(stderr, "got %s (status %d), want %s\n", rdma_event_str(ev->event), ev->status,
                 rdma_event_str(want));
    die("unexpected CM event");
  }
  return ev;
}

// One end of the connection: its id, a registered buffer, its CQ.
struct End {
  rdma_cm_id* id = nullptr;
  std::vector<uint8_t> buf = std::vector<uint8_t>(kLen);
  ibv_mr* mr = nullptr;
  void setup(ibv_pd* pd) {
    ibv_qp_init_attr a{};
    a.qp_type = IBV_QPT_RC;
    a.cap = {16, 16, 1, 1, 0};
    a.sq_sig_all = 1;
    if (rdma_create_qp(id, pd, &a) != 0) die("rdma_create_qp");
    mr = ibv_reg_mr(pd, buf.data(), kLen,
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    if (!mr) die("ibv_reg_mr");
  }
};

struct Test {
  std::string addr, stranger, vrnic;
  End a, b;  // a: the genuine peer (active side); b: the target (passive side)
  std::vector<uint8_t> before;

  // The device's counters, as `vrnic stats` reads them from its file.
  std::map<std::string, uint64_t> counters() {
    std::string cmd = vrnic + " stats " + std::to_string(getpid());
    FILE* f = popen(cmd.c_str(), "r");
    if (!f) die("popen vrnic stats");
    std::map<std::string, uint64_t> c;
    char name[128];
    unsigned long long v;
    char line[512];
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "%127s %llu", name, &v) == 2) c[name] = v;
    pclose(f);
    return c;
  }

  uint32_t expected_psn() {
    ibv_qp_attr at{};
    ibv_qp_init_attr init{};
    if (ibv_query_qp(b.id->qp, &at, IBV_QP_RQ_PSN, &init) != 0) die("ibv_query_qp");
    return at.rq_psn;
  }

  // A WRITE ONLY of 8 bytes of 0x66 at the start of b's region, sent from `from`.
  void forge(const std::string& from, uint32_t psn, uint32_t rkey) {
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    int pmtu = IP_PMTUDISC_DO;  // DF, IP ID 0: the header vrnic's ICRC check expects
    setsockopt(s, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu);
    sockaddr_in me{}, to{};
    me.sin_family = to.sin_family = AF_INET;
    inet_pton(AF_INET, from.c_str(), &me.sin_addr);
    inet_pton(AF_INET, addr.c_str(), &to.sin_addr);
    to.sin_port = htons(4791);
    if (bind(s, reinterpret_cast<sockaddr*>(&me), sizeof me) != 0) die("bind");
    socklen_t len = sizeof me;
    getsockname(s, reinterpret_cast<sockaddr*>(&me), &len);

    vrnic::wire::Packet p;
    p.bth.opcode = vrnic::wire::kRcWriteOnly;
    p.bth.dest_qp = b.id->qp->qp_num;
    p.bth.psn = psn & 0xffffff;
    p.bth.ack_req = true;
    p.reth = {reinterpret_cast<uint64_t>(b.buf.data()), rkey, 8};
    const size_t h = vrnic::wire::header_size(p.bth.opcode);
    std::vector<uint8_t> pkt(h + 8 + vrnic::wire::kIcrcSize, 0x66);
    vrnic::wire::write_headers(p, pkt.data());
    vrnic::wire::IpUdpInfo ip;
    std::memcpy(ip.src.data(), &me.sin_addr, 4);
    std::memcpy(ip.dst.data(), &to.sin_addr, 4);
    ip.src_port = ntohs(me.sin_port);
    const size_t body = pkt.size() - vrnic::wire::kIcrcSize;
    vrnic::wire::store_icrc(vrnic::wire::compute_icrc(ip, {pkt.data(), body}), pkt.data() + body);
    if (sendto(s, pkt.data(), pkt.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to) < 0)
      die("sendto");
    close(s);
  }

  // a WRITEs 256 bytes into b and READs 512 back: both complete, the bytes are right.
  bool connection_works() {
    for (size_t i = 0; i < 256; ++i) a.buf[i] = uint8_t(rand());
    ibv_sge sg{reinterpret_cast<uint64_t>(a.buf.data()), 256, a.mr->lkey};
    ibv_send_wr w{}, *bad = nullptr;
    w.opcode = IBV_WR_RDMA_WRITE;
    w.sg_list = &sg;
    w.num_sge = 1;
    w.send_flags = IBV_SEND_SIGNALED;
    w.wr.rdma = {reinterpret_cast<uint64_t>(b.buf.data()) + 1024, b.mr->rkey};
    ibv_sge rsg{reinterpret_cast<uint64_t>(a.buf.data()) + 2048, 512, a.mr->lkey};
    ibv_send_wr r = w;
    r.opcode = IBV_WR_RDMA_READ;
    r.sg_list = &rsg;
    r.wr.rdma = {reinterpret_cast<uint64_t>(b.buf.data()) + 3072, b.mr->rkey};
    w.next = &r;
    if (ibv_post_send(a.id->qp, &w, &bad) != 0) return false;
    ibv_wc wc[2];
    int got = 0;
    for (int spins = 0; got < 2 && spins < 5'000'000; ++spins) {
      int n = ibv_poll_cq(a.id->send_cq, 2 - got, wc + got);
      if (n < 0) return false;
      got += n;
    }
    bool ok = got == 2 && wc[0].status == IBV_WC_SUCCESS && wc[1].status == IBV_WC_SUCCESS &&
              std::memcmp(b.buf.data() + 1024, a.buf.data(), 256) == 0 &&
              std::memcmp(a.buf.data() + 2048, b.buf.data() + 3072, 512) == 0;
    before = b.buf;  // what b's memory holds now
    return ok;
  }

  // Sends `forgeries`, then checks memory, each counter's growth and the connection.
  template <typename F>
  void run_case(const char* name, F forgeries, std::map<std::string, uint64_t> want) {
    std::printf("%s\n", name);
    auto c0 = counters();
    forgeries();
    usleep(200'000);  // the device's thread takes them
    check(b.buf == before, "memory unchanged");
    auto c1 = counters();
    // The two QPs share the device's counters: what the target answered to the forged packets
    // (a NAK, the ACK a duplicate gets again; nothing else is sent in the case) reaches the
    // genuine peer, which may count it as a duplicate too. So a counter that names forged
    // packets grew by them, plus at most those answers.
    const uint64_t answers = c1["tx_packets"] - c0["tx_packets"];
    for (auto& [names, v] : want) {  // "x+y": the sum of two counters
      uint64_t grew = 0;
      for (size_t at = 0, plus; at != std::string::npos; at = plus == std::string::npos ? plus : plus + 1) {
        plus = names.find('+', at);
        const std::string k = names.substr(at, plus == std::string::npos ? plus : plus - at);
        grew += c1[k] - c0[k];
      }
      const uint64_t most = v == 0 ? 0 : v + answers;
      check(grew >= v && grew <= most, names + " +" + std::to_string(grew) + " (want +" +
                                           std::to_string(v) + (most > v ? " .. +" + std::to_string(most) : "") +
                                           ", the target's answers " + std::to_string(answers) + ")");
    }
    check(connection_works(), "the connection still carries a WRITE and a READ");
  }

  void connect(int port) {
    rdma_event_channel* ch = rdma_create_event_channel();
    rdma_cm_id* listener = nullptr;
    if (!ch || rdma_create_id(ch, &listener, nullptr, RDMA_PS_TCP) != 0) die("rdma_create_id");
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    inet_pton(AF_INET, addr.c_str(), &sa.sin_addr);
    if (rdma_bind_addr(listener, reinterpret_cast<sockaddr*>(&sa)) != 0) die("rdma_bind_addr");
    if (rdma_listen(listener, 1) != 0) die("rdma_listen");
    if (rdma_create_id(ch, &a.id, nullptr, RDMA_PS_TCP) != 0) die("rdma_create_id");
    if (rdma_resolve_addr(a.id, nullptr, reinterpret_cast<sockaddr*>(&sa), 2000) != 0)
      die("rdma_resolve_addr");
    rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
    if (rdma_resolve_route(a.id, 2000) != 0) die("rdma_resolve_route");
    rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
    ibv_pd* pd = ibv_alloc_pd(a.id->verbs);
    a.setup(pd);
    rdma_conn_param cp{};
    cp.responder_resources = cp.initiator_depth = 1;
    cp.retry_count = 7;
    if (rdma_connect(a.id, &cp) != 0) die("rdma_connect");
    rdma_cm_event* req = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
    b.id = req->id;
    rdma_ack_cm_event(req);
    b.setup(pd);
    if (rdma_accept(b.id, &cp) != 0) die("rdma_accept");
    rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ESTABLISHED));
    rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ESTABLISHED));
    std::printf("connected: target QP 0x%06x, peer QP 0x%06x, R_Key 0x%08x\n",
                b.id->qp->qp_num, a.id->qp->qp_num, b.mr->rkey);
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: vrnic_inject ADDR PORT STRANGER VRNIC [auth]\n");
    return 2;
  }
  Test t;
  t.addr = argv[1];
  t.stranger = argv[3];
  t.vrnic = argv[4];
  const bool auth = argc > 5 && std::strcmp(argv[5], "auth") == 0;
  t.connect(std::atoi(argv[2]));
  check(t.connection_works(), "the connection carries a WRITE and a READ");
  const uint32_t rkey = t.b.mr->rkey;
  std::mt19937 rng(42);

  // In authenticated mode every forged packet falls at the tag, before any other check.
  using Want = std::map<std::string, uint64_t>;
  auto named = [&](Want plain, uint64_t n) { return auth ? Want{{"rx_auth_failed", n}} : plain; };
  t.run_case("from another address, PSN and R_Key right",
             [&] { t.forge(t.stranger, t.expected_psn(), rkey); },
             named({{"rx_wrong_source", 1}}, 1));
  t.run_case("from the peer's address, PSN ahead of the window", [&] {
      for (int d : {1, 2, 1000, (1 << 23) - 1}) t.forge(t.addr, t.expected_psn() + d, rkey);
    }, named({{"rx_out_of_sequence", 4}, {"rx_access_errors", 0}}, 4));
  t.run_case("from the peer's address, PSN behind it (duplicates)", [&] {
      for (int d : {1, 2, 1000, (1 << 23) - 1}) t.forge(t.addr, t.expected_psn() - d, rkey);
    }, named({{"rx_duplicate", 4}, {"rx_access_errors", 0}}, 4));
  t.run_case("200 guessed R_Keys at guessed PSNs", [&] {
      const uint32_t e = t.expected_psn();
      for (int i = 0; i < 200; ++i) {
        uint32_t psn = rng() & 0xffffff;
        t.forge(t.addr, psn == e ? psn + 1 : psn, rng());
      }
    }, named({{"rx_out_of_sequence+rx_duplicate", 200}, {"rx_access_errors", 0}}, 200));
  if (auth) {
    t.run_case("authenticated: address, PSN and R_Key right, no tag",
               [&] { t.forge(t.addr, t.expected_psn(), rkey); },
               {{"rx_auth_failed", 1}, {"rx_access_errors", 0}});
    t.run_case("authenticated: a guessed R_Key at the expected PSN",
               [&] { t.forge(t.addr, t.expected_psn(), rng()); },
               {{"rx_auth_failed", 1}, {"rx_access_errors", 0}});
    auto c = t.counters();
    check(c["rx_auth_ok"] > 0 && c["rx_auth_replayed"] == 0,
          "the genuine packets were tagged and taken (rx_auth_ok " +
              std::to_string(c["rx_auth_ok"]) + ")");
  }
  std::printf(failures ? "inject: FAIL (%d checks)\n" : "inject: PASS\n", failures);
  return failures ? 1 : 0;
}
