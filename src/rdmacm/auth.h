// The authenticated mode's key agreement (docs/protocol.md "Authenticated mode"): each side's
// X25519 key share at the end of the REQ's and the REP's private data, the session keys
// (libsodium's crypto_kx) given to the connection's QP through vrnic_qp_auth_set.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "rdmacm/state.h"

namespace vrnic::rdmacm {

// A share: 4 bytes "vrA1", then the 32-byte public key; the last bytes of the private data.
inline constexpr size_t kAuthShareSize = 36;

// True if the process's device runs in authenticated mode (VRNIC_AUTH=1).
bool auth_mode(Service& s);

// Active side, rdma_connect: a key pair for the connection, whose share ends the REQ's
// private data (the user's bytes first, then zeros). EINVAL if they leave no room for it.
int auth_offer(Id* id, std::vector<uint8_t>& private_data);

// The peer's share at the end of its private data: false if there is none; else its key in
// `peer_pk` and the share's bytes zeroed (the program sees its peer's bytes only).
bool auth_take_share(std::vector<uint8_t>& private_data, std::array<uint8_t, 32>& peer_pk);

// Passive side, rdma_accept (the REQ's share in id->auth): a key pair, the session keys on
// the QP before it leaves INIT, and the share ending the REP's private data. 0 or an errno.
int auth_accept(Service& s, Id* id, uint32_t qpn, std::vector<uint8_t>& private_data);

// Active side, on the REP (its share in id->auth): the session keys on the QP. 0 or an errno.
int auth_complete(Service& s, Id* id, uint32_t qpn);

}  // namespace vrnic::rdmacm
