// Helpers of the librdmacm tests: the device's own address, events awaited with a limit, both ends of a connection inside one process.
#pragma once
#include <arpa/inet.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <cstring>

#include <gtest/gtest.h>

#include "wire/gid.h"

namespace vrnic::rdmacm::test {

// The device's IPv4 address (the one GID 0 stands for) with the given port.
inline sockaddr_in device_addr(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  int n = 0;
  ibv_context** list = rdma_get_devices(&n);
  if (list && n > 0) {
    ibv_gid gid{};
    if (ibv_query_gid(list[0], 1, 0, &gid) == 0) {
      wire::GidBytes g;
      std::memcpy(g.data(), gid.raw, g.size());
      bool ipv6 = false;
      std::memcpy(&a.sin_addr, wire::ip_of_gid(g, ipv6).data(), 4);
    }
  }
  rdma_free_devices(list);
  return a;
}

inline sockaddr_in v4(const char* ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip, &a.sin_addr);
  return a;
}

inline sockaddr* sa(sockaddr_in& a) { return reinterpret_cast<sockaddr*>(&a); }

// The next event within timeout_ms, or nullptr.
inline rdma_cm_event* next_event(rdma_event_channel* ch, int timeout_ms) {
  pollfd p{ch->fd, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) != 1) return nullptr;
  rdma_cm_event* ev = nullptr;
  return rdma_get_cm_event(ch, &ev) == 0 ? ev : nullptr;
}

// The next event, which must be `type` (else a failure and nullptr); the caller acks it.
inline rdma_cm_event* expect_event(rdma_event_channel* ch, rdma_cm_event_type type,
                                   int timeout_ms = 5000) {
  rdma_cm_event* ev = next_event(ch, timeout_ms);
  if (!ev) {
    ADD_FAILURE() << "no " << rdma_event_str(type) << " within " << timeout_ms << " ms";
    return nullptr;
  }
  if (ev->event != type) {
    ADD_FAILURE() << "got " << rdma_event_str(ev->event) << " (status " << ev->status
                  << "), want " << rdma_event_str(type);
    rdma_ack_cm_event(ev);
    return nullptr;
  }
  return ev;
}

// Status of the next event, which must be `type`; INT32_MIN if it is not.
inline int status_of(rdma_event_channel* ch, rdma_cm_event_type type, int timeout_ms = 5000) {
  rdma_cm_event* ev = expect_event(ch, type, timeout_ms);
  if (!ev) return INT32_MIN;
  const int status = ev->status;
  rdma_ack_cm_event(ev);
  return status;
}

inline ibv_qp_init_attr rc_qp_attr() {
  ibv_qp_init_attr a{};
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = a.cap.max_recv_wr = 4;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  return a;
}

inline ibv_qp_state qp_state(ibv_qp* qp) {
  ibv_qp_attr a{};
  ibv_qp_init_attr ia{};
  EXPECT_EQ(ibv_query_qp(qp, &a, IBV_QP_STATE, &ia), 0);
  return a.qp_state;
}

// A listener on the device's address and a client resolved to it (route resolved, QP made),
// each on its own channel; connect() then takes the request on the server's side.
struct Pair {
  rdma_event_channel* lch = nullptr;  // the listener's (and its requests')
  rdma_event_channel* cch = nullptr;  // the client's
  rdma_cm_id* listener = nullptr;
  rdma_cm_id* client = nullptr;
  rdma_cm_id* server = nullptr;  // the request's id, once connect() took it

  // Listening on `port` (no listener if port is 0), the client resolved to `to_port`.
  void open(uint16_t port, uint16_t to_port, bool client_qp = true, int backlog = 4) {
    lch = rdma_create_event_channel();
    cch = rdma_create_event_channel();
    ASSERT_TRUE(lch && cch);
    if (port) {
      ASSERT_EQ(rdma_create_id(lch, &listener, nullptr, RDMA_PS_TCP), 0);
      sockaddr_in a = device_addr(port);
      ASSERT_EQ(rdma_bind_addr(listener, sa(a)), 0);
      ASSERT_EQ(rdma_listen(listener, backlog), 0);
    }
    ASSERT_EQ(rdma_create_id(cch, &client, nullptr, RDMA_PS_TCP), 0);
    sockaddr_in dst = device_addr(to_port);
    ASSERT_EQ(rdma_resolve_addr(client, nullptr, sa(dst), 2000), 0);
    ASSERT_EQ(status_of(cch, RDMA_CM_EVENT_ADDR_RESOLVED), 0);
    ASSERT_EQ(rdma_resolve_route(client, 2000), 0);
    ASSERT_EQ(status_of(cch, RDMA_CM_EVENT_ROUTE_RESOLVED), 0);
    if (client_qp) {
      ibv_qp_init_attr qa = rc_qp_attr();
      ASSERT_EQ(rdma_create_qp(client, nullptr, &qa), 0);
    }
  }
  // rdma_connect, and the server's side of the request (with a QP) in `server`.
  void request(rdma_conn_param* cp = nullptr) {
    ASSERT_EQ(rdma_connect(client, cp), 0);
    rdma_cm_event* req = expect_event(lch, RDMA_CM_EVENT_CONNECT_REQUEST);
    ASSERT_NE(req, nullptr);
    server = req->id;
    ASSERT_EQ(rdma_ack_cm_event(req), 0);
    ibv_qp_init_attr qa = rc_qp_attr();
    ASSERT_EQ(rdma_create_qp(server, nullptr, &qa), 0);
  }
  // Connected: both ESTABLISHED taken.
  void establish() {
    request();
    if (::testing::Test::HasFatalFailure()) return;
    ASSERT_EQ(rdma_accept(server, nullptr), 0);
    ASSERT_EQ(status_of(cch, RDMA_CM_EVENT_ESTABLISHED), 0);
    ASSERT_EQ(status_of(lch, RDMA_CM_EVENT_ESTABLISHED), 0);
  }
  void close() {
    for (rdma_cm_id* id : {client, server}) {
      if (!id) continue;
      if (id->qp) rdma_destroy_qp(id);
      EXPECT_EQ(rdma_destroy_id(id), 0);
    }
    if (listener) {
      EXPECT_EQ(rdma_destroy_id(listener), 0);
    }
    if (lch) rdma_destroy_event_channel(lch);
    if (cch) rdma_destroy_event_channel(cch);
    *this = {};
  }
};

}  // namespace vrnic::rdmacm::test
