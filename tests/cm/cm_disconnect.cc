// vrnic_cm_disconnect: how an RDMA CM connection ends, seen from both sides (the events, their
// status, the QP's state and its flushed WRs), checked against the kernel CMA + librdmacm.
//
//   vrnic_cm_disconnect server|client <addr> <port> <plan>
//
// Both sides connect (RC, a receive posted on each QP), then follow their plan:
//   first    rdma_disconnect first; the QP is in ERR at once and its receive flushes; then
//            DISCONNECTED (status 0) within 5 s, TIMEWAIT_EXIT after it; QP, id and channel
//            destroyed
//   answer   wait for the peer's DISCONNECTED (status 0; the QP still RTS: the kernel moves
//            it only on this side's own rdma_disconnect), then rdma_disconnect (QP in ERR),
//            no second DISCONNECTED; then destroy everything
//   destroy  wait for DISCONNECTED, then rdma_destroy_qp / rdma_destroy_id (the DREP)
//   leave    wait for DISCONNECTED, then exit without destroying anything (the kernel
//            answers for the process as its rdma_cm file closes)
//   exit     exit at once, still connected (the kernel sends the DREQ for the process)
//   stop     stop (SIGSTOP) at once: nothing more is answered
//   unanswered  rdma_disconnect with a stopped peer: DISCONNECTED with status -ETIMEDOUT
//            once the DREQ's resends run out (IB_CM_DREQ_ERROR), within 10 s under
//            VRNIC_CM_RESPONSE_TIMEOUT=12
//   sync     ids without a channel (rdma_create_ep): rdma_disconnect returns once the
//            DISCONNECTED has come, and leaves it in id->event
// Prints "<side> <plan>: PASS ..." or "FAIL (...)" and exits 0 / 1. Built against the
// system's <rdma/rdma_cma.h>; run under `vrnic run`.
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

using Clock = std::chrono::steady_clock;

std::string side, plan;

[[noreturn]] void fail(const std::string& what) {
  std::printf("%s %s: FAIL (%s)\n", side.c_str(), plan.c_str(), what.c_str());
  std::exit(1);
}

void check(bool ok, const std::string& what) {
  if (!ok) fail(what);
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The next event on the channel within timeout_ms, or nullptr.
rdma_cm_event* next_event(rdma_event_channel* ch, int timeout_ms) {
  pollfd p{ch->fd, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) != 1) return nullptr;
  rdma_cm_event* ev = nullptr;
  if (rdma_get_cm_event(ch, &ev) != 0) fail(std::string("rdma_get_cm_event: ") + strerror(errno));
  return ev;
}

// Waits for `want`; returns its status.
int expect(rdma_event_channel* ch, rdma_cm_event_type want, int timeout_ms,
           rdma_cm_event** keep = nullptr) {
  rdma_cm_event* ev = next_event(ch, timeout_ms);
  if (!ev) fail(std::string("no ") + rdma_event_str(want) + " within " +
                std::to_string(timeout_ms) + " ms");
  if (ev->event != want) {
    fail(std::string("got ") + rdma_event_str(ev->event) + " (status " +
         std::to_string(ev->status) + "), want " + rdma_event_str(want));
  }
  const int status = ev->status;
  if (keep) {
    *keep = ev;
  } else {
    rdma_ack_cm_event(ev);
  }
  return status;
}

ibv_qp_state qp_state(ibv_qp* qp) {
  ibv_qp_attr a{};
  ibv_qp_init_attr ia{};
  if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia) != 0) fail("ibv_query_qp");
  return a.qp_state;
}

sockaddr_in address(const char* ip, int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) fail("address");
  return a;
}

ibv_qp_init_attr qp_attr() {
  ibv_qp_init_attr a{};
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = a.cap.max_recv_wr = 4;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  a.sq_sig_all = 1;
  return a;
}

struct Conn {
  rdma_event_channel* ch = nullptr;
  rdma_cm_id* listener = nullptr;
  rdma_cm_id* id = nullptr;
  ibv_mr* mr = nullptr;
  char buf[64] = {};
};

// A receive that only a flush can complete (the peer never sends).
void post_receive(Conn& c) {
  c.mr = rdma_reg_msgs(c.id, c.buf, sizeof c.buf);
  check(c.mr != nullptr, "rdma_reg_msgs");
  check(rdma_post_recv(c.id, nullptr, c.buf, sizeof c.buf, c.mr) == 0, "rdma_post_recv");
}

