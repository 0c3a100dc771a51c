// VRNIC_PRIVATE_1: the connection manager's access to QP1 of the device (vrnic_private.h).
#include <cerrno>
#include <cstring>

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
