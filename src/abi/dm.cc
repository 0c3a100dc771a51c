// Device memory: ibv_alloc_dm / ibv_free_dm, ibv_memcpy_to_dm / _from_dm, ibv_reg_dm_mr.
// vrnic's "device memory" is a page-aligned block of the library's own memory: a program
// reaches it only through the memcpy calls and zero-based MRs, as it reaches a NIC's
// on-chip memory. The device offers kMaxDmSize bytes in all (query.cc advertises it).
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "abi/convert.h"
#include "abi/objects.h"
#include "abi/ops.h"
#include "live/live_nic.h"

using namespace vrnic::abi;
using vrnic::engine::Device;

namespace {

constexpr size_t kPage = 4096;
constexpr uint32_t kMaxLogAlign = 12;  // blocks are page-aligned: any alignment up to a page
constexpr size_t kWord = 4;            // the access granularity of mlx5's MEMIC
std::atomic<size_t> g_dm_used{0};      // bytes allocated, over every context of the process

// The range [offset, offset + length) lies inside the block.
bool in_bounds(const DmBlock* b, uint64_t offset, size_t length) {
  return offset <= b->length && length <= b->length - offset;
}

// mlx5_access_dm's checks, in its order: a range past the block is EFAULT, then an offset or
// length that is not a multiple of 4 bytes is EINVAL. The copy moves whole 4-byte words, each
// read or written at once (as MEMIC is accessed), so a WRITE the engine places meanwhile is
// never seen torn within a word.
int check_copy(const DmBlock* b, uint64_t offset, size_t length) {
  if (!in_bounds(b, offset, length)) return EFAULT;
  if ((offset | length) % kWord) return EINVAL;
  return 0;
}

int copy_to_dm(ibv_dm* ibv, uint64_t offset, const void* host, size_t length) {
  DmBlock* b = to_dm(ibv)->block;
  if (int err = check_copy(b, offset, length)) return err;
  const auto* from = static_cast<const uint8_t*>(host);
  auto* to = reinterpret_cast<uint32_t*>(b->mem + offset);
  for (size_t i = 0; i < length / kWord; ++i) {
    uint32_t word;
    std::memcpy(&word, from + i * kWord, kWord);
    std::atomic_ref<uint32_t>(to[i]).store(word, std::memory_order_relaxed);
  }
  return 0;
}

int copy_from_dm(void* host, ibv_dm* ibv, uint64_t offset, size_t length) {
  DmBlock* b = to_dm(ibv)->block;
  if (int err = check_copy(b, offset, length)) return err;
  auto* from = reinterpret_cast<uint32_t*>(b->mem + offset);
  auto* to = static_cast<uint8_t*>(host);
  for (size_t i = 0; i < length / kWord; ++i) {
    const uint32_t word = std::atomic_ref<uint32_t>(from[i]).load(std::memory_order_relaxed);
    std::memcpy(to + i * kWord, &word, kWord);
  }
  return 0;
}

// Takes `bytes` of the device's memory; false if that would pass kMaxDmSize.
bool reserve(size_t bytes) {
  size_t used = g_dm_used.load();
  do {
    if (bytes > kMaxDmSize - used) return false;
  } while (!g_dm_used.compare_exchange_weak(used, used + bytes));
  return true;
}

}  // namespace

ibv_dm* vrnic::abi::new_dm_handle(ibv_context* context, DmBlock* block, uint32_t handle) {
  auto* dm = new (std::nothrow) Dm;
  if (!dm) return fail_null<ibv_dm>(ENOMEM);
  dm->block = block;
  dm->ibv.context = context;
  dm->ibv.memcpy_to_dm = copy_to_dm;
  dm->ibv.memcpy_from_dm = copy_from_dm;
  dm->ibv.handle = handle;
  return &dm->ibv;
}

