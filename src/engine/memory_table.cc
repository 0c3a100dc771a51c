// The memory table: key allocation with generations and the per-access protection check.
#include "engine/memory_table.h"

#include "engine/odp.h"

namespace vrnic::engine {

const char* to_string(AccessError e) {
  switch (e) {
    case AccessError::kOk: return "ok";
    case AccessError::kBadKey: return "bad key";
    case AccessError::kWrongPd: return "wrong PD";
    case AccessError::kNoPermission: return "no permission";
    case AccessError::kOutOfBounds: return "out of bounds";
    case AccessError::kNotMapped: return "page not mapped";
  }
  return "?";
}

MemoryTable::~MemoryTable() {
  for (Slot& s : slots_) delete s.mr;
}

Mr* MemoryTable::add(Pd* pd, void* addr, uint64_t length, uint64_t iova, uint32_t access,
                     uint32_t max_mr) {
  if (live_ >= max_mr) return nullptr;
  uint32_t index;
  if (!free_.empty()) {
    index = free_.back();
    free_.pop_back();
  } else {
    // Index 0 is never used, so no valid key is below 256 (keys 0..255 are always invalid).
    if (slots_.empty()) slots_.emplace_back();
    if (slots_.size() >= (1u << (32 - kGenerationBits))) return nullptr;
    index = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  Slot& s = slots_[index];
  auto* mr = new Mr;
  mr->pd = pd;
  mr->host = static_cast<uint8_t*>(addr);
  mr->iova = iova;
  mr->length = length;
  mr->access = access;
  mr->key = index << kGenerationBits | s.generation;
  s.mr = mr;
  ++live_;
  return mr;
}

bool MemoryTable::remove(Mr* mr) {
  if (mr == nullptr) return false;
  uint32_t index = mr->key >> kGenerationBits;
  if (index >= slots_.size() || slots_[index].mr != mr) return false;
  Slot& s = slots_[index];
  s.mr = nullptr;
  ++s.generation;  // the next MR in this slot gets a different key
  free_.push_back(index);
  --live_;
  delete mr;
  return true;
}

Mr* MemoryTable::find(uint32_t key) const {
  uint32_t index = key >> kGenerationBits;
  if (index >= slots_.size()) return nullptr;
  const Slot& s = slots_[index];
  if (s.mr == nullptr || s.mr->key != key) return nullptr;
  return s.mr;
}

uint8_t* MemoryTable::check(uint32_t key, const Pd* pd, uint64_t va, uint64_t len,
                            uint32_t required, AccessError* err) const {
  auto fail = [&](AccessError e) -> uint8_t* {
    if (err) *err = e;
    return nullptr;
  };
  Mr* mr = find(key);
  if (mr == nullptr) return fail(AccessError::kBadKey);
  if (mr->pd != pd) return fail(AccessError::kWrongPd);  // C10-? keys are valid in their PD only
  if ((mr->access & required) != required) return fail(AccessError::kNoPermission);
  if (len != 0) {
    uint64_t end = va + len;
    if (end < va) return fail(AccessError::kOutOfBounds);  // va + len wraps
    if (va < mr->iova || end > mr->iova + mr->length) return fail(AccessError::kOutOfBounds);
  }
  if (mr->access & kOnDemand) {
    // Not pinned: the pages must be there now (an implicit region has host 0, iova = va).
    auto* p = reinterpret_cast<uint8_t*>(reinterpret_cast<uintptr_t>(mr->host) + (va - mr->iova));
    if (len != 0 &&
        !odp_pages_present(p, len, (required & (kLocalWrite | kRemoteWrite | kRemoteAtomic)) != 0))
      return fail(AccessError::kNotMapped);
    if (err) *err = AccessError::kOk;
    return p;
  }
  if (err) *err = AccessError::kOk;
  if (len == 0 && (va < mr->iova || va > mr->iova + mr->length)) return mr->host;
  return mr->host + (va - mr->iova);
}

uint8_t* MemoryTable::check_local(uint32_t lkey, const Pd* pd, uint64_t va, uint64_t len,
                                  uint32_t required, AccessError* err) const {
  return check(lkey, pd, va, len, required, err);
}

uint8_t* MemoryTable::check_remote(uint32_t rkey, const Pd* pd, uint64_t va, uint64_t len,
                                   uint32_t required, AccessError* err) const {
  return check(rkey, pd, va, len, required, err);
}

}  // namespace vrnic::engine
