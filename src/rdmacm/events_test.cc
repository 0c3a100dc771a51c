// The RDMA CM's events as the kernel CMA + librdmacm deliver them: which side gets which, their status, what they carry, the QP's state after them.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include <string>

#include "cm/counters.h"
#include "live/counters_file.h"
#include "rdmacm/test_cm.h"

namespace vrnic::rdmacm::test {
namespace {

// CM response timeouts of 2^12 x 4.096 us (16.8 ms; 16 tries ~0.27 s) in this process, so
// that a request nobody answers ends in a test's time. Read once, when the CM starts.
const bool kFastCm = [] { return setenv("VRNIC_CM_RESPONSE_TIMEOUT", "12", 1) == 0; }();

// No listener on the port: REJ reason 8 (invalid service ID) at once: REJECTED, status 8,
// and the client's QP in ERR (librdmacm moves it on REJECTED).
TEST(RdmacmEvents, connect__nobody_listening__rejected_status_8_qp_in_err) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.open(0, 7301));
  ASSERT_EQ(rdma_connect(p.client, nullptr), 0);
  rdma_cm_event* ev = expect_event(p.cch, RDMA_CM_EVENT_REJECTED);
  ASSERT_NE(ev, nullptr);
  EXPECT_EQ(ev->status, 8);
  EXPECT_EQ(ev->param.conn.private_data_len, 148);  // the REJ's whole private data
  EXPECT_EQ(rdma_ack_cm_event(ev), 0);
  EXPECT_EQ(qp_state(p.client->qp), IBV_QPS_ERR);
  EXPECT_EQ(rdma_disconnect(p.client), 0);  // a CM exchange took place: 0, as the kernel
  p.close();
}

// The listener refuses: status 28 (consumer reject) with its private data; rdma_reject_ece:
// 35 (vendor option not supported), as librdmacm sends.
TEST(RdmacmEvents, reject__status_is_the_reason_with_the_private_data) {
  for (const bool ece : {false, true}) {
    Pair p;
    ASSERT_NO_FATAL_FAILURE(p.open(7302, 7302));
    ASSERT_NO_FATAL_FAILURE(p.request());
    const char no[] = "no";
    ASSERT_EQ((ece ? rdma_reject_ece : rdma_reject)(p.server, no, sizeof no), 0);
    rdma_cm_event* ev = expect_event(p.cch, RDMA_CM_EVENT_REJECTED);
    ASSERT_NE(ev, nullptr);
    EXPECT_EQ(ev->status, ece ? 35 : 28);
    EXPECT_STREQ(static_cast<const char*>(ev->param.conn.private_data), "no");
    EXPECT_EQ(rdma_ack_cm_event(ev), 0);
    errno = 0;
    EXPECT_EQ(rdma_reject(p.server, nullptr, 0), -1);  // refused already
    EXPECT_EQ(errno, EINVAL);
    p.close();
  }
}

// Nobody answers at all (no vrnic at 127.1.0.1): the REQ is resent until the retries run
// out, then UNREACHABLE with -ETIMEDOUT.
TEST(RdmacmEvents, connect__nobody_answers__unreachable_etimedout) {
  rdma_event_channel* ch = rdma_create_event_channel();
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in dst = v4("127.1.0.1", 7303);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, sa(dst), 2000), 0);
  ASSERT_EQ(status_of(ch, RDMA_CM_EVENT_ADDR_RESOLVED), 0);
  ASSERT_EQ(rdma_resolve_route(id, 2000), 0);
  ASSERT_EQ(status_of(ch, RDMA_CM_EVENT_ROUTE_RESOLVED), 0);
  ibv_qp_init_attr qa = rc_qp_attr();
  ASSERT_EQ(rdma_create_qp(id, nullptr, &qa), 0);
  ASSERT_EQ(rdma_connect(id, nullptr), 0);
  EXPECT_EQ(status_of(ch, RDMA_CM_EVENT_UNREACHABLE, 10000), -ETIMEDOUT);
  rdma_destroy_qp(id);
  EXPECT_EQ(rdma_destroy_id(id), 0);
  rdma_destroy_event_channel(ch);
}

