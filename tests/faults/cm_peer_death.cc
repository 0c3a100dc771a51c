// vrnic_cm_peer_death: an RDMA CM connection whose server is killed while the client writes;
// the client must see its WRITE fail (RETRY_EXC) and then RDMA_CM_EVENT_DISCONNECTED.
//
//   vrnic_cm_peer_death server <addr> <port>     accepts one connection, then waits to be killed
//   vrnic_cm_peer_death client <addr> <port>     writes until the transport gives up; prints
//                                                "client cm_peer_death: PASS ..." or FAIL
// Built against the system's <rdma/rdma_cma.h>; run under `vrnic run`.
#include <arpa/inet.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Remote {
  uint64_t addr;
  uint32_t rkey;
};

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "cm_peer_death: %s: %s\n", what, std::strerror(errno));
  std::printf("cm_peer_death: FAIL (%s)\n", what);
  std::exit(1);
}

// The next event on the channel, waiting at most timeout_ms; nullptr on timeout.
rdma_cm_event* next_event(rdma_event_channel* ch, int timeout_ms) {
  pollfd p{ch->fd, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) != 1) return nullptr;
  rdma_cm_event* ev = nullptr;
  if (rdma_get_cm_event(ch, &ev) != 0) die("rdma_get_cm_event");
  return ev;
}

void expect(rdma_event_channel* ch, rdma_cm_event_type want, rdma_cm_event** keep = nullptr) {
  rdma_cm_event* ev = next_event(ch, 10000);
  if (!ev) die(rdma_event_str(want));
  if (ev->event != want) {
    std::fprintf(stderr, "got %s (status %d), want %s\n", rdma_event_str(ev->event), ev->status,
                 rdma_event_str(want));
    die("unexpected event");
  }
  if (keep) {
    *keep = ev;
  } else {
    rdma_ack_cm_event(ev);
  }
}

ibv_qp_init_attr qp_attr() {
  ibv_qp_init_attr a{};
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = 64;
  a.cap.max_recv_wr = 4;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  a.sq_sig_all = 1;
  return a;
}

sockaddr_in address(const char* ip, int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) die("address");
  return a;
}

int server(const char* ip, int port) {
  rdma_event_channel* ch = rdma_create_event_channel();
  rdma_cm_id* listen_id = nullptr;
  if (!ch || rdma_create_id(ch, &listen_id, nullptr, RDMA_PS_TCP)) die("create id");
  sockaddr_in a = address(ip, port);
  if (rdma_bind_addr(listen_id, reinterpret_cast<sockaddr*>(&a))) die("rdma_bind_addr");
  if (rdma_listen(listen_id, 1)) die("rdma_listen");
  rdma_cm_event* req = nullptr;
  expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, &req);
  rdma_cm_id* id = req->id;
  rdma_ack_cm_event(req);
  ibv_qp_init_attr qa = qp_attr();
  if (rdma_create_qp(id, nullptr, &qa)) die("rdma_create_qp");
  static std::vector<char> buf(1 << 20);
  ibv_mr* mr = rdma_reg_write(id, buf.data(), buf.size());
  if (!mr) die("rdma_reg_write");
  Remote r{reinterpret_cast<uintptr_t>(buf.data()), mr->rkey};
  rdma_conn_param cp{};
  cp.private_data = &r;
  cp.private_data_len = sizeof r;
  cp.responder_resources = cp.initiator_depth = 1;
  if (rdma_accept(id, &cp)) die("rdma_accept");
  expect(ch, RDMA_CM_EVENT_ESTABLISHED);
  std::printf("server: connected, waiting to be killed\n");
  std::fflush(stdout);
  for (;;) pause();
}

// Writes 4 KiB at a time, one in flight, until a completion fails.
ibv_wc_status write_until_error(rdma_cm_id* id, const Remote& r, long* writes) {
  static std::vector<char> buf(4096, 'x');
  ibv_mr* mr = rdma_reg_msgs(id, buf.data(), buf.size());
  if (!mr) die("rdma_reg_msgs");
  for (;;) {
    if (rdma_post_write(id, nullptr, buf.data(), buf.size(), mr, 0, r.addr, r.rkey)) {
      die("rdma_post_write");
    }
    ibv_wc wc;
    if (rdma_get_send_comp(id, &wc) <= 0) die("rdma_get_send_comp");
    if (wc.status != IBV_WC_SUCCESS) return wc.status;
    ++*writes;
  }
}

int client(const char* ip, int port) {
  rdma_event_channel* ch = rdma_create_event_channel();
  rdma_cm_id* id = nullptr;
  if (!ch || rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP)) die("create id");
  sockaddr_in dst = address(ip, port);
  if (rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000)) die("resolve");
  expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
  if (rdma_resolve_route(id, 2000)) die("rdma_resolve_route");
  expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);
  ibv_qp_init_attr qa = qp_attr();
  if (rdma_create_qp(id, nullptr, &qa)) die("rdma_create_qp");
  rdma_conn_param cp{};
  cp.responder_resources = cp.initiator_depth = 1;
  cp.retry_count = 7;
  if (rdma_connect(id, &cp)) die("rdma_connect");
  rdma_cm_event* est = nullptr;
  expect(ch, RDMA_CM_EVENT_ESTABLISHED, &est);
  if (est->param.conn.private_data_len < sizeof(Remote)) die("private data");
  Remote r;
  std::memcpy(&r, est->param.conn.private_data, sizeof r);
  rdma_ack_cm_event(est);
  std::printf("client: connected, writing\n");
  std::fflush(stdout);
  long writes = 0;
  const ibv_wc_status st = write_until_error(id, r, &writes);
  const auto t_err = Clock::now();
  std::printf("client: %ld writes, then %s\n", writes, ibv_wc_status_str(st));
  rdma_cm_event* ev = next_event(ch, 10000);
  const double ms =
      std::chrono::duration<double, std::milli>(Clock::now() - t_err).count();
  if (!ev) die("no DISCONNECTED within 10 s of the failed WRITE");
  const rdma_cm_event_type got = ev->event;
  rdma_ack_cm_event(ev);
  if (st != IBV_WC_RETRY_EXC_ERR || got != RDMA_CM_EVENT_DISCONNECTED) {
    std::printf("client cm_peer_death: FAIL (%s, then %s)\n", ibv_wc_status_str(st),
                rdma_event_str(got));
    return 1;
  }
  rdma_disconnect(id);  // already over: 0, nothing more on the wire that matters
  std::printf("client cm_peer_death: PASS (%s, then %s %.1f ms later)\n", ibv_wc_status_str(st),
              rdma_event_str(got), ms);
  rdma_destroy_qp(id);
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s server|client <addr> <port>\n", argv[0]);
    return 2;
  }
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::string mode = argv[1];
  if (mode == "server") return server(argv[2], std::atoi(argv[3]));
  if (mode == "client") return client(argv[2], std::atoi(argv[3]));
  return 2;
}