void connect_server(Conn& c, const char* ip, int port) {
  c.ch = rdma_create_event_channel();
  check(c.ch && rdma_create_id(c.ch, &c.listener, nullptr, RDMA_PS_TCP) == 0, "create id");
  sockaddr_in a = address(ip, port);
  check(rdma_bind_addr(c.listener, reinterpret_cast<sockaddr*>(&a)) == 0, "rdma_bind_addr");
  check(rdma_listen(c.listener, 1) == 0, "rdma_listen");
  rdma_cm_event* req = nullptr;
  expect(c.ch, RDMA_CM_EVENT_CONNECT_REQUEST, 20000, &req);
  c.id = req->id;
  rdma_ack_cm_event(req);
  ibv_qp_init_attr qa = qp_attr();
  check(rdma_create_qp(c.id, nullptr, &qa) == 0, "rdma_create_qp");
  post_receive(c);
  check(rdma_accept(c.id, nullptr) == 0, "rdma_accept");
  expect(c.ch, RDMA_CM_EVENT_ESTABLISHED, 10000);
}

void connect_client(Conn& c, const char* ip, int port) {
  c.ch = rdma_create_event_channel();
  check(c.ch && rdma_create_id(c.ch, &c.id, nullptr, RDMA_PS_TCP) == 0, "create id");
  sockaddr_in dst = address(ip, port);
  check(rdma_resolve_addr(c.id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000) == 0,
        "rdma_resolve_addr");
  expect(c.ch, RDMA_CM_EVENT_ADDR_RESOLVED, 5000);
  check(rdma_resolve_route(c.id, 2000) == 0, "rdma_resolve_route");
  expect(c.ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 5000);
  ibv_qp_init_attr qa = qp_attr();
  check(rdma_create_qp(c.id, nullptr, &qa) == 0, "rdma_create_qp");
  post_receive(c);
  check(rdma_connect(c.id, nullptr) == 0, "rdma_connect");
  expect(c.ch, RDMA_CM_EVENT_ESTABLISHED, 10000);
}

// The receive posted at the start completed with a flush error.
void expect_flushed(Conn& c) {
  ibv_wc wc{};
  check(rdma_get_recv_comp(c.id, &wc) == 1, "rdma_get_recv_comp");
  check(wc.status == IBV_WC_WR_FLUSH_ERR,
        std::string("the receive completed with ") + ibv_wc_status_str(wc.status));
}

void destroy(Conn& c) {
  rdma_dereg_mr(c.mr);
  rdma_destroy_qp(c.id);
  check(rdma_destroy_id(c.id) == 0, "rdma_destroy_id");
  if (c.listener) check(rdma_destroy_id(c.listener) == 0, "rdma_destroy_id (listener)");
  rdma_destroy_event_channel(c.ch);
}

void plan_first(Conn& c) {
  const auto t0 = Clock::now();
  check(rdma_disconnect(c.id) == 0, "rdma_disconnect");
  check(qp_state(c.id->qp) == IBV_QPS_ERR, "QP not in ERR after rdma_disconnect");
  expect_flushed(c);
  const int status = expect(c.ch, RDMA_CM_EVENT_DISCONNECTED, 5000);
  check(status == 0, "DISCONNECTED status " + std::to_string(status));
  const double disconnected = ms_since(t0);
  expect(c.ch, RDMA_CM_EVENT_TIMEWAIT_EXIT, 10000);
  std::printf("%s %s: PASS (DISCONNECTED status 0 %.1f ms after rdma_disconnect, "
              "TIMEWAIT_EXIT %.1f ms; QP in ERR, receive flushed)\n",
              side.c_str(), plan.c_str(), disconnected, ms_since(t0));
  destroy(c);
}

// Waits (up to 20 s) for the peer's disconnect.
void wait_peer(Conn& c) {
  const int status = expect(c.ch, RDMA_CM_EVENT_DISCONNECTED, 20000);
  check(status == 0, "DISCONNECTED status " + std::to_string(status));
}

