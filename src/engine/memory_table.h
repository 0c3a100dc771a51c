// Protection domains, memory regions and the key -> region table that checks every access.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/types.h"

namespace vrnic::engine {

class Pd {
 public:
  uint32_t handle = 0;
  uint32_t users = 0;  // QPs and MRs that refer to this PD (dealloc_pd is EBUSY while > 0)
};

class Mr {
 public:
  Pd* pd = nullptr;
  uint8_t* host = nullptr;  // where iova maps to in this process
  uint64_t iova = 0;
  uint64_t length = 0;
  uint32_t access = 0;
  uint32_t key = 0;  // lkey == rkey
};

// Why an access was refused (the caller maps it to a NAK or a completion status).
enum class AccessError : uint8_t {
  kOk, kBadKey, kWrongPd, kNoPermission, kOutOfBounds,
  kNotMapped,  // ODP region: a page of the range is not mapped (or not writable) now
};
const char* to_string(AccessError e);

// key = slot index << 8 | 8-bit generation: a slot is reused only with the next generation,
// so the key of a deregistered MR never matches the MR registered after it.
class MemoryTable {
 public:
  static constexpr uint32_t kGenerationBits = 8;

  MemoryTable() = default;
  ~MemoryTable();  // frees the MRs still registered (the device is going away)
  MemoryTable(const MemoryTable&) = delete;
  MemoryTable& operator=(const MemoryTable&) = delete;

  // Returns the new MR, or null when max_mr regions exist already.
  Mr* add(Pd* pd, void* addr, uint64_t length, uint64_t iova, uint32_t access, uint32_t max_mr);
  // Removes an MR; false if it is not registered here.
  bool remove(Mr* mr);
  Mr* find(uint32_t key) const;
  size_t size() const { return live_; }

  // Bounds (including va + len overflow), access and PD are all checked before the caller
  // moves any byte. `required` is a set of Access bits (0 for a local read). On success
  // returns the host address of va. len 0 is checked for the key and PD only.
  uint8_t* check_local(uint32_t lkey, const Pd* pd, uint64_t va, uint64_t len,
                       uint32_t required, AccessError* err = nullptr) const;
  uint8_t* check_remote(uint32_t rkey, const Pd* pd, uint64_t va, uint64_t len,
                        uint32_t required, AccessError* err = nullptr) const;

 private:
  struct Slot {
    Mr* mr = nullptr;
    uint8_t generation = 0;
  };
  uint8_t* check(uint32_t key, const Pd* pd, uint64_t va, uint64_t len, uint32_t required,
                 AccessError* err) const;

  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
  size_t live_ = 0;
};

}  // namespace vrnic::engine
