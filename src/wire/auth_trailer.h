// vrnic's authenticated mode on the wire (docs/protocol.md "Authenticated mode"): the trailer
// a packet of an authenticated connection carries between its pad and its ICRC.
//
//   [0, 8)   sequence number, big-endian: the sender's count of packets it sent on the QP
//   [8, 24)  tag: ChaCha20-Poly1305 (IETF, libsodium) under the direction's key, nonce
//            4 zero bytes + the sequence number, no message, the packet from the BTH to
//            the end of the pad as additional data
//
// Not RoCEv2: only two vrnic devices that agreed keys when they connected send it.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace vrnic::wire {

inline constexpr size_t kAuthTrailerSize = 24;
using AuthKey = std::array<uint8_t, 32>;

// Writes the trailer of `body` (BTH .. pad) sent as number `seq` into trailer[0, 24).
void auth_seal(const AuthKey& key, uint64_t seq, std::span<const uint8_t> body, uint8_t* trailer);

// Checks the trailer of `body`; true and its sequence number in `seq` if the tag is right.
bool auth_open(const AuthKey& key, std::span<const uint8_t> body, const uint8_t* trailer,
               uint64_t& seq);

}  // namespace vrnic::wire
