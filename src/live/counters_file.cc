// CountersFile: create / map / unlink of the shared counters file, and its readers.
#include "live/counters_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace vrnic::live {
namespace {

constexpr const char* kCounterNames[] = {
#define VRNIC_COUNTER_NAME(name) #name,
    VRNIC_COUNTERS(VRNIC_COUNTER_NAME)
#undef VRNIC_COUNTER_NAME
};
constexpr uint32_t kCounterCount = sizeof(kCounterNames) / sizeof(kCounterNames[0]);
static_assert(sizeof(engine::Counters) == kCounterCount * sizeof(uint64_t));

void copy_field(char* dst, size_t n, const std::string& s) {
  std::memset(dst, 0, n);
  std::memcpy(dst, s.data(), std::min(n - 1, s.size()));
}

std::string field(const char* src, size_t n) { return std::string(src, strnlen(src, n)); }

}  // namespace

std::string counters_path(pid_t pid, const std::string& device) {
  return std::string(kCountersDir) + "/vrnic." + std::to_string(pid) + "." + device;
}

CountersFile::~CountersFile() { remove(); }

int CountersFile::create(const std::string& device, const std::string& ip,
                         const std::string& program) {
  std::string names;
  for (const char* n : kCounterNames) names.append(n).push_back('\0');
  const size_t counters_offset = sizeof(CountersFileHeader);
  const size_t names_offset =
      counters_offset + sizeof(engine::Counters) + kCountersAdded * sizeof(uint64_t);
  const size_t names_capacity = names.size() + kCountersAddedNameBytes;
  const size_t rates_offset = (names_offset + names_capacity + 7) & ~size_t{7};
  const size_t size = rates_offset + kCountersRates * sizeof(CountersRate);

  std::string path = counters_path(getpid(), device);
  // A file at this path is stale (its writer had this pid and is gone): a new one, never
  // that one reused, so that a cleanup reading the old one cannot remove the new.
  unlink(path.c_str());
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    int e = errno;
    close(fd);
    unlink(path.c_str());
    return e;
  }
  void* map = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  close(fd);
  if (map == MAP_FAILED) {
    unlink(path.c_str());
    return e;
  }
  auto* h = static_cast<CountersFileHeader*>(map);
  std::memset(h, 0, sizeof *h);
  h->version = kCountersVersion;
  h->header_bytes = sizeof(CountersFileHeader);
  h->counters_offset = static_cast<uint32_t>(counters_offset);
  h->counter_count = kCounterCount;
  h->names_offset = static_cast<uint32_t>(names_offset);
  h->names_bytes = static_cast<uint32_t>(names.size());
  h->pid = getpid();
  h->proc_start_ticks = process_start_ticks(h->pid);
  h->rates_offset = static_cast<uint32_t>(rates_offset);
  h->rates_capacity = kCountersRates;
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  h->start_realtime_ns = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
  copy_field(h->device, sizeof h->device, device);
  copy_field(h->ip, sizeof h->ip, ip);
  copy_field(h->program, sizeof h->program, program);
  std::memcpy(static_cast<char*>(map) + names_offset, names.data(), names.size());
  counters_ = new (static_cast<char*>(map) + counters_offset) engine::Counters();
  added_ = reinterpret_cast<uint64_t*>(counters_ + 1);
  names_capacity_ = names_capacity;
  // The magic last: a reader that sees it sees a complete header.
  __atomic_thread_fence(__ATOMIC_RELEASE);
  std::memcpy(h->magic, kCountersMagic, sizeof kCountersMagic);
  map_ = map;
  size_ = size;
  path_ = std::move(path);
  return 0;
}

void CountersFile::set_rates(std::span<const engine::QpRate> rates) {
  if (!map_) return;
  auto* h = static_cast<CountersFileHeader*>(map_);
  auto* table = reinterpret_cast<CountersRate*>(static_cast<char*>(map_) + h->rates_offset);
  const uint32_t n = static_cast<uint32_t>(std::min<size_t>(rates.size(), kCountersRates));
  for (uint32_t i = 0; i < n; ++i) table[i] = to_counters_rate(rates[i]);
  __atomic_store_n(&h->rates_count, n, __ATOMIC_RELEASE);
}