// mlx5's checks: an unknown comp_mask bit or a length over max_dm_size is EINVAL; memory the
// device no longer has is ENOMEM.
ibv_dm* vrnic::abi::op_alloc_dm(ibv_context* context, ibv_alloc_dm_attr* attr) {
  if (attr->comp_mask || attr->length == 0 || attr->length > kMaxDmSize ||
      attr->log_align_req > kMaxLogAlign) {
    return fail_null<ibv_dm>(EINVAL);
  }
  const size_t reserved = (attr->length + kPage - 1) / kPage * kPage;
  if (!reserve(reserved)) return fail_null<ibv_dm>(ENOMEM);
  auto* block = new (std::nothrow) DmBlock;
  void* mem = block ? std::aligned_alloc(kPage, reserved) : nullptr;
  ibv_dm* dm = mem ? new_dm_handle(context, block, 0) : nullptr;
  if (!dm) {
    std::free(mem);
    delete block;
    g_dm_used -= reserved;
    return fail_null<ibv_dm>(ENOMEM);
  }
  std::memset(mem, 0, reserved);
  block->mem = static_cast<uint8_t*>(mem);
  block->length = attr->length;
  block->reserved = reserved;
  dm->handle = to_context(context)->file->add(Named::Kind::kDm, block);
  return dm;
}

// Frees the block whichever handle names it (the original or an imported one); the other
// handles of it are left to ibv_unimport_dm, as with the kernel's objects.
int vrnic::abi::op_free_dm(ibv_dm* ibv) {
  Dm* dm = to_dm(ibv);
  CmdFile& file = *to_context(ibv->context)->file;
  if (!file.names(ibv->handle, dm->block)) return ENOENT;  // freed through another handle
  if (dm->block->mrs.load()) return EBUSY;  // MRs on it (the kernel's use count)
  file.remove(ibv->handle);
  std::free(dm->block->mem);
  g_dm_used -= dm->block->reserved;
  delete dm->block;
  delete dm;
  return 0;
}

// rdma-core requires IBV_ACCESS_ZERO_BASED (EINVAL without); mlx5 refuses other access bits
// than local / remote write, remote read and atomic (EINVAL); the kernel a range outside the
// block (EINVAL), but not an empty one, nor one of any alignment (only the copies need 4-byte
// words). The MR's iova 0 is the block's byte `dm_offset`.
ibv_mr* vrnic::abi::op_reg_dm_mr(ibv_pd* ibv_pd, ibv_dm* ibv_dm, uint64_t dm_offset,
                                 size_t length, unsigned int access) {
  constexpr unsigned kAllowed = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                                IBV_ACCESS_ZERO_BASED;
  DmBlock* dm = to_dm(ibv_dm)->block;
  if ((access & ~kAllowed) || !(access & IBV_ACCESS_ZERO_BASED)) return fail_null<ibv_mr>(EINVAL);
  const bool same_file = to_context(ibv_dm->context)->file == to_context(ibv_pd->context)->file;
  if (!same_file || !in_bounds(dm, dm_offset, length)) {
    return fail_null<ibv_mr>(EINVAL);
  }
  uint32_t engine_access = 0;
  if (int err = to_engine_access(access, engine_access)) return fail_null<ibv_mr>(err);
  auto* mr = new (std::nothrow) Mr{};
  if (!mr) return fail_null<ibv_mr>(ENOMEM);
  vrnic::engine::MrInfo info;
  vrnic::engine::Pd* pd = to_pd(ibv_pd)->pd;
  const int err = to_context(ibv_pd->context)->nic->locked([&](Device& d) {
    return d.reg_mr(pd, dm->mem + dm_offset, length, 0, engine_access, info);
  });
  if (err) {
    delete mr;
    return fail_null<ibv_mr>(err);
  }
  ++dm->mrs;
  hold_domain(ibv_pd);
  mr->mr = info.mr;
  mr->dm = dm;
  mr->ibv.context = ibv_pd->context;
  mr->ibv.pd = ibv_pd;
  mr->ibv.addr = nullptr;  // zero-based: the program addresses the MR by offset (as rdma-core)
  mr->ibv.length = length;
  mr->ibv.lkey = info.lkey;
  mr->ibv.rkey = info.rkey;
  mr->ibv.handle = to_context(ibv_pd->context)->file->add(Named::Kind::kMr, info.mr, dm);
  return &mr->ibv;
}

void vrnic::abi::release_dm_mr(ibv_mr* ibv) {
  if (DmBlock* dm = to_mr(ibv)->dm) --dm->mrs;
}