// Both sides get DISCONNECTED, status 0: the passive one on the DREQ, the one that called
// rdma_disconnect on the DREP. Its QP is in ERR at once; the other's stays RTS until its own
// rdma_disconnect. TIMEWAIT_EXIT follows each DISCONNECTED, and nothing else.
TEST(RdmacmEvents, disconnect__both_sides_disconnected_status_0) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.open(7304, 7304));
  ASSERT_NO_FATAL_FAILURE(p.establish());
  ASSERT_EQ(rdma_disconnect(p.client), 0);
  EXPECT_EQ(qp_state(p.client->qp), IBV_QPS_ERR);
  EXPECT_EQ(status_of(p.lch, RDMA_CM_EVENT_DISCONNECTED), 0);
  EXPECT_EQ(qp_state(p.server->qp), IBV_QPS_RTS);
  ASSERT_EQ(rdma_disconnect(p.server), 0);
  EXPECT_EQ(qp_state(p.server->qp), IBV_QPS_ERR);
  EXPECT_EQ(status_of(p.cch, RDMA_CM_EVENT_DISCONNECTED), 0);
  EXPECT_EQ(status_of(p.cch, RDMA_CM_EVENT_TIMEWAIT_EXIT), 0);
  EXPECT_EQ(status_of(p.lch, RDMA_CM_EVENT_TIMEWAIT_EXIT), 0);
  EXPECT_EQ(rdma_disconnect(p.client), 0);  // again: 0, nothing more
  EXPECT_EQ(next_event(p.cch, 100), nullptr);
  p.close();
}

// The CM's counters (cm/counters.h) follow the device's in this process's counters file, as
// `vrnic stats` reads it: one connection's REQ, REP and RTU counted on the sides that saw them.
TEST(RdmacmEvents, counters__the_cms_follow_the_devices_in_the_counters_file) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.open(7312, 7312));
  ASSERT_NO_FATAL_FAILURE(p.establish());
  const auto files = live::read_all_counters(getpid());
  ASSERT_EQ(files.size(), 1u);
  const auto& c = files[0].counters;
  const size_t device = sizeof(engine::Counters) / 8;
  ASSERT_EQ(c.size(), device + cm::kCounterCount);
  for (size_t i = 0; i < cm::kCounterCount; ++i)
    EXPECT_EQ(c[device + i].first, cm::kCounterNames[i]);
  auto value = [&](const std::string& name) {
    for (const auto& [n, v] : c)
      if (n == name) return v;
    return ~uint64_t{0};
  };
  EXPECT_GE(value("cm_tx_req"), 1u);  // both ends are this process's
  EXPECT_GE(value("cm_rx_req"), 1u);
  EXPECT_GE(value("cm_tx_rep"), 1u);
  EXPECT_GE(value("cm_rx_rep"), 1u);
  EXPECT_GE(value("cm_tx_rtu"), 1u);
  p.close();
}

// The passive side's ESTABLISHED is the kernel's RTU event: no parameters, no private data.
// The active side's carries the REP's.
TEST(RdmacmEvents, established__active_side_has_the_rep_passive_side_nothing) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.open(7305, 7305));
  ASSERT_NO_FATAL_FAILURE(p.request());
  rdma_conn_param cp{};
  const char hi[] = "hi";
  cp.private_data = hi;
  cp.private_data_len = sizeof hi;
  cp.responder_resources = cp.initiator_depth = 1;
  ASSERT_EQ(rdma_accept(p.server, &cp), 0);
  rdma_cm_event* active = expect_event(p.cch, RDMA_CM_EVENT_ESTABLISHED);
  ASSERT_NE(active, nullptr);
  EXPECT_EQ(active->param.conn.private_data_len, 196);
  EXPECT_STREQ(static_cast<const char*>(active->param.conn.private_data), "hi");
  EXPECT_EQ(active->param.conn.qp_num, p.server->qp->qp_num);
  rdma_ack_cm_event(active);
  rdma_cm_event* passive = expect_event(p.lch, RDMA_CM_EVENT_ESTABLISHED);
  ASSERT_NE(passive, nullptr);
  EXPECT_EQ(passive->param.conn.private_data, nullptr);
  EXPECT_EQ(passive->param.conn.private_data_len, 0);
  EXPECT_EQ(passive->param.conn.qp_num, 0u);
  rdma_ack_cm_event(passive);
  p.close();
}