int CountersFile::add_counters(std::span<const char* const> names) {
  const size_t first = added_names_.size();
  if (first + names.size() > kCountersAdded) return -1;
  std::string text;
  for (const char* n : names) text.append(n).push_back('\0');
  auto* h = static_cast<CountersFileHeader*>(map_);
  if (h && h->names_bytes + text.size() > names_capacity_) return -1;
  added_names_.insert(added_names_.end(), names.begin(), names.end());
  if (h) {
    // The names first, then their count: a reader that sees the count sees the names.
    std::memcpy(static_cast<char*>(map_) + h->names_offset + h->names_bytes, text.data(),
                text.size());
    __atomic_store_n(&h->names_bytes, h->names_bytes + uint32_t(text.size()), __ATOMIC_RELEASE);
    __atomic_store_n(&h->counter_count, kCounterCount + uint32_t(added_names_.size()),
                     __ATOMIC_RELEASE);
  }
  return static_cast<int>(first);
}

void CountersFile::set_added(size_t first, std::span<const uint64_t> values) {
  for (size_t i = 0; i < values.size() && first + i < added_names_.size(); ++i)
    __atomic_store_n(&added_[first + i], values[i], __ATOMIC_RELAXED);
}

std::string CountersFile::format_added_nonzero() const {
  std::string out;
  for (size_t i = 0; i < added_names_.size(); ++i) {
    const uint64_t v = __atomic_load_n(&added_[i], __ATOMIC_RELAXED);
    if (v != 0) out += added_names_[i] + ' ' + std::to_string(v) + '\n';
  }
  return out;
}

void CountersFile::unlink_file() {
  if (!path_.empty()) {
    unlink(path_.c_str());
    path_.clear();
  }
}

void CountersFile::remove() {
  if (map_) {
    std::memcpy(private_added_.data(), added_, sizeof private_added_);
    added_ = private_added_.data();
    munmap(map_, size_);
    map_ = nullptr;
    counters_ = nullptr;
  }
  unlink_file();
}

bool read_counters_file(const std::string& path, CountersSnapshot& out) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(CountersFileHeader))) {
    close(fd);
    return false;
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* map = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return false;
  const auto* h = static_cast<const CountersFileHeader*>(map);
  const char* base = static_cast<const char*>(map);
  // The count before the names' size: the writer raises them in the other order.
  const uint32_t count = __atomic_load_n(&h->counter_count, __ATOMIC_ACQUIRE);
  const uint32_t names_bytes = __atomic_load_n(&h->names_bytes, __ATOMIC_ACQUIRE);
  bool ok = std::memcmp(h->magic, kCountersMagic, sizeof kCountersMagic) == 0 &&
            h->version == kCountersVersion && h->counters_offset + uint64_t{count} * 8 <= size &&
            h->names_offset + uint64_t{names_bytes} <= size && h->counters_offset % 8 == 0;
  if (ok) {
    out.path = path;
    out.pid = h->pid;
    out.device = field(h->device, sizeof h->device);
    out.ip = field(h->ip, sizeof h->ip);
    out.program = field(h->program, sizeof h->program);
    out.start_realtime_ns = h->start_realtime_ns;
    out.proc_start_ticks = h->proc_start_ticks;
    out.counters.clear();
    const auto* values = reinterpret_cast<const uint64_t*>(base + h->counters_offset);
    const char* name = base + h->names_offset;
    const char* names_end = name + names_bytes;
    for (uint32_t i = 0; i < count && name < names_end; ++i) {
      size_t len = strnlen(name, names_end - name);
      out.counters.emplace_back(std::string(name, len),
                                __atomic_load_n(&values[i], __ATOMIC_RELAXED));
      name += len + 1;
    }
    out.rates.clear();
    const uint32_t n = std::min(__atomic_load_n(&h->rates_count, __ATOMIC_ACQUIRE),
                                h->rates_capacity);
    if (h->rates_offset != 0 && h->rates_offset % 8 == 0 &&
        h->rates_offset + uint64_t{h->rates_capacity} * sizeof(CountersRate) <= size) {
      const auto* table = reinterpret_cast<const CountersRate*>(base + h->rates_offset);
      out.rates.assign(table, table + n);
    }
  }
  munmap(map, size);
  return ok;
}

