// The librdmacm errno audit: each misuse of a call and the errno vrnic returns, which is the one rdma-core v44's librdmacm (cma.c) over the kernel CMA (cma.c, ucma.c) returns. docs/abi.md has the same table.
#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <functional>
#include <vector>

#include "rdmacm/test_cm.h"

namespace vrnic::rdmacm::test {
namespace {

// -1 with errno, as each call fails; 0 if it succeeded.
int err_of(int rc) { return rc == 0 ? 0 : errno; }

// A fresh id on a channel of its own, gone at the end of the row.
struct Id {
  rdma_event_channel* ch = rdma_create_event_channel();
  rdma_cm_id* id = nullptr;
  explicit Id(rdma_port_space ps = RDMA_PS_TCP) { rdma_create_id(ch, &id, nullptr, ps); }
  ~Id() {
    if (id && id->qp) rdma_destroy_qp(id);
    if (id) rdma_destroy_id(id);
    rdma_destroy_event_channel(ch);
  }
  int bind(uint16_t port) {
    sockaddr_in a = device_addr(port);
    return err_of(rdma_bind_addr(id, sa(a)));
  }
  // Resolved to the device's own address (and route), its ADDR/ROUTE events taken.
  void resolve(bool route = true) {
    sockaddr_in dst = device_addr(7399);
    ASSERT_EQ(rdma_resolve_addr(id, nullptr, sa(dst), 2000), 0);
    ASSERT_EQ(status_of(ch, RDMA_CM_EVENT_ADDR_RESOLVED), 0);
    if (!route) return;
    ASSERT_EQ(rdma_resolve_route(id, 2000), 0);
    ASSERT_EQ(status_of(ch, RDMA_CM_EVENT_ROUTE_RESOLVED), 0);
  }
  int set_int(int opt, int v) { return err_of(rdma_set_option(id, RDMA_OPTION_ID, opt, &v, sizeof v)); }
};

bool may_bind_privileged() {
  __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = {};
  if (syscall(SYS_capget, &h, d) != 0) return false;
  return (d[CAP_NET_BIND_SERVICE / 32].effective >> (CAP_NET_BIND_SERVICE % 32)) & 1;
}

struct Misuse {
  const char* call;
  const char* misuse;
  int expected;
  const char* source;  // where rdma-core's errno comes from
  std::function<int()> make;  // returns the errno observed (0: it succeeded)
};

std::vector<Misuse> id_rows() {
  return {
      {"rdma_create_id", "unknown port space", EINVAL, "ucma_get_qp_type",
       [] {
         rdma_event_channel* ch = rdma_create_event_channel();
         rdma_cm_id* id = nullptr;
         const int e = err_of(rdma_create_id(ch, &id, nullptr, rdma_port_space(0x99)));
         rdma_destroy_event_channel(ch);
         return e;
       }},
      {"rdma_bind_addr", "NULL address", EINVAL, "librdmacm ucma_addrlen",
       [] { Id i; return err_of(rdma_bind_addr(i.id, nullptr)); }},
      {"rdma_bind_addr", "AF_UNIX address", EINVAL, "librdmacm ucma_addrlen",
       [] {
         Id i;
         sockaddr un{};
         un.sa_family = AF_UNIX;
         return err_of(rdma_bind_addr(i.id, &un));
       }},
      {"rdma_bind_addr", "twice", EINVAL, "cma rdma_bind_addr: state not IDLE",
       [] { Id i; i.bind(7320); return i.bind(7321); }},
      {"rdma_bind_addr", "an address no RDMA device has", ENODEV,
       "cma_acquire_dev_by_src_ip",
       [] {
         Id i;
         sockaddr_in a = v4("192.0.2.77", 7322);
         return err_of(rdma_bind_addr(i.id, sa(a)));
       }},
      {"rdma_bind_addr", "the address and port another id holds", EADDRINUSE,
       "cma_check_port",
       [] { Id a, b; a.bind(7323); return b.bind(7323); }},
      {"rdma_bind_addr", "a port a wildcard id holds", EADDRNOTAVAIL, "cma_check_port",
       [] {
         Id a, b;
         sockaddr_in any = v4("0.0.0.0", 7324);
         rdma_bind_addr(a.id, sa(any));
         return b.bind(7324);
       }},
      {"rdma_bind_addr", "a held port, both REUSEADDR, neither listening", 0, "cma_check_port",
       [] {
         Id a, b;
         a.set_int(RDMA_OPTION_ID_REUSEADDR, 1);
         b.set_int(RDMA_OPTION_ID_REUSEADDR, 1);
         a.bind(7325);
         return b.bind(7325);
       }},
      {"rdma_bind_addr", "a port below 1024", may_bind_privileged() ? 0 : EACCES,
       "cma_use_port: CAP_NET_BIND_SERVICE",
       [] { Id i; return i.bind(1000); }},
      {"rdma_listen", "twice", EINVAL, "cma rdma_listen: state not ADDR_BOUND",
       [] {
         Id i;
         i.bind(7326);
         rdma_listen(i.id, 1);
         return err_of(rdma_listen(i.id, 1));
       }},
      {"rdma_listen", "REUSEADDR, another id bound to the port", EADDRINUSE, "cma_bind_listen",
       [] {
         Id a, b;
         a.set_int(RDMA_OPTION_ID_REUSEADDR, 1);
         b.set_int(RDMA_OPTION_ID_REUSEADDR, 1);
         a.bind(7327);
         b.bind(7327);
         return err_of(rdma_listen(a.id, 1));
       }},
      {"rdma_listen", "an id resolved to a destination", EINVAL, "cma rdma_listen",
       [] { Id i; i.resolve(false); return err_of(rdma_listen(i.id, 1)); }},
  };
}

std::vector<Misuse> resolve_rows() {
  return {
      {"rdma_resolve_addr", "NULL destination", EINVAL, "librdmacm ucma_addrlen",
       [] { Id i; return err_of(rdma_resolve_addr(i.id, nullptr, nullptr, 100)); }},
      {"rdma_resolve_addr", "twice", EINVAL, "cma rdma_resolve_addr: state",
       [] {
         Id i;
         i.resolve(false);
         sockaddr_in dst = device_addr(7399);
         return err_of(rdma_resolve_addr(i.id, nullptr, sa(dst), 100));
       }},
      {"rdma_resolve_addr", "source and destination of two families", EINVAL,
       "cma rdma_resolve_addr: cma_family != dst family",
       [] {
         Id i;
         sockaddr_in src = device_addr(0);
         sockaddr_in6 dst{};
         dst.sin6_family = AF_INET6;
         dst.sin6_addr.s6_addr[15] = 1;
         return err_of(rdma_resolve_addr(i.id, sa(src), reinterpret_cast<sockaddr*>(&dst), 100));
       }},
      // The device is on loopback here: the kernel's route from a loopback address to
      // another host is refused (EINVAL), and rdma_resolve_ip returns that at once.
      {"rdma_resolve_addr", "a host the device's address cannot route to", EINVAL,
       "rdma_resolve_ip: the route lookup's error",
       [] {
         Id i;
         sockaddr_in dst = v4("198.51.100.1", 7328);
         return err_of(rdma_resolve_addr(i.id, nullptr, sa(dst), 100));
       }},
      {"rdma_resolve_route", "before rdma_resolve_addr", EINVAL, "cma rdma_resolve_route",
       [] { Id i; return err_of(rdma_resolve_route(i.id, 100)); }},
      {"rdma_resolve_route", "twice", EINVAL, "cma rdma_resolve_route",
       [] { Id i; i.resolve(); return err_of(rdma_resolve_route(i.id, 100)); }},
  };
}

std::vector<Misuse> connect_rows() {
  return {
      {"rdma_connect", "before the route", EINVAL, "cma rdma_connect: state",
       [] {
         Id i;
         i.resolve(false);
         rdma_conn_param cp{};
         return err_of(rdma_connect(i.id, &cp));
       }},
      {"rdma_connect", "no QP and no parameters", EINVAL, "librdmacm ucma_valid_param",
       [] { Id i; i.resolve(); return err_of(rdma_connect(i.id, nullptr)); }},
      {"rdma_connect", "responder resources above the device's", EINVAL,
       "librdmacm ucma_valid_param",
       [] {
         Id i;
         i.resolve();
         rdma_conn_param cp{};
         cp.responder_resources = 200;
         return err_of(rdma_connect(i.id, &cp));
       }},
      {"rdma_connect", "57 bytes of private data", EINVAL, "ib_send_cm_req: > 92 - 36",
       [] {
         Id i;
         i.resolve();
         char pd[57] = {};
         rdma_conn_param cp{};
         cp.private_data = pd;
         cp.private_data_len = sizeof pd;
         return err_of(rdma_connect(i.id, &cp));
       }},
      {"rdma_accept", "an id that is no request", EINVAL, "cma __rdma_accept: state",
       [] {
         Id i;
         i.resolve();
         rdma_conn_param cp{};
         return err_of(rdma_accept(i.id, &cp));
       }},
      {"rdma_reject", "an id without a connection", EINVAL, "cma rdma_reject: no cm_id",
       [] { Id i; i.resolve(); return err_of(rdma_reject(i.id, nullptr, 0)); }},
      {"rdma_establish", "an id with a QP", EINVAL, "librdmacm rdma_establish",
       [] {
         Id i;
         i.resolve();
         ibv_qp_init_attr qa = rc_qp_attr();
         rdma_create_qp(i.id, nullptr, &qa);
         return err_of(rdma_establish(i.id));
       }},
      {"rdma_disconnect", "an id never bound to a device", EINVAL, "librdmacm ucma_shutdown",
       [] { Id i; return err_of(rdma_disconnect(i.id)); }},
      {"rdma_disconnect", "resolved, never connected", EINVAL, "cma rdma_disconnect: no cm_id",
       [] { Id i; i.resolve(); return err_of(rdma_disconnect(i.id)); }},
      {"rdma_notify", "no connection", EINVAL, "cma rdma_notify: no cm_id",
       [] { Id i; i.resolve(); return err_of(rdma_notify(i.id, IBV_EVENT_COMM_EST)); }},
      {"rdma_create_qp", "twice", EINVAL, "librdmacm rdma_create_qp_ex: id->qp",
       [] {
         Id i;
         i.resolve();
         ibv_qp_init_attr qa = rc_qp_attr();
         rdma_create_qp(i.id, nullptr, &qa);
         qa = rc_qp_attr();
         return err_of(rdma_create_qp(i.id, nullptr, &qa));
       }},
      {"rdma_destroy_id", "an id with a QP", 0, "librdmacm: the QP is the program's",
       [] {
         Id i;
         i.resolve();
         ibv_qp_init_attr qa = rc_qp_attr();
         rdma_create_qp(i.id, nullptr, &qa);
         ibv_qp* qp = i.id->qp;
         const int e = err_of(rdma_destroy_id(i.id));
         i.id = nullptr;
         ibv_destroy_qp(qp);
         return e;
       }},
  };
}

std::vector<Misuse> option_rows() {
  return {
      {"rdma_set_option", "TOS of 4 bytes", EINVAL, "ucma_set_option_id: optlen",
       [] {
         Id i;
         int tos = 0;
         return err_of(rdma_set_option(i.id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, 4));
       }},
      {"rdma_set_option", "unknown option", ENOSYS, "ucma_set_option_id: default",
       [] { Id i; return i.set_int(99, 1); }},
      {"rdma_set_option", "unknown level", ENOSYS, "ucma_set_option_level: default",
       [] {
         Id i;
         int v = 1;
         return err_of(rdma_set_option(i.id, 42, 0, &v, sizeof v));
       }},
      {"rdma_set_option", "NULL value of 4 bytes", EFAULT, "ucma_set_option: memdup_user",
       [] { Id i; return err_of(rdma_set_option(i.id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, nullptr, 4)); }},
      {"rdma_set_option", "ACK_TIMEOUT on a UD id", EINVAL, "rdma_set_ack_timeout: RC only",
       [] {
         Id i(RDMA_PS_UDP);
         uint8_t t = 14;
         return err_of(rdma_set_option(i.id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &t, 1));
       }},
      {"rdma_set_option", "AFONLY on a listening id", EINVAL, "rdma_set_afonly: state",
       [] {
         Id i;
         i.bind(7329);
         rdma_listen(i.id, 1);
         return i.set_int(RDMA_OPTION_ID_AFONLY, 1);
       }},
      {"rdma_set_option", "REUSEADDR cleared after bind", EINVAL, "rdma_set_reuseaddr",
       [] { Id i; i.bind(7330); return i.set_int(RDMA_OPTION_ID_REUSEADDR, 0); }},
      {"rdma_migrate_id", "a synchronous id to no channel", EINVAL, "librdmacm rdma_migrate_id",
       [] {
         rdma_cm_id* id = nullptr;
         rdma_create_id(nullptr, &id, nullptr, RDMA_PS_TCP);
         const int e = err_of(rdma_migrate_id(id, nullptr));
         rdma_destroy_id(id);
         return e;
       }},
      {"rdma_get_request", "an asynchronous listener", EINVAL, "librdmacm rdma_get_request",
       [] {
         Id i;
         i.bind(7331);
         rdma_listen(i.id, 1);
         rdma_cm_id* req = nullptr;
         return err_of(rdma_get_request(i.id, &req));
       }},
      {"rdma_set_local_ece", "vendor ID 0", EINVAL, "librdmacm rdma_set_local_ece",
       [] {
         Id i;
         ibv_ece ece{};
         return err_of(rdma_set_local_ece(i.id, &ece));
       }},
      {"rdma_get_remote_ece", "before any connection", 0, "librdmacm: its own record",
       [] {
         Id i;
         ibv_ece ece{.vendor_id = 7, .options = 1, .comp_mask = 0};
         const int e = err_of(rdma_get_remote_ece(i.id, &ece));
         return e == 0 && ece.vendor_id != 0 ? -1 : e;
       }},
  };
}

std::vector<Misuse> multicast_rows() {
  return {
      {"rdma_join_multicast", "an RC id", EINVAL, "cma rdma_join_multicast: UD only",
       [] {
         Id i;
         i.resolve(false);
         sockaddr_in g = v4("239.1.2.3", 0);
         return err_of(rdma_join_multicast(i.id, sa(g), nullptr));
       }},
      {"rdma_join_multicast", "an id on no device yet", EINVAL, "cma: !id->device",
       [] {
         Id i(RDMA_PS_UDP);
         sockaddr_in g = v4("239.1.2.3", 0);
         return err_of(rdma_join_multicast(i.id, sa(g), nullptr));
       }},
      {"rdma_join_multicast", "the wildcard group", EINVAL, "cma_iboe_join_multicast",
       [] {
         Id i(RDMA_PS_UDP);
         i.bind(7332);
         sockaddr_in g = v4("0.0.0.0", 0);
         return err_of(rdma_join_multicast(i.id, sa(g), nullptr));
       }},
      {"rdma_join_multicast_ex", "no join flags", EINVAL, "librdmacm rdma_join_multicast_ex",
       [] {
         Id i(RDMA_PS_UDP);
         i.bind(7333);
         sockaddr_in g = v4("239.1.2.3", 0);
         rdma_cm_join_mc_attr_ex a{};
         a.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS;
         a.addr = sa(g);
         return err_of(rdma_join_multicast_ex(i.id, &a, nullptr));
       }},
      {"rdma_join_multicast_ex", "an unknown comp_mask bit", ENOTSUP,
       "librdmacm rdma_join_multicast_ex",
       [] {
         Id i(RDMA_PS_UDP);
         rdma_cm_join_mc_attr_ex a{};
         a.comp_mask = RDMA_CM_JOIN_MC_ATTR_RESERVED;
         return err_of(rdma_join_multicast_ex(i.id, &a, nullptr));
       }},
      {"rdma_leave_multicast", "a group not joined", EADDRNOTAVAIL,
       "librdmacm rdma_leave_multicast",
       [] {
         Id i(RDMA_PS_UDP);
         i.bind(7334);
         sockaddr_in g = v4("239.1.2.3", 0);
         return err_of(rdma_leave_multicast(i.id, sa(g)));
       }},
  };
}

TEST(RdmacmErrno, table__each_misuse_gets_rdma_cores_errno) {
  std::vector<Misuse> rows;
  for (auto part : {id_rows, resolve_rows, connect_rows, option_rows, multicast_rows}) {
    for (Misuse& m : part()) rows.push_back(std::move(m));
  }
  for (const Misuse& m : rows) {
    errno = 0;
    const int got = m.make();
    EXPECT_EQ(got, m.expected) << m.call << ", " << m.misuse << " (rdma-core: " << m.source
                               << "): got " << strerror(got) << ", want "
                               << strerror(m.expected);
  }
}

}  // namespace
}  // namespace vrnic::rdmacm::test
