// Plain-verbs helpers for the integrity test: device, PD, MRs, one RC QP and its connection.
#pragma once
#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

namespace vrnic_test {

[[noreturn]] void die(const std::string& what);
#define CHECK_OR_DIE(cond, what) \
  do {                           \
    if (!(cond)) ::vrnic_test::die(what); \
  } while (0)

// What one side tells the other to connect an RC QP.
struct QpInfo {
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint8_t gid[16] = {};
};

// One opened device and PD shared by all endpoints of a process.
struct Device {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_port_attr port{};
  ibv_gid gid{};
  static Device open();
  ibv_mr* reg(void* p, size_t n, int access) const;
};

// One RC QP with its own CQ.
class RcEndpoint {
 public:
  RcEndpoint(const Device& dev, uint32_t max_inline = 64);
  ~RcEndpoint();
  QpInfo local_info() const;
  void connect(const QpInfo& remote);  // RESET -> INIT -> RTR -> RTS
  // Moves the QP (in any state, ERR after a failure) to RESET and draws a new send PSN;
  // local_info() and connect() then bring it up again.
  void reset();
  ibv_qp* qp() const { return qp_; }
  ibv_cq* cq() const { return cq_; }
  uint32_t max_inline() const { return max_inline_; }
  // Polls until one completion arrives (or dies after timeout_s).
  ibv_wc wait_one(int timeout_s = 60);

 private:
  const Device& dev_;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  uint32_t psn_ = 0;
  uint32_t max_inline_ = 0;
};

}  // namespace vrnic_test
