// TCP plumbing for the integrity test (loopback only).
#include "channel.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace vrnic_test {

Channel::~Channel() {
  if (fd_ >= 0) close(fd_);
}

int Channel::listen_on(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, 64) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

Channel Channel::accept_from(int listen_fd) {
  int fd = accept(listen_fd, nullptr, nullptr);
  int one = 1;
  if (fd >= 0) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return Channel(fd);
}

Channel Channel::connect_to(const std::string& host, uint16_t port, int attempts) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0) return Channel(-1);
  for (int i = 0; i < attempts; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      freeaddrinfo(res);
      return Channel(fd);
    }
    close(fd);
    usleep(100 * 1000);  // the server may still be starting
  }
  freeaddrinfo(res);
  return Channel(-1);
}

bool Channel::send_bytes(const void* p, size_t n) {
  auto* b = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t k = write(fd_, b, n);
    if (k <= 0) return false;
    b += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool Channel::recv_bytes(void* p, size_t n) {
  auto* b = static_cast<char*>(p);
  while (n > 0) {
    ssize_t k = read(fd_, b, n);
    if (k <= 0) return false;
    b += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool Channel::send_vec(const std::vector<uint64_t>& v) {
  uint64_t n = v.size();
  return send(n) && send_bytes(v.data(), n * sizeof(uint64_t));
}

bool Channel::recv_vec(std::vector<uint64_t>& v) {
  uint64_t n = 0;
  if (!recv(n) || n > (1u << 26)) return false;
  v.resize(n);
  return recv_bytes(v.data(), n * sizeof(uint64_t));
}

}  // namespace vrnic_test
