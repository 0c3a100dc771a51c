// The memory table: keys (random names, generations) and the per-access protection check.
#include "engine/memory_table.h"

#include "engine/ports.h"

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
  for (Slot& s : slots_) {
    delete s.mr;
    delete s.mw;
  }
}

int64_t MemoryTable::take_slot() {
  // Half the name space at most: a draw then finds a free name in two tries on average.
  if (by_name_.size() >= (1u << (32 - kGenerationBits - 1))) return -1;
  uint32_t index;
  if (!free_.empty()) {
    index = free_.back();
    free_.pop_back();
  } else {
    slots_.emplace_back();
    index = static_cast<uint32_t>(slots_.size() - 1);
  }
  // Name 0 is never drawn, so no valid key is below 256 (keys 0..255 are always invalid).
  uint32_t name;
  do name = names_.next24();
  while (name == 0 || by_name_.contains(name) || recent_.contains(name));
  slots_[index].name = name;
  by_name_.insert(name, index);
  return index;
}

void MemoryTable::release_slot(uint32_t index) {
  Slot& s = slots_[index];
  by_name_.erase(s.name);
  recent_.add(s.name);
  s.name = 0;
  ++s.generation;  // the slot's next key differs in its generation too
  free_.push_back(index);
}

Mr* MemoryTable::add(Pd* pd, void* addr, uint64_t length, uint64_t iova, uint32_t access,
                     uint32_t max_mr) {
  if (live_ >= max_mr) return nullptr;
  int64_t slot = take_slot();
  if (slot < 0) return nullptr;
  Slot& s = slots_[static_cast<uint32_t>(slot)];
  auto* mr = new Mr;
  mr->pd = pd;
  mr->host = static_cast<uint8_t*>(addr);
  mr->iova = iova;
  mr->length = length;
  mr->access = access;
  mr->key = s.name << kGenerationBits | s.generation;
  s.mr = mr;
  ++live_;
  alive_.insert(mr);
  return mr;
}

Mw* MemoryTable::add_mw(Pd* pd, uint8_t type, uint32_t max) {
  if (mws_ >= max) return nullptr;
  int64_t slot = take_slot();
  if (slot < 0) return nullptr;
  Slot& s = slots_[static_cast<uint32_t>(slot)];
  auto* mw = new Mw;
  mw->pd = pd;
  mw->type = type;
  mw->rkey = s.name << kGenerationBits | s.generation;
  s.mw = mw;
  ++mws_;
  alive_.insert(mw);
  return mw;
}

bool MemoryTable::remove_mw(Mw* mw) {
  if (!has_mw(mw)) return false;
  if (mw->bound && mw->mr != nullptr) --mw->mr->windows;
  const uint32_t index = by_name_.find(mw->rkey >> kGenerationBits);
  slots_[index].mw = nullptr;
  release_slot(index);
  --mws_;
  alive_.erase(mw);
  delete mw;
  return true;
}

bool MemoryTable::has_mw(const Mw* mw) const {
  if (mw == nullptr || alive_.count(mw) == 0) return false;
  const Slot* s = slot_of(mw->rkey);
  return s != nullptr && s->mw == mw;
}

bool MemoryTable::has_mr(const Mr* mr) const {
  if (mr == nullptr || alive_.count(mr) == 0) return false;
  return find(mr->key) == mr;
}

Mw* MemoryTable::find_mw(uint32_t rkey) const {
  const Slot* s = slot_of(rkey);
  return s != nullptr && s->mw != nullptr && s->mw->rkey == rkey ? s->mw : nullptr;
}

bool MemoryTable::remove(Mr* mr) {
  if (mr == nullptr || find(mr->key) != mr) return false;
  const uint32_t index = by_name_.find(mr->key >> kGenerationBits);
  slots_[index].mr = nullptr;
  release_slot(index);  // the next MR in this slot gets another name and generation
  --live_;
  alive_.erase(mr);
  delete mr;
  return true;
}

Mr* MemoryTable::find(uint32_t key) const {
  const Slot* s = slot_of(key);
  if (s == nullptr || s->mr == nullptr || s->mr->key != key) return nullptr;
  return s->mr;
}

uint8_t* MemoryTable::check(uint32_t key, const Pd* pd, uint64_t va, uint64_t len,
                            uint32_t required, AccessError* err) const {
  auto fail = [&](AccessError e) -> uint8_t* {
    if (err) *err = e;
    return nullptr;
  };
  Mr* mr = find(key);
  if (mr == nullptr) return fail(AccessError::kBadKey);
  if (mr->pd != pd) return fail(AccessError::kWrongPd);  // a key is valid in its PD (IBA 10.6.3)
  if ((mr->access & required) != required) return fail(AccessError::kNoPermission);
  if (len != 0) {
    uint64_t end = va + len;
    if (end < va) return fail(AccessError::kOutOfBounds);  // va + len wraps
    if (va < mr->iova || end > mr->iova + mr->length) return fail(AccessError::kOutOfBounds);
  }
  if (__builtin_expect((mr->access & kOnDemand) != 0, 0)) {
    // Not pinned: the pages must be there now (an implicit region has host 0, iova = va).
    auto* p = reinterpret_cast<uint8_t*>(reinterpret_cast<uintptr_t>(mr->host) + (va - mr->iova));
    if (len != 0 &&
        !host_.pages_present(p, len, (required & (kLocalWrite | kRemoteWrite | kRemoteAtomic)) != 0))
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

uint8_t* MemoryTable::check_remote(uint32_t rkey, const Pd* pd, uint32_t qpn, uint64_t va,
                                   uint64_t len, uint32_t required, AccessError* err) const {
  const Slot* s = slot_of(rkey);
  if (s != nullptr && s->mw != nullptr)
    return check_window(*s->mw, rkey, pd, qpn, va, len, required, err);
  return check(rkey, pd, va, len, required, err);
}

// A window access (IBA 10.6.7.2): the window must be bound, of this PD (and for
// type 2 bound through this QP), allow the access, and cover the range; the bytes are then
// those of the MR under it.
uint8_t* MemoryTable::check_window(const Mw& mw, uint32_t rkey, const Pd* pd, uint32_t qpn, uint64_t va,
                                   uint64_t len, uint32_t required, AccessError* err) const {
  auto fail = [&](AccessError e) -> uint8_t* {
    if (err) *err = e;
    return nullptr;
  };
  if (mw.rkey != rkey || !mw.bound || mw.mr == nullptr) return fail(AccessError::kBadKey);
  if (mw.pd != pd || (mw.type == 2 && mw.qpn != qpn)) return fail(AccessError::kWrongPd);
  if ((mw.access & required) != required) return fail(AccessError::kNoPermission);
  const uint64_t base = (mw.access & kZeroBased) ? 0 : mw.addr;
  uint64_t end = va + len;
  if (end < va || va < base || end > base + mw.length) return fail(AccessError::kOutOfBounds);
  // Translated into the MR: its own remote access bits do not apply to a window access.
  const Mr& mr = *mw.mr;
  const uint64_t mr_va = mw.addr + (va - base);
  auto* p = reinterpret_cast<uint8_t*>(reinterpret_cast<uintptr_t>(mr.host) + (mr_va - mr.iova));
  if ((mr.access & kOnDemand) && len != 0 &&
      !host_.pages_present(p, len, (required & (kRemoteWrite | kRemoteAtomic)) != 0))
    return fail(AccessError::kNotMapped);
  if (err) *err = AccessError::kOk;
  return p;
}

}  // namespace vrnic::engine
