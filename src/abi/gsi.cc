// VRNIC_PRIVATE_1: the connection manager's access to QP1 of the device, to the counters it
// adds, to QP failures and to the authenticated mode's keys (vrnic_private.h).
#include <cerrno>
#include <cstring>
#include <mutex>

#include "abi/objects.h"
#include "abi/vrnic_private.h"
#include "live/live_nic.h"

VRNIC_EXPORT int vrnic_gsi_attach(ibv_context* ctx, vrnic_gsi_handler fn, void* user) {
  if (ctx == nullptr) return EINVAL;
  vrnic::live::LiveNic* nic = vrnic::abi::to_context(ctx)->nic;
  if (nic == nullptr) return EINVAL;
  if (fn == nullptr) {
    nic->set_gsi_handler({});
    return 0;
  }
  nic->set_gsi_handler([fn, user](const vrnic::wire::IpUdpInfo& from,
                                  std::span<const uint8_t> mad) {
    return fn(user, from.ipv6, from.src.data(), from.dst.data(), mad.data()) != 0;
  });
  return 0;
}

VRNIC_EXPORT int vrnic_gsi_send(ibv_context* ctx, int ipv6, const uint8_t* dst,
                                const uint8_t* mad) {
  if (ctx == nullptr || dst == nullptr || mad == nullptr) return EINVAL;
  vrnic::live::LiveNic* nic = vrnic::abi::to_context(ctx)->nic;
  if (nic == nullptr) return EINVAL;
  vrnic::wire::IpUdpInfo to;
  to.ipv6 = ipv6 != 0;
  std::memcpy(to.dst.data(), dst, 16);
  nic->send_gsi(to, std::span<const uint8_t, 256>(mad, 256));
  return 0;
}

VRNIC_EXPORT int vrnic_counters_add(ibv_context* ctx, const char* const* names, size_t n) {
  if (ctx == nullptr || names == nullptr) return -EINVAL;
  vrnic::live::LiveNic* nic = vrnic::abi::to_context(ctx)->nic;
  if (nic == nullptr) return -EINVAL;
  const int first = nic->add_counters({names, n});
  return first < 0 ? -ENOSPC : first;
}

VRNIC_EXPORT int vrnic_counters_set(ibv_context* ctx, int first, const uint64_t* values,
                                    size_t n) {
  if (ctx == nullptr || values == nullptr || first < 0) return EINVAL;
  vrnic::live::LiveNic* nic = vrnic::abi::to_context(ctx)->nic;
  if (nic == nullptr) return EINVAL;
  nic->set_counters(static_cast<size_t>(first), {values, n});
  return 0;
}

VRNIC_EXPORT int vrnic_auth_mode(ibv_context* ctx) {
  vrnic::live::LiveNic* nic = ctx ? vrnic::abi::to_context(ctx)->nic : nullptr;
  return nic == nullptr ? -1 : nic->auth_mode() ? 1 : 0;
}

VRNIC_EXPORT int vrnic_qp_auth_set(ibv_context* ctx, uint32_t qp_num, const uint8_t* tx,
                                   const uint8_t* rx) {
  vrnic::live::LiveNic* nic = ctx ? vrnic::abi::to_context(ctx)->nic : nullptr;
  if (nic == nullptr || tx == nullptr || rx == nullptr) return EINVAL;
  vrnic::engine::AuthKeys keys;
  std::memcpy(keys.tx.data(), tx, keys.tx.size());
  std::memcpy(keys.rx.data(), rx, keys.rx.size());
  return nic->locked([&](vrnic::engine::Device& d) { return d.set_qp_auth(qp_num, keys); });
}

namespace vrnic::abi {
namespace {
std::mutex g_fatal_mu;
vrnic_qp_fatal_handler g_fatal_fn = nullptr;
void* g_fatal_user = nullptr;
}  // namespace

void notify_qp_fatal(uint32_t qp_num) {
  std::lock_guard g(g_fatal_mu);
  if (g_fatal_fn) g_fatal_fn(g_fatal_user, qp_num);
}
}  // namespace vrnic::abi

VRNIC_EXPORT int vrnic_qp_fatal_attach(vrnic_qp_fatal_handler fn, void* user) {
  std::lock_guard g(vrnic::abi::g_fatal_mu);
  vrnic::abi::g_fatal_fn = fn;
  vrnic::abi::g_fatal_user = fn ? user : nullptr;
  return 0;
}
