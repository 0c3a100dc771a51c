// The command file behind a context, as the kernel's uverbs file: the handles of its PDs, MRs
// and device memory, shared by every context opened on it, and how a descriptor leads back to
// it (ibv_import_device). docs/abi.md, "Importing a context and its objects".
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>

namespace vrnic::abi {

struct DmBlock;

// What a handle names.
struct Named {
  enum class Kind : uint8_t { kPd, kMr, kDm };
  Kind kind = Kind::kPd;
  void* object = nullptr;  // engine::Pd*, engine::Mr* or DmBlock*
  DmBlock* dm = nullptr;   // an MR on device memory: its block
};

class CmdFile {
 public:
  // A new file and its command fd (`fd`): the device node of the sysfs view, else /dev/null
  // (the node the view binds there), opened read-write. Its open file description is marked
  // (an OFD lock on a byte of the node no other file uses) so that find() recognises every
  // dup of it. fd is -1 if nothing could be opened: the context works, it cannot be imported.
  static std::shared_ptr<CmdFile> create(int& fd);
  // The file whose open file description `fd` refers to, or null.
  static std::shared_ptr<CmdFile> find(int fd);
  // The device number command fds are opened on (what ibv_import_device compares).
  static bool device_number(dev_t& out);

  CmdFile() = default;
  CmdFile(const CmdFile&) = delete;
  CmdFile& operator=(const CmdFile&) = delete;

  // The lowest free handle, as the kernel's IDR hands them out.
  uint32_t add(Named::Kind kind, void* object, DmBlock* dm = nullptr);
  void remove(uint32_t handle);
  // 0 with `out`; ENOENT for no such handle, EINVAL for a handle of another kind (uverbs'
  // lookup of an object by handle).
  int lookup(uint32_t handle, Named::Kind kind, Named& out) const;
  // Whether `handle` still names `object` (false once it was destroyed through another handle).
  bool names(uint32_t handle, const void* object) const;

 private:
  mutable std::mutex mu_;
  std::map<uint32_t, Named> handles_;
  std::set<uint32_t> free_;  // handles below next_ given back
  uint32_t next_ = 0;
  off_t mark_ = -1;  // the byte whose OFD lock marks this file's description (-1: unmarked)
};

}  // namespace vrnic::abi
