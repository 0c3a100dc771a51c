// Importing a context and its objects (rdma-core's shared PD): ibv_import_device on a dup of a
// context's cmd_fd, ibv_import_pd / _mr / _dm by handle, and the ibv_unimport_* calls. The
// errnos are those of rdma-core v44 with mlx5 and the kernel's uverbs (docs/abi.md).
#include <sys/stat.h>
#include <unistd.h>

#include <new>

#include "abi/identity.h"
#include "abi/objects.h"
#include "abi/ops.h"
#include "engine/memory_table.h"
#include "live/live_nic.h"

using namespace vrnic::abi;

// ibv_import_device: EINVAL for a descriptor that is not a character device, ENODEV for one of
// another device. Past that the descriptor belongs to the library, as with rdma-core (whose
// provider closes it when the import fails): a node of the device that no context was opened
// on is EINVAL (uverbs: a file without a context).
VRNIC_EXPORT ibv_context* ibv_import_device(int cmd_fd) {
  struct stat st;
  if (fstat(cmd_fd, &st) != 0 || !S_ISCHR(st.st_mode)) return fail_null<ibv_context>(EINVAL);
  dev_t device = 0;
  if (!CmdFile::device_number(device) || st.st_rdev != device) {
    return fail_null<ibv_context>(ENODEV);
  }
  std::shared_ptr<CmdFile> file = CmdFile::find(cmd_fd);
  if (!file) {
    close(cmd_fd);
    return fail_null<ibv_context>(EINVAL);
  }
  return new_context(the_device(), cmd_fd, std::move(file));
}

// A handle that names nothing is ENOENT, one that names an object of another kind EINVAL
// (uverbs' lookup); importing the same handle twice gives two ibv_pd of one PD.
VRNIC_EXPORT ibv_pd* ibv_import_pd(ibv_context* context, uint32_t pd_handle) {
  Named o;
  if (int err = to_context(context)->file->lookup(pd_handle, Named::Kind::kPd, o)) {
    return fail_null<ibv_pd>(err);
  }
  auto* pd = new (std::nothrow) Pd{};
  if (!pd) return fail_null<ibv_pd>(ENOMEM);
  pd->pd = static_cast<vrnic::engine::Pd*>(o.object);
  pd->ibv.context = context;
  pd->ibv.handle = pd_handle;
  return &pd->ibv;
}

// Forgets this ibv_pd only; the PD stays for its other handles. mlx5 refuses (and keeps the
// PD) for a parent domain or a PD with parent domains on it: so does vrnic.
VRNIC_EXPORT void ibv_unimport_pd(ibv_pd* ibv) {
  Pd* pd = to_pd(ibv);
  if (pd->base || pd->refs.load()) return;
  delete pd;
}

// The MR as rdma-core's ibv_cmd_query_mr reports it: keys and length of the region (as they
// are now, after any ibv_rereg_mr), addr NULL, on the PD given.
VRNIC_EXPORT ibv_mr* ibv_import_mr(ibv_pd* ibv_pd, uint32_t mr_handle) {
  Context* c = to_context(ibv_pd->context);
  Named o;
  if (int err = c->file->lookup(mr_handle, Named::Kind::kMr, o)) return fail_null<ibv_mr>(err);
  auto* mr = new (std::nothrow) Mr{};
  if (!mr) return fail_null<ibv_mr>(ENOMEM);
  mr->mr = static_cast<vrnic::engine::Mr*>(o.object);
  mr->dm = o.dm;
  c->nic->locked([&](vrnic::engine::Device&) {
    mr->ibv.lkey = mr->ibv.rkey = mr->mr->key;
    mr->ibv.length = mr->mr->length;
  });
  mr->ibv.context = ibv_pd->context;
  mr->ibv.pd = ibv_pd;
  mr->ibv.addr = nullptr;
  mr->ibv.handle = mr_handle;
  hold_domain(ibv_pd);  // ibv_dereg_mr of it releases it, as of any MR
  return &mr->ibv;
}

VRNIC_EXPORT void ibv_unimport_mr(ibv_mr* ibv) {
  release_domain(ibv->pd);
  delete to_mr(ibv);
}

VRNIC_EXPORT ibv_dm* ibv_import_dm(ibv_context* context, uint32_t dm_handle) {
  Named o;
  if (int err = to_context(context)->file->lookup(dm_handle, Named::Kind::kDm, o)) {
    return fail_null<ibv_dm>(err);
  }
  return new_dm_handle(context, static_cast<DmBlock*>(o.object), dm_handle);
}

VRNIC_EXPORT void ibv_unimport_dm(ibv_dm* ibv) { delete to_dm(ibv); }
