// The authenticated mode's trailer: a ChaCha20-Poly1305 tag (libsodium) over the packet.
#include "wire/auth_trailer.h"

#include <sodium.h>

namespace vrnic::wire {
namespace {

static_assert(crypto_aead_chacha20poly1305_ietf_ABYTES == 16 &&
              crypto_aead_chacha20poly1305_ietf_KEYBYTES == 32 &&
              crypto_aead_chacha20poly1305_ietf_NPUBBYTES == 12);

std::array<uint8_t, 12> nonce_of(const uint8_t* seq_be) {
  std::array<uint8_t, 12> n{};
  for (int i = 0; i < 8; ++i) n[4 + i] = seq_be[i];
  return n;
}

}  // namespace

void auth_seal(const AuthKey& key, uint64_t seq, std::span<const uint8_t> body, uint8_t* trailer) {
  for (int i = 0; i < 8; ++i) trailer[i] = static_cast<uint8_t>(seq >> (56 - 8 * i));
  const auto nonce = nonce_of(trailer);
  unsigned long long tag_len = 0;
  uint8_t none = 0;  // the message is empty; libsodium wants its pointers all the same
  crypto_aead_chacha20poly1305_ietf_encrypt_detached(&none, trailer + 8, &tag_len, &none, 0,
                                                     body.data(), body.size(), nullptr,
                                                     nonce.data(), key.data());
}

bool auth_open(const AuthKey& key, std::span<const uint8_t> body, const uint8_t* trailer,
               uint64_t& seq) {
  const auto nonce = nonce_of(trailer);
  uint8_t none = 0;
  if (crypto_aead_chacha20poly1305_ietf_decrypt_detached(&none, nullptr, &none, 0,
                                                         trailer + 8, body.data(), body.size(),
                                                         nonce.data(), key.data()) != 0)
    return false;
  seq = 0;
  for (int i = 0; i < 8; ++i) seq = seq << 8 | trailer[i];
  return true;
}

}  // namespace vrnic::wire
