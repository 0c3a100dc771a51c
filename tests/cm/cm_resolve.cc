// vrnic_cm_resolve: what rdma_resolve_addr makes of each address given, one line each:
//
//   resolve <addr>: ADDR_RESOLVED | ADDR_ERROR status <n> | errno <NAME>
//
// (an IPv4 or IPv6 literal; a fresh id each). Built against the system's <rdma/rdma_cma.h>;
// run under `vrnic run`. tests/veth/cm_veth.py compares the lines with the kernel CMA's rules.
#include <arpa/inet.h>
#include <poll.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace {

const char* errno_name(int e) {
  switch (e) {
    case EINVAL: return "EINVAL";
    case ENETUNREACH: return "ENETUNREACH";
    case EHOSTUNREACH: return "EHOSTUNREACH";
    case ENODEV: return "ENODEV";
    case EADDRNOTAVAIL: return "EADDRNOTAVAIL";
    default: return strerror(e);
  }
}

bool parse(const char* text, sockaddr_storage& out) {
  std::memset(&out, 0, sizeof out);
  auto* in = reinterpret_cast<sockaddr_in*>(&out);
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&out);
  if (inet_pton(AF_INET, text, &in->sin_addr) == 1) {
    in->sin_family = AF_INET;
    in->sin_port = htons(7471);
    return true;
  }
  if (inet_pton(AF_INET6, text, &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(7471);
    return true;
  }
  return false;
}

void resolve(const char* text) {
  sockaddr_storage dst;
  if (!parse(text, dst)) {
    std::printf("resolve %s: not an address\n", text);
    return;
  }
  rdma_event_channel* ch = rdma_create_event_channel();
  rdma_cm_id* id = nullptr;
  if (!ch || rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP) != 0) {
    std::printf("resolve %s: no id (%s)\n", text, strerror(errno));
    return;
  }
  if (rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000) != 0) {
    std::printf("resolve %s: errno %s\n", text, errno_name(errno));
  } else {
    pollfd p{ch->fd, POLLIN, 0};
    rdma_cm_event* ev = nullptr;
    if (poll(&p, 1, 5000) != 1 || rdma_get_cm_event(ch, &ev) != 0) {
      std::printf("resolve %s: no event\n", text);
    } else if (ev->event == RDMA_CM_EVENT_ADDR_RESOLVED) {
      std::printf("resolve %s: ADDR_RESOLVED\n", text);
    } else {
      std::printf("resolve %s: %s status %d\n", text,
                  ev->event == RDMA_CM_EVENT_ADDR_ERROR ? "ADDR_ERROR" : rdma_event_str(ev->event),
                  ev->status);
    }
    if (ev) rdma_ack_cm_event(ev);
  }
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  for (int i = 1; i < argc; ++i) resolve(argv[i]);
  return argc > 1 ? 0 : 2;
}
