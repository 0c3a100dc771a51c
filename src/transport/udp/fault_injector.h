// FaultInjector: seeded loss / duplication / reordering / corruption of received packets,
// configured by VRNIC_FAULTS="loss=0.05,dup=0.01,reorder=0.01,corrupt=0.001,seed=7".
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/ports.h"

namespace vrnic::transport {

struct FaultConfig {
  double loss = 0, dup = 0, reorder = 0, corrupt = 0;  // probabilities per packet
  uint64_t seed = 1;
  bool any() const { return loss > 0 || dup > 0 || reorder > 0 || corrupt > 0; }
};

// Parses "key=value,..."; false (with a message in err) on an unknown key or a bad value.
bool parse_fault_config(const std::string& text, FaultConfig& out, std::string& err);

class FaultInjector {
 public:
  explicit FaultInjector(const FaultConfig& config) : config_(config), state_(config.seed) {}

  // Applies the faults to a received batch in place. Corruption flips one bit of the packet
  // bytes, which must be writable (they are the receive batch's own buffers).
  void apply(std::vector<engine::WirePacket>& packets);

  struct Stats {
    uint64_t lost = 0, duplicated = 0, reordered = 0, corrupted = 0;
  };
  const Stats& stats() const { return stats_; }
  const FaultConfig& config() const { return config_; }

 private:
  uint64_t next();      // splitmix64
  double uniform();     // [0, 1)
  FaultConfig config_;
  uint64_t state_;
  Stats stats_;
};

}  // namespace vrnic::transport
