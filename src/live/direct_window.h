// Direct mode of the live device (docs/protocol.md, "Direct mode"): the table a device
// publishes for peers on the same host, and the requester side that copies through it.
//
// Each device with direct mode on owns a shared-memory file
//   /dev/shm/vrnic.direct.<network namespace inode>.<address in hex>
// holding its registered memory regions and RC QPs. A peer in the same network namespace
// that sends to that address maps the file read-mostly, checks the access exactly as the
// responder would (key, generation, PD, rights, bounds, the responder QP's state, access
// flags and connection), then copies with process_vm_writev / process_vm_readv between the
// two processes. Entries are seqlocks; a memory region entry also counts the copies in
// progress through it, and the owner waits for them before it retracts or changes it.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/ports.h"

namespace vrnic::live {

class DirectWindow final : public engine::DirectLink {
 public:
  // Creates and publishes this device's (empty) table. Returns null and sets err (errno)
  // if the file cannot be created or mapped.
  static DirectWindow* create(bool ipv6, const std::array<uint8_t, 16>& ip, int& err);
  ~DirectWindow() override;  // marks the table dead, unlinks it, unmaps the peers'

  // The file name for an address in this process's network namespace.
  static std::string path_for(bool ipv6, const std::array<uint8_t, 16>& ip);
  // Removes the tables of devices whose process exited without closing them (killed), in
  // any namespace: the owner pid is gone or reused. Only this user's files. Returns how many.
  // `dir`: where to look (a test's own, out of the way of the devices other processes open).
  static size_t remove_stale_tables(const char* dir = "/dev/shm");

  void publish_mr(const engine::DirectMr& mr) override;
  void retract_mr(uint32_t key) override;
  void publish_qp(const engine::DirectQp& qp) override;
  void retract_qp(uint32_t qpn) override;
  bool submit(const engine::DirectOp& op) override;
  size_t flush() override;
  size_t queued() const override { return queue_.size(); }
  bool full() const override;
  // process_vm_writev / process_vm_readv calls made (copies per call = the batching).
  uint64_t copy_calls() const { return copy_calls_; }

  const std::string& path() const { return path_; }
  // At exit (the device is not freed then): peers stop using the table, the file goes.
  void close_table();

  // Layout of the shared file (public for the tests). Every field is an atomic: the owner
  // writes while peers read.
  static constexpr uint64_t kMagic = 0x3277646e63696e72ull;  // "rnicndw2"
  static constexpr uint32_t kMrSlots = 16384, kQpSlots = 16384;
  static constexpr uint32_t kProbe = 8;  // slots an entry may sit in from its home slot
  struct Header {
    uint64_t magic;
    uint32_t pid;
    uint32_t mr_slots, qp_slots;
    std::atomic<uint32_t> alive;  // 0 once the owner closed the device
    uint64_t start_ticks;  // the owner's start (process_start_ticks): tells a reused pid
  };
  struct MrSlot {
    std::atomic<uint32_t> seq;   // odd while the owner changes the entry
    std::atomic<uint32_t> busy;  // peers copying through it now
    std::atomic<uint32_t> key, pd, access, valid;
    std::atomic<uint64_t> iova, length, host;
    uint64_t pad[2];
  };
  struct QpSlot {
    std::atomic<uint32_t> seq;
    std::atomic<uint32_t> qpn, pd, access, dest_qpn, flags;  // flags: 1 responds, 2 ipv6, 4 valid
    std::atomic<uint64_t> dest_ip[2];
    uint64_t pad[3];
  };
  static_assert(std::atomic<uint32_t>::is_always_lock_free &&
                std::atomic<uint64_t>::is_always_lock_free);
  static_assert(sizeof(MrSlot) == 64 && sizeof(QpSlot) == 64);

 private:
  DirectWindow() = default;
  struct Map {
    void* base = nullptr;
    size_t size = 0;
    Header* header() const { return static_cast<Header*>(base); }
    MrSlot* mrs() const;
    QpSlot* qps() const;
  };
  struct Peer {
    bool ipv6 = false;
    std::array<uint8_t, 16> ip{};
    Map map;             // base null: no table at that address (retried after a while)
    int pidfd = -1;      // the owner's process: tells a dead owner from a reused pid
    uint64_t alive_ns = 0;  // when the pidfd last said the owner lives
    uint64_t retry_ns = 0;
    bool broken = false;  // the copy system calls are refused for this peer
  };
  // A submitted copy: the peer (index in peers_), the pinned slot, the remote range and its
  // local spans (segs_[first_seg, first_seg + nsegs)).
  struct Pending {
    size_t peer = 0;
    MrSlot* pin = nullptr;
    bool read = false;
    uint64_t remote = 0, length = 0;
    uint32_t first_seg = 0, nsegs = 0;
  };
  struct Seg {
    uint8_t* addr;     // null: bytes at arena_[off, off + len)
    uint64_t off, len;
  };
  // A check of a peer's table: allowed; a slot being rewritten (the wire, this time); or
  // refused (the wire; and now and then a check that the table's owner still lives).
  // kAbsent: this slot holds another entry (the lookup tries the next of the run).
  enum class Verdict { kAllowed, kBusy, kRefused, kAbsent };
  struct MrView {
    MrSlot* slot = nullptr;
    uint32_t seq = 0;     // the slot's sequence when checked
    uint64_t remote = 0;  // where the range starts in the owner's address space
  };
  static Verdict check_qp(const Peer& peer, const engine::DirectOp& op, uint32_t& pd);
  static Verdict check_qp_slot(const QpSlot& q, const engine::DirectOp& op, uint32_t& pd);
  static Verdict check_mr(const Peer& peer, const engine::DirectOp& op, uint32_t pd, MrView& mr);
  static Verdict check_mr_slot(MrSlot& m, const engine::DirectOp& op, uint32_t pd, MrView& mr);
  // The owner's slot of a key / QPN in its probe run; with `take`, a free one if it has none.
  MrSlot* own_mr_slot(uint32_t key, bool take);
  QpSlot* own_qp_slot(uint32_t qpn, bool take);
  bool refuse(Peer& peer);  // false, after the liveness check
  void enqueue(size_t peer, const MrView& mr, const engine::DirectOp& op);
  Peer* peer_for(bool ipv6, const std::array<uint8_t, 16>& ip, size_t& index);
  static void unmap(Peer& p);  // drops the mapping and the pidfd; the peer is looked up anew
  static bool owner_gone(const Peer& p);  // the table's owner process has exited
  // Copies queue_[first, end) (one peer, one direction) in one system call; returns how
  // many of them completed.
  size_t copy_group(size_t first, size_t end);
  static void wait_idle(MrSlot& slot);

  std::string path_;
  Map own_;
  std::vector<Peer> peers_;
  std::vector<Pending> queue_;
  std::vector<Seg> segs_;
  std::vector<uint8_t> arena_;
  uint64_t copy_calls_ = 0;  // inline data, copied at submit (its WQE may move)
};

}  // namespace vrnic::live
