// Authenticated mode: X25519 key shares in the CM private data, session keys to the QP.
#include "rdmacm/auth.h"

#include <sodium.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "abi/vrnic_private.h"
#include "cm/types.h"

namespace vrnic::rdmacm {
namespace {

constexpr uint8_t kMagic[4] = {'v', 'r', 'A', '1'};
static_assert(crypto_kx_PUBLICKEYBYTES == 32 && crypto_kx_SESSIONKEYBYTES == 32);

// Pads `pd` with zeros to `area` bytes and writes this side's share at its end.
int put_share(Id* id, std::vector<uint8_t>& pd, size_t area) {
  if (pd.size() > area - kAuthShareSize) return EINVAL;
  if (sodium_init() < 0) return ENOMEM;
  crypto_kx_keypair(id->auth.pk.data(), id->auth.sk.data());
  pd.resize(area, 0);
  std::memcpy(pd.data() + area - kAuthShareSize, kMagic, sizeof kMagic);
  std::memcpy(pd.data() + area - 32, id->auth.pk.data(), 32);
  return 0;
}

int give_keys(Service& s, Id* id, uint32_t qpn, bool client) {
  std::array<uint8_t, 32> rx, tx;
  AuthState& a = id->auth;
  const int bad = client ? crypto_kx_client_session_keys(rx.data(), tx.data(), a.pk.data(),
                                                         a.sk.data(), a.peer_pk.data())
                         : crypto_kx_server_session_keys(rx.data(), tx.data(), a.pk.data(),
                                                         a.sk.data(), a.peer_pk.data());
  sodium_memzero(a.sk.data(), a.sk.size());  // used once
  const int err = bad != 0 ? EPROTO : vrnic_qp_auth_set(s.context(), qpn, tx.data(), rx.data());
  sodium_memzero(rx.data(), rx.size());
  sodium_memzero(tx.data(), tx.size());
  return err;
}

}  // namespace

bool auth_mode(Service& s) {
  static const bool on = vrnic_auth_mode(s.context()) == 1;
  return on;
}

int auth_offer(Id* id, std::vector<uint8_t>& private_data) {
  return put_share(id, private_data, cm::kReqUserPrivate);
}

bool auth_take_share(std::vector<uint8_t>& pd, std::array<uint8_t, 32>& peer_pk) {
  if (pd.size() < kAuthShareSize) return false;
  uint8_t* share = pd.data() + pd.size() - kAuthShareSize;
  if (std::memcmp(share, kMagic, sizeof kMagic) != 0) return false;
  std::memcpy(peer_pk.data(), share + sizeof kMagic, 32);
  std::fill(share, share + kAuthShareSize, 0);
  return true;
}

int auth_accept(Service& s, Id* id, uint32_t qpn, std::vector<uint8_t>& private_data) {
  if (int e = put_share(id, private_data, cm::kRepUserPrivate)) return e;
  return give_keys(s, id, qpn, false);
}

int auth_complete(Service& s, Id* id, uint32_t qpn) { return give_keys(s, id, qpn, true); }

}  // namespace vrnic::rdmacm