void plan_answer(Conn& c) {
  wait_peer(c);
  check(qp_state(c.id->qp) == IBV_QPS_RTS, "QP left RTS before this side's rdma_disconnect");
  check(rdma_disconnect(c.id) == 0, "rdma_disconnect");
  check(qp_state(c.id->qp) == IBV_QPS_ERR, "QP not in ERR after rdma_disconnect");
  expect_flushed(c);
  rdma_cm_event* ev = next_event(c.ch, 500);
  check(!ev || ev->event == RDMA_CM_EVENT_TIMEWAIT_EXIT,
        std::string("a second event: ") + (ev ? rdma_event_str(ev->event) : ""));
  if (ev) rdma_ack_cm_event(ev);
  std::printf("%s %s: PASS (DISCONNECTED status 0, QP RTS until rdma_disconnect, then ERR)\n",
              side.c_str(), plan.c_str());
  destroy(c);
}

// Synchronous ids: rdma_disconnect waits for the DISCONNECTED and leaves it in id->event.
int run_sync(const char* ip, const char* port) {
  rdma_addrinfo hints{};
  hints.ai_port_space = RDMA_PS_TCP;
  rdma_addrinfo* res = nullptr;
  check(rdma_getaddrinfo(ip, port, &hints, &res) == 0, "rdma_getaddrinfo");
  ibv_qp_init_attr qa = qp_attr();
  rdma_cm_id* id = nullptr;
  check(rdma_create_ep(&id, res, nullptr, &qa) == 0, "rdma_create_ep");
  rdma_freeaddrinfo(res);
  check(rdma_connect(id, nullptr) == 0, "rdma_connect");
  const auto t0 = Clock::now();
  check(rdma_disconnect(id) == 0, std::string("rdma_disconnect: ") + strerror(errno));
  const double ms = ms_since(t0);
  check(id->event && id->event->event == RDMA_CM_EVENT_DISCONNECTED,
        "rdma_disconnect returned without the DISCONNECTED in id->event");
  check(id->event->status == 0, "DISCONNECTED status " + std::to_string(id->event->status));
  std::printf("%s %s: PASS (rdma_disconnect returned with DISCONNECTED after %.1f ms)\n",
              side.c_str(), plan.c_str(), ms);
  rdma_destroy_ep(id);
  return 0;
}

int run(const char* ip, int port) {
  Conn c;
  if (side == "server") {
    connect_server(c, ip, port);
  } else {
    connect_client(c, ip, port);
  }
  std::printf("%s: connected\n", side.c_str());
  std::fflush(stdout);
  if (plan == "first") {
    plan_first(c);
  } else if (plan == "answer") {
    plan_answer(c);
  } else if (plan == "destroy") {
    wait_peer(c);
    std::printf("%s %s: PASS (DISCONNECTED status 0; destroying without rdma_disconnect)\n",
                side.c_str(), plan.c_str());
    destroy(c);
  } else if (plan == "exit") {
    std::printf("%s %s: exiting connected\n", side.c_str(), plan.c_str());
    std::exit(0);
  } else if (plan == "stop") {
    std::printf("%s %s: stopping\n", side.c_str(), plan.c_str());
    std::fflush(stdout);
    raise(SIGSTOP);
  } else if (plan == "unanswered") {
    const auto t0 = Clock::now();
    check(rdma_disconnect(c.id) == 0, "rdma_disconnect");
    const int status = expect(c.ch, RDMA_CM_EVENT_DISCONNECTED, 10000);
    check(status == -ETIMEDOUT, "DISCONNECTED status " + std::to_string(status) +
                                    ", want -ETIMEDOUT");
    std::printf("%s %s: PASS (DISCONNECTED status -ETIMEDOUT %.1f ms after rdma_disconnect)\n",
                side.c_str(), plan.c_str(), ms_since(t0));
    destroy(c);
  } else if (plan == "leave") {
    wait_peer(c);
    std::printf("%s %s: PASS (DISCONNECTED status 0; exiting without cleaning up)\n",
                side.c_str(), plan.c_str());
    std::fflush(stdout);
    std::exit(0);
  } else {
    fail("unknown plan");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s server|client <addr> <port> <plan>\n", argv[0]);
    return 2;
  }
  setvbuf(stdout, nullptr, _IOLBF, 0);
  side = argv[1];
  plan = argv[4];
  if (plan == "sync") {
    if (side != "client") fail("sync is a client's plan");
    return run_sync(argv[2], argv[3]);
  }
  return run(argv[2], std::atoi(argv[3]));
}
