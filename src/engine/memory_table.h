// Protection domains, memory regions and the key -> region table that checks every access.
#pragma once
#include <cstddef>
#include <cstdint>
#include <unordered_set>
#include <vector>

#include "engine/names.h"
#include "engine/types.h"

namespace vrnic::engine {

class HostMemory;

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
  uint32_t windows = 0;  // memory windows bound to it (dereg_mr is refused while > 0)
};

// A memory window (IBA 10.6.7): an rkey for a sub-range of an MR, bound and invalidated
// through a QP's send queue (type 2) or the Bind MW verb (type 1). Its rkey shares the MR key
// space: its name << 8 | an 8-bit key the consumer picks at each bind.
class Mw {
 public:
  Pd* pd = nullptr;
  uint8_t type = 1;
  uint32_t rkey = 0;
  bool bound = false;
  Mr* mr = nullptr;  // while bound
  uint64_t addr = 0, length = 0;  // in the MR's iova space
  uint32_t access = 0;            // remote read / write / atomic, kZeroBased
  uint32_t qpn = 0;               // type 2: the QP it was bound through (type 2B, IBA 10.6.7.2)
};

// Why an access was refused (the caller maps it to a NAK or a completion status).
enum class AccessError : uint8_t {
  kOk, kBadKey, kWrongPd, kNoPermission, kOutOfBounds,
  kNotMapped,  // ODP region: a page of the range is not mapped (or not writable) now
};
const char* to_string(AccessError e);

// key = 24-bit name << 8 | 8-bit generation. The name is drawn from the device's CSPRNG
// (names.h) each time a slot is taken, unique among the live ones and never one freed lately,
// so no key tells anything of another (ReDMArk's guessed keys); the generation counts the
// slot's uses, as mlx5's key byte. Names map to slots in a hash table: one lookup per access.
class MemoryTable {
 public:
  static constexpr uint32_t kGenerationBits = 8;

  // `host` answers whether the pages of an on-demand region are present (ports.h); `names`
  // gives the keys' names.
  MemoryTable(HostMemory& host, NameSource& names) : host_(host), names_(names) {}
  ~MemoryTable();  // frees the MRs still registered (the device is going away)
  MemoryTable(const MemoryTable&) = delete;
  MemoryTable& operator=(const MemoryTable&) = delete;

  // Returns the new MR, or null when max_mr regions exist already.
  Mr* add(Pd* pd, void* addr, uint64_t length, uint64_t iova, uint32_t access, uint32_t max_mr);
  // Removes an MR; false if it is not registered here.
  bool remove(Mr* mr);
  Mr* find(uint32_t key) const;
  // Memory windows live in the same slots; the key is name << 8 | generation at first.
  Mw* add_mw(Pd* pd, uint8_t type, uint32_t max);
  bool remove_mw(Mw* mw);
  Mw* find_mw(uint32_t rkey) const;  // by the window's current rkey
  bool has_mw(const Mw* mw) const;   // still allocated here (safe for a freed pointer)
  bool has_mr(const Mr* mr) const;   // still registered here (safe for a freed pointer)
  size_t size() const { return live_; }
  HostMemory& host() const { return host_; }

  // Bounds (including va + len overflow), access and PD are all checked before the caller
  // moves any byte. `required` is a set of Access bits (0 for a local read). On success
  // returns the host address of va. len 0 is checked for the key and PD only.
  uint8_t* check_local(uint32_t lkey, const Pd* pd, uint64_t va, uint64_t len,
                       uint32_t required, AccessError* err = nullptr) const;
  uint8_t* check_remote(uint32_t rkey, const Pd* pd, uint64_t va, uint64_t len,
                        uint32_t required, AccessError* err = nullptr) const;
  // As above, the rkey may also name a memory window; qpn is the QP the request came in on
  // (a type 2 window answers only there).
  uint8_t* check_remote(uint32_t rkey, const Pd* pd, uint32_t qpn, uint64_t va, uint64_t len,
                        uint32_t required, AccessError* err = nullptr) const;

 private:
  struct Slot {
    Mr* mr = nullptr;
    Mw* mw = nullptr;
    uint32_t name = 0;  // while taken
    uint8_t generation = 0;
  };
  uint8_t* check(uint32_t key, const Pd* pd, uint64_t va, uint64_t len, uint32_t required,
                 AccessError* err) const;
  uint8_t* check_window(const Mw& mw, uint32_t rkey, const Pd* pd, uint32_t qpn, uint64_t va, uint64_t len,
                        uint32_t required, AccessError* err) const;
  // A free slot with a fresh name, or -1 when every name is taken.
  int64_t take_slot();
  void release_slot(uint32_t index);
  // The slot a key names, or null.
  const Slot* slot_of(uint32_t key) const {
    const uint32_t index = by_name_.find(key >> kGenerationBits);
    return index == NameIndex::kNone ? nullptr : &slots_[index];
  }

  HostMemory& host_;
  NameSource& names_;
  RecentNames recent_;
  NameIndex by_name_;  // name -> slot index
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
  size_t live_ = 0;
  size_t mws_ = 0;
  // Regions and windows alive, by address: a bind WQE names both by pointer and runs later,
  // when either may be gone.
  std::unordered_set<const void*> alive_;
};

}  // namespace vrnic::engine