// An id without a QP: CONNECT_RESPONSE, then rdma_establish sends the RTU; the passive side
// gets ESTABLISHED, the active side none (the kernel's accept on the active side makes no
// event).
TEST(RdmacmEvents, establish__no_established_event_on_the_active_side) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.open(7306, 7306, false));
  rdma_conn_param cp{};
  cp.qp_num = 0x42;  // without a QP the parameters are needed
  ASSERT_NO_FATAL_FAILURE(p.request(&cp));
  ASSERT_EQ(rdma_accept(p.server, nullptr), 0);
  EXPECT_EQ(status_of(p.cch, RDMA_CM_EVENT_CONNECT_RESPONSE), 0);
  ASSERT_EQ(rdma_establish(p.client), 0);
  EXPECT_EQ(status_of(p.lch, RDMA_CM_EVENT_ESTABLISHED), 0);
  EXPECT_EQ(next_event(p.cch, 200), nullptr);
  p.close();
}

// rdma_establish before the REP fails (EINVAL) and abandons the set-up, as the kernel's
// accept path does: the passive side's request ends with REJECTED.
TEST(RdmacmEvents, establish__before_the_rep__einval_and_the_request_is_rejected) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.open(7307, 7307, false));
  rdma_conn_param cp{};
  cp.qp_num = 0x42;
  ASSERT_NO_FATAL_FAILURE(p.request(&cp));
  errno = 0;
  EXPECT_EQ(rdma_establish(p.client), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(status_of(p.lch, RDMA_CM_EVENT_REJECTED), 28);
  p.close();
}

// A listener with a backlog of 1: the second request waits unanswered until the first is
// read (ucma's backlog), then arrives with the requester's resend; nobody is rejected.
TEST(RdmacmEvents, listen__backlog_counts_unread_requests) {
  Pair p, q;
  ASSERT_NO_FATAL_FAILURE(p.open(7308, 7308, true, 1));
  ASSERT_NO_FATAL_FAILURE(q.open(0, 7308));
  ASSERT_EQ(rdma_connect(p.client, nullptr), 0);
  ASSERT_EQ(rdma_connect(q.client, nullptr), 0);
  pollfd one{p.lch->fd, POLLIN, 0};
  ASSERT_EQ(poll(&one, 1, 5000), 1);
  usleep(5000);  // both REQs have arrived by now
  rdma_cm_event* first = expect_event(p.lch, RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(next_event(p.lch, 0), nullptr);  // the second was left unanswered
  rdma_cm_event* second = expect_event(p.lch, RDMA_CM_EVENT_CONNECT_REQUEST, 2000);
  ASSERT_NE(second, nullptr);  // the resent REQ, ~17 ms later
  EXPECT_NE(first->id, second->id);
  for (rdma_cm_event* ev : {first, second}) {
    rdma_cm_id* id = ev->id;
    rdma_ack_cm_event(ev);
    EXPECT_EQ(rdma_reject(id, nullptr, 0), 0);
    rdma_destroy_id(id);
  }
  EXPECT_EQ(status_of(p.cch, RDMA_CM_EVENT_REJECTED), 28);
  EXPECT_EQ(status_of(q.cch, RDMA_CM_EVENT_REJECTED), 28);
  q.close();
  p.close();
}

// The device's address as text, for rdma_getaddrinfo.
std::string device_host() {
  char host[INET_ADDRSTRLEN];
  sockaddr_in me = device_addr(0);
  inet_ntop(AF_INET, &me.sin_addr, host, sizeof host);
  return host;
}

// A synchronous RC listener (rdma_create_ep with RAI_PASSIVE) on the device's address and
// `port`, listening with a backlog of 1.
void sync_listener(const char* port, rdma_port_space ps, rdma_cm_id** out) {
  rdma_addrinfo hints{};
  hints.ai_flags = RAI_PASSIVE;
  hints.ai_port_space = ps;
  hints.ai_qp_type = IBV_QPT_RC;
  rdma_addrinfo* res = nullptr;
  ASSERT_EQ(rdma_getaddrinfo(device_host().c_str(), port, &hints, &res), 0);
  ASSERT_EQ(rdma_create_ep(out, res, nullptr, nullptr), 0);
  rdma_freeaddrinfo(res);
  ASSERT_EQ(rdma_listen(*out, 1), 0);
}

// A listener destroyed with a request not yet read takes the request with it, as the kernel's
// ucma does: the requester is rejected (consumer-defined, 28) and the request's id is gone.
TEST(RdmacmEvents, destroy_listener__unread_request__rejected_28) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.open(7312, 7312));
  ASSERT_EQ(rdma_connect(p.client, nullptr), 0);
  pollfd one{p.lch->fd, POLLIN, 0};
  ASSERT_EQ(poll(&one, 1, 5000), 1);  // the request waits, unread
  EXPECT_EQ(rdma_destroy_id(p.listener), 0);
  p.listener = nullptr;
  EXPECT_EQ(status_of(p.cch, RDMA_CM_EVENT_REJECTED), 28);
  p.close();
}