std::vector<CountersSnapshot> read_all_counters(pid_t only_pid, const char* dir) {
  std::vector<CountersSnapshot> out;
  DIR* d = opendir(dir);
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind("vrnic.", 0) != 0) continue;
    pid_t pid = static_cast<pid_t>(std::strtol(name.c_str() + 6, nullptr, 10));
    if (pid <= 0 || (only_pid && pid != only_pid)) continue;
    CountersSnapshot s;
    if (!read_counters_file(std::string(dir) + "/" + name, s) || s.pid != pid) continue;
    // Stale: the program died (and maybe another process now has its number).
    if (writer_gone(pid, s.proc_start_ticks)) continue;
    out.push_back(std::move(s));
  }
  closedir(d);
  return out;
}

bool writer_gone(pid_t pid, uint64_t start_ticks) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  if (start_ticks == 0) return false;
  const uint64_t now = process_start_ticks(pid);
  return now != 0 && now != start_ticks;
}

bool unlink_if_same(const std::string& path, int fd) {
  struct stat open_st, path_st;
  if (fstat(fd, &open_st) != 0 || stat(path.c_str(), &path_st) != 0) return false;
  if (open_st.st_dev != path_st.st_dev || open_st.st_ino != path_st.st_ino) return false;
  return unlink(path.c_str()) == 0;
}

size_t remove_stale_counters_files(const char* dir) {
  DIR* d = opendir(dir);
  if (!d) return 0;
  size_t removed = 0;
  const uid_t me = geteuid();
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    char* end = nullptr;
    if (name.rfind("vrnic.", 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + 6, &end, 10);
    if (pid <= 0 || end == name.c_str() + 6 || *end != '.') continue;  // not vrnic.<pid>.<dev>
    const std::string path = std::string(dir) + "/" + name;
    const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st;
    CountersFileHeader h{};
    // A file without a complete header is one being created (its writer lives) or one
    // whose writer died creating it: the pid alone decides then.
    const bool mine = fstat(fd, &st) == 0 && (me == 0 || st.st_uid == me);
    const bool have_header = pread(fd, &h, sizeof h, 0) == static_cast<ssize_t>(sizeof h) &&
                             std::memcmp(h.magic, kCountersMagic, sizeof h.magic) == 0 &&
                             h.pid == pid;
    if (mine && writer_gone(static_cast<pid_t>(pid), have_header ? h.proc_start_ticks : 0) &&
        unlink_if_same(path, fd))
      ++removed;
    close(fd);
  }
  closedir(d);
  return removed;
}

uint64_t process_start_ticks(pid_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/stat";
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[1024];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  // The name (field 2) may hold spaces and ')'; fields 3.. follow the last ')'.
  const char* p = std::strrchr(buf, ')');
  if (!p) return 0;
  for (int field = 2; field < 22 && p; ++field) p = std::strchr(p + 1, ' ');
  return p ? std::strtoull(p + 1, nullptr, 10) : 0;
}

CountersRate to_counters_rate(const engine::QpRate& r) {
  return {r.qpn, r.limited ? 1u : 0u, r.rate_bps, r.target_bps, r.alpha};
}

std::string format_rates(std::span<const CountersRate> rates) {
  std::string text;
  char line[160];
  for (const CountersRate& r : rates) {
    std::snprintf(line, sizeof line, "qp 0x%06x rate %.1f Mb/s target %.1f Mb/s alpha %.4f%s\n",
                  r.qpn, r.rate_bps / 1e6, r.target_bps / 1e6, r.alpha,
                  r.limited ? "" : " (released)");
    text += line;
  }
  return text;
}

std::string format_nonzero(const engine::Counters& c) {
  std::string out;
  const auto* values = reinterpret_cast<const uint64_t*>(&c);
  for (uint32_t i = 0; i < kCounterCount; ++i) {
    if (values[i] == 0) continue;
    out += kCounterNames[i];
    out += ' ';
    out += std::to_string(values[i]);
    out += '\n';
  }
  return out;
}

}  // namespace vrnic::live
