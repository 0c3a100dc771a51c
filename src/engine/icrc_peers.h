// Per-sender ICRC policy: peers seen to send IPv4 ID 0 get the full 32-bit check, never the
// weaker check with the unseen ID solved for (see docs/protocol.md, "Received ICRCs").
#pragma once
#include <array>
#include <cstdint>
#include <unordered_map>

#include "engine/ports.h"
#include "wire/icrc.h"

namespace vrnic::engine {

class IcrcPeers {
 public:
  // Consecutive direct matches (ICRC right with ID 0) after which a sender counts as a
  // zero-ID sender (vrnic, Linux unconnected UDP with DF). A NIC that numbers its packets
  // sends ID 0 once in 65536 packets, so it never gets there.
  static constexpr uint32_t kZeroIdAfter = 16;
  // The IDs a zero-ID sender gives the segments of one offload group: 0 .. kGroupIds-1
  // (transport::UdpPort sends at most 64 segments per group).
  static constexpr uint16_t kGroupIds = 64;

  IcrcPeers() = default;
  IcrcPeers(const IcrcPeers&) = delete;  // holds a pointer into its own map
  IcrcPeers& operator=(const IcrcPeers&) = delete;
  wire::IcrcVerdict verify(const WirePacket& pkt);
  void set_checked(bool on) { checked_ = on; }  // false: every packet kOk (DeviceConfig::icrc)
  bool is_zero_id_sender(const wire::IpUdpInfo& ip) const;

 private:
  wire::IcrcVerdict verify_zero_id(const WirePacket& pkt);
  struct Sender {
    uint32_t direct_run = 0;
    bool zero_id = false;
  };
  struct KeyHash {
    size_t operator()(uint32_t k) const { return k * 0x9e3779b1u; }
  };
  static uint32_t key_of(const wire::IpUdpInfo& ip) {
    return static_cast<uint32_t>(ip.src[0]) << 24 | ip.src[1] << 16 | ip.src[2] << 8 | ip.src[3];
  }
  // The sender of `key`, the last one looked up first: a burst's packets, and a ping-pong's,
  // come from one peer (the map's nodes stay where they are, so the pointer stays good).
  Sender& sender(uint32_t key) {
    if (last_ == nullptr || last_key_ != key) {
      last_ = &senders_[key];
      last_key_ = key;
    }
    return *last_;
  }
  std::unordered_map<uint32_t, Sender, KeyHash> senders_;
  Sender* last_ = nullptr;
  uint32_t last_key_ = 0;
  bool checked_ = true;
};

}  // namespace vrnic::engine