// A request read from a synchronous listener outlives it: migrated to a channel after the
// listener is gone, it is still rejected on its own.
TEST(RdmacmEvents, get_request__listener_destroyed__the_request_stays_the_programs) {
  rdma_cm_id* listener = nullptr;
  ASSERT_NO_FATAL_FAILURE(sync_listener("7313", RDMA_PS_TCP, &listener));
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.open(0, 7313));
  ASSERT_EQ(rdma_connect(p.client, nullptr), 0);
  rdma_cm_id* req = nullptr;
  ASSERT_EQ(rdma_get_request(listener, &req), 0);
  rdma_destroy_ep(listener);
  rdma_event_channel* ch = rdma_create_event_channel();
  ASSERT_NE(ch, nullptr);
  EXPECT_EQ(rdma_migrate_id(req, ch), 0);
  EXPECT_EQ(rdma_reject(req, nullptr, 0), 0);
  EXPECT_EQ(status_of(p.cch, RDMA_CM_EVENT_REJECTED), 28);
  EXPECT_EQ(rdma_destroy_id(req), 0);
  rdma_destroy_event_channel(ch);
  p.close();
}

// A REQ whose transport is not the listener's QP type is refused, as the kernel CMA's
// cma_ib_check_req_qp_type makes the CM reject it (28): an RC listener, a UC requester.
TEST(RdmacmEvents, connect__qp_type_other_than_the_listeners__rejected_28) {
  rdma_cm_id* listener = nullptr;
  ASSERT_NO_FATAL_FAILURE(sync_listener("7311", RDMA_PS_IB, &listener));
  rdma_addrinfo hints{};
  hints.ai_port_space = RDMA_PS_IB;
  hints.ai_qp_type = IBV_QPT_UC;
  rdma_addrinfo* res = nullptr;
  ASSERT_EQ(rdma_getaddrinfo(device_host().c_str(), "7311", &hints, &res), 0);
  rdma_cm_id* client = nullptr;
  ibv_qp_init_attr qa = rc_qp_attr();
  ASSERT_EQ(rdma_create_ep(&client, res, nullptr, &qa), 0);
  rdma_freeaddrinfo(res);
  errno = 0;
  EXPECT_EQ(rdma_connect(client, nullptr), -1);
  EXPECT_EQ(errno, ECONNREFUSED);
  ASSERT_NE(client->event, nullptr);
  EXPECT_EQ(client->event->event, RDMA_CM_EVENT_REJECTED);
  EXPECT_EQ(client->event->status, 28);
  rdma_destroy_ep(client);
  rdma_destroy_ep(listener);
}

