// Responder resources for RDMA READ, atomics and ATOMIC WRITE (the ACK queue): saved requests
// and atomic results, looked up by PSN so duplicates are replayed and atomics never run twice.
#pragma once
#include <cstdint>
#include <vector>

namespace vrnic::engine {

struct AckEntry {
  enum class Kind : uint8_t { kRead, kAtomic, kAtomicWrite };
  Kind kind = Kind::kRead;
  uint32_t psn = 0;   // first PSN of the request
  uint32_t span = 1;  // PSNs the request occupies: response packets of a READ, 1 for atomics
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t length = 0;        // READ length
  uint64_t orig = 0;          // atomic: the original value returned (and replayed)
  bool atomic_executed = false;
};

// A ring of entries in PSN order, split into groups of up to 64 consecutive entries. The
// queue context records the first PSN of every group; a lookup selects the one group whose
// PSN range holds the PSN (first level) and searches only inside it (second level), never
// the whole ring (seed document 000, "AQ/AQC").
//
// Entries are numbered by a running sequence number n: slot n % capacity, group n / G.
// The oldest group may have lost its first entries to eviction; its start is then the
// oldest live entry. Capacity is rounded up to a multiple of the group size G.
class AckQueue {
 public:
  static constexpr uint32_t kGroupSize = 64;

  explicit AckQueue(uint32_t capacity = 1);
  void reset(uint32_t capacity);  // empties the queue with a new capacity

  uint32_t capacity() const { return static_cast<uint32_t>(slots_.size()); }
  uint32_t group_size() const { return group_size_; }
  uint32_t size() const { return count_; }
  bool full() const { return count_ == slots_.size(); }

  // Appends (PSNs must increase); when full the oldest entry is evicted first.
  AckEntry& push(const AckEntry& e);
  // The entry whose [psn, psn + span) holds psn, or null. Counts the entries it compared
  // in *probes (for tests and the benchmark).
  AckEntry* find(uint32_t psn, uint32_t* probes = nullptr);
  // Linear scan of every live entry; the reference the grouped lookup is measured against.
  AckEntry* find_linear(uint32_t psn, uint32_t* probes = nullptr);
  void clear();

 private:
  AckEntry& at_seq(uint64_t n) { return slots_[n % slots_.size()]; }
  uint32_t group_start_psn(uint64_t group) const;

  std::vector<AckEntry> slots_;
  std::vector<uint32_t> group_psn_;  // first PSN of each group (the AQC)
  uint32_t group_size_ = 1;
  uint64_t next_seq_ = 0;  // sequence number of the next push
  uint32_t count_ = 0;
};

}  // namespace vrnic::engine
