// A tiny length-framed TCP channel for the integrity test's out-of-band exchange.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace vrnic_test {

class Channel {
 public:
  explicit Channel(int fd) : fd_(fd) {}
  Channel(Channel&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  ~Channel();
  static int listen_on(uint16_t port);                       // returns a listening fd or -1
  static Channel accept_from(int listen_fd);
  static Channel connect_to(const std::string& host, uint16_t port, int attempts = 100);
  bool ok() const { return fd_ >= 0; }

  bool send_bytes(const void* p, size_t n);
  bool recv_bytes(void* p, size_t n);
  template <typename T> bool send(const T& v) { return send_bytes(&v, sizeof v); }
  template <typename T> bool recv(T& v) { return recv_bytes(&v, sizeof v); }
  bool send_vec(const std::vector<uint64_t>& v);
  bool recv_vec(std::vector<uint64_t>& v);

 private:
  int fd_ = -1;
};

}  // namespace vrnic_test
