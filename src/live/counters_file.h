// The counters file: engine::Counters of a running program in /dev/shm, readable from outside.
//
// Layout (all integers host order, the file is only read on the host that wrote it):
//   [0, 256)                  CountersFileHeader
//   [counters_offset, +8*n)   n uint64 counters: engine::Counters in VRNIC_COUNTERS order, then
//                             those a layer above added (the connection manager's)
//   [names_offset, +names_bytes)  their names, each NUL-terminated, in the same order
// Room for kCountersAdded more counters and their names is reserved: a layer that adds its
// own writes their names, then raises names_bytes and counter_count.
// The engine updates the counters in place; a reader sees each 8-byte counter whole (aligned
// loads), not a consistent snapshot of all of them.
#pragma once
#include <sys/types.h>

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/counters.h"
#include "engine/device.h"

namespace vrnic::live {

inline constexpr char kCountersMagic[8] = {'V', 'R', 'N', 'I', 'C', 'C', 'T', 'R'};
inline constexpr uint32_t kCountersVersion = 1;
inline constexpr const char* kCountersDir = "/dev/shm";

struct CountersFileHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;     // 256
  uint32_t counters_offset;  // bytes from the start of the file
  uint32_t counter_count;
  uint32_t names_offset;
  uint32_t names_bytes;
  int32_t pid;
  uint32_t reserved0;
  uint64_t start_realtime_ns;  // when the device was opened (CLOCK_REALTIME)
  char device[16];             // "vrnic0"
  char ip[48];                 // "127.0.0.2" or an IPv6 literal
  char program[64];            // the program's short name
  uint64_t proc_start_ticks;   // the writer's start, /proc/<pid>/stat field 22 (0: unknown)
  uint32_t rates_offset;       // the QP rate table (CountersRate entries); 0: none
  uint32_t rates_capacity;
  uint32_t rates_count;        // entries in use, written after them
  char reserved[256 - 48 - 16 - 48 - 64 - 8 - 12];
};
static_assert(sizeof(CountersFileHeader) == 256);

// One QP's DCQCN state in the counters file.
struct CountersRate {
  uint32_t qpn;
  uint32_t limited;  // 1: rate limited; 0: back at line rate
  double rate_bps, target_bps, alpha;
};
static_assert(sizeof(CountersRate) == 32);
inline constexpr uint32_t kCountersRates = 64;
// Counters the layers above the device may add (the connection manager's 28), and their names.
inline constexpr uint32_t kCountersAdded = 48;
inline constexpr uint32_t kCountersAddedNameBytes = 48 * 32;

// "/dev/shm/vrnic.<pid>.<device>"
std::string counters_path(pid_t pid, const std::string& device);

// The writer's side: creates the file and maps it; counters() points into the mapping.
class CountersFile {
 public:
  CountersFile() = default;
  ~CountersFile();  // unmaps and unlinks
  CountersFile(const CountersFile&) = delete;
  CountersFile& operator=(const CountersFile&) = delete;

  // Returns 0 or an errno value (then counters() is null and the device counts privately).
  // The file is the owner's only (0600): root's `vrnic stats` reads every program's.
  int create(const std::string& device, const std::string& ip, const std::string& program);
  engine::Counters* counters() const { return counters_; }
  // Publishes the QPs' rates (the first kCountersRates of them).
  void set_rates(std::span<const engine::QpRate> rates);
  const std::string& path() const { return path_; }
  // Counters a layer above the device keeps: their names follow the device's (in the file
  // when there is one, in format_added_nonzero always). Returns the index of the first of
  // their slots for set_added, or -1 if there is no room for them.
  int add_counters(std::span<const char* const> names);
  // Values of added counters from slot `first` on (8-byte stores, as the engine's).
  void set_added(size_t first, std::span<const uint64_t> values);
  // Nonzero added counters as "name value" lines.
  std::string format_added_nonzero() const;
  // Unlinks the file; the mapping stays valid (the engine may still count into it).
  void unlink_file();
  // Unmaps and unlinks (idempotent).
  void remove();

 private:
  void* map_ = nullptr;
  size_t size_ = 0;
  engine::Counters* counters_ = nullptr;
  std::string path_;
  std::vector<std::string> added_names_;
  std::array<uint64_t, kCountersAdded> private_added_{};  // the added values without a file
  uint64_t* added_ = private_added_.data();
  size_t names_capacity_ = 0;  // bytes of the file's names area
};

// The reader's side: one file's header and its counters by name.
struct CountersSnapshot {
  std::string path;
  pid_t pid = 0;
  std::string device, ip, program;
  uint64_t start_realtime_ns = 0;
  uint64_t proc_start_ticks = 0;
  std::vector<std::pair<std::string, uint64_t>> counters;
  std::vector<CountersRate> rates;
};

// Reads one counters file; false if it is not a valid one.
bool read_counters_file(const std::string& path, CountersSnapshot& out);
// Every counters file of a live process, optionally only those of one pid. Stale files are
// skipped: their pid is dead, or now names a process started later than the file's writer.
std::vector<CountersSnapshot> read_all_counters(pid_t only_pid = 0,
                                                const char* dir = kCountersDir);

// A process's start in clock ticks since boot (/proc/<pid>/stat field 22); 0 if unreadable.
uint64_t process_start_ticks(pid_t pid);

// True if the process that wrote a file as `pid` (started at `start_ticks`, 0: unknown) has
// exited: no process has the pid, or the one that has it started at another time (the pid
// was reused).
bool writer_gone(pid_t pid, uint64_t start_ticks);

// Removes the counters files of programs that exited without closing their device (killed,
// crashed): `vrnic.<pid>.<device>` files of kCountersDir whose writer is gone (writer_gone).
// Only files this user may remove are looked at (/dev/shm is sticky). Called when a device
// opens. Returns how many were removed. `dir`: where to look (tests give one of their own, out
// of the way of the devices other processes open meanwhile, which clean kCountersDir).
size_t remove_stale_counters_files(const char* dir = kCountersDir);

// Unlinks `path` if it is still the file open as `fd` (a new file of a reused pid may have
// replaced it since it was read). True if unlinked.
bool unlink_if_same(const std::string& path, int fd);

CountersRate to_counters_rate(const engine::QpRate& r);
// "qp 0x000013 rate 9876.5 Mb/s target 12000.0 Mb/s alpha 0.0312" lines, one per QP.
std::string format_rates(std::span<const CountersRate> rates);

// Nonzero counters as "name value" lines.
std::string format_nonzero(const engine::Counters& c);

}  // namespace vrnic::live