// rdma_notify(COMM_EST): EISCONN on a connection established already; EINVAL before any,
// and for events other than COMM_EST and PATH_MIG.
TEST(RdmacmEvents, notify__comm_est_on_an_established_connection_eisconn) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.open(7309, 7309));
  errno = 0;
  EXPECT_EQ(rdma_notify(p.client, IBV_EVENT_COMM_EST), -1);
  EXPECT_EQ(errno, EINVAL);
  ASSERT_NO_FATAL_FAILURE(p.establish());
  EXPECT_EQ(rdma_notify(p.server, IBV_EVENT_COMM_EST), -1);
  EXPECT_EQ(errno, EISCONN);
  EXPECT_EQ(rdma_notify(p.server, IBV_EVENT_SQ_DRAINED), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(rdma_notify(p.server, IBV_EVENT_PATH_MIG), 0);  // cm_migrate: established
  p.close();
}

// Acknowledging an event twice is a double free under librdmacm; vrnic stops the same way.
TEST(RdmacmEventsDeathTest, ack__twice_aborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process: the CM's thread too
  EXPECT_DEATH(
      {
        rdma_event_channel* ch = rdma_create_event_channel();
        rdma_cm_id* id = nullptr;
        rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP);
        sockaddr_in dst = device_addr(7310);
        rdma_resolve_addr(id, nullptr, sa(dst), 2000);
        rdma_cm_event* ev = next_event(ch, 2000);
        rdma_ack_cm_event(ev);
        rdma_ack_cm_event(ev);
      },
      "acknowledged already");
}

// The CM guard starts on the first established connection and the program sees nothing of
// it: no SIGCHLD (a program thread that had one would leave epoll_wait with EINTR, as
// libfabric's fi_eq_sread did) and no child to wait for.
TEST(RdmacmEventsDeathTest, guard_start_sends_the_program_no_signal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process: the guard not started
  EXPECT_EXIT(
      {
        setenv("VRNIC_CM_GUARD", VRNIC_TEST_GUARD, 1);
        static volatile sig_atomic_t chld = 0;
        struct sigaction sa {};
        sa.sa_handler = [](int) { chld = chld + 1; };
        sigaction(SIGCHLD, &sa, nullptr);
        Pair p;
        p.open(7330, 7330);
        p.establish();
        if (::testing::Test::HasFatalFailure()) std::exit(2);
        usleep(200 * 1000);  // time for a signal to come
        const bool no_child = waitpid(-1, nullptr, WNOHANG | __WALL) == -1 && errno == ECHILD;
        p.close();
        std::fprintf(stderr, "SIGCHLD %d, no child %d\n", int(chld), int(no_child));
        std::exit(chld == 0 && no_child ? 7 : 1);
      },
      testing::ExitedWithCode(7), "SIGCHLD 0, no child 1");
}

// A VRNIC_CM_* setting that is not a value it takes: the CM does not start, its calls fail
// with EINVAL and stderr names the setting (as the device refuses its VRNIC_* settings).
TEST(RdmacmEventsDeathTest, bad_setting_refuses_the_cm) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process: settings read once
  EXPECT_EXIT(
      {
        setenv("VRNIC_CM_ACK_TIMEOUT", "fast", 1);
        errno = 0;
        const bool refused = rdma_create_event_channel() == nullptr && errno == EINVAL;
        rdma_cm_id* id = nullptr;
        errno = 0;
        const bool id_refused = rdma_create_id(nullptr, &id, nullptr, RDMA_PS_TCP) == -1 &&
                                errno == EINVAL && id == nullptr;
        std::exit(refused && id_refused ? 7 : 1);
      },
      testing::ExitedWithCode(7),
      "vrnic librdmacm: VRNIC_CM_ACK_TIMEOUT: 'fast' is not a timeout exponent from 0 to 31; "
      "the RDMA CM does not start");
}

}  // namespace
}  // namespace vrnic::rdmacm::test
