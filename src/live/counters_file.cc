// CountersFile: create / map / unlink of the shared counters file, and its readers.
#include "live/counters_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
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
  const size_t names_offset = counters_offset + sizeof(engine::Counters);
  const size_t size = names_offset + names.size();

  std::string path = counters_path(getpid(), device);
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
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
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  h->start_realtime_ns = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
  copy_field(h->device, sizeof h->device, device);
  copy_field(h->ip, sizeof h->ip, ip);
  copy_field(h->program, sizeof h->program, program);
  std::memcpy(static_cast<char*>(map) + names_offset, names.data(), names.size());
  counters_ = new (static_cast<char*>(map) + counters_offset) engine::Counters();
  // The magic last: a reader that sees it sees a complete header.
  __atomic_thread_fence(__ATOMIC_RELEASE);
  std::memcpy(h->magic, kCountersMagic, sizeof kCountersMagic);
  map_ = map;
  size_ = size;
  path_ = std::move(path);
  return 0;
}

void CountersFile::unlink_file() {
  if (!path_.empty()) {
    unlink(path_.c_str());
    path_.clear();
  }
}

void CountersFile::remove() {
  if (map_) {
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
  bool ok = std::memcmp(h->magic, kCountersMagic, sizeof kCountersMagic) == 0 &&
            h->version == kCountersVersion &&
            h->counters_offset + uint64_t{h->counter_count} * 8 <= size &&
            h->names_offset + uint64_t{h->names_bytes} <= size && h->counters_offset % 8 == 0;
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
    const char* names_end = name + h->names_bytes;
    for (uint32_t i = 0; i < h->counter_count && name < names_end; ++i) {
      size_t len = strnlen(name, names_end - name);
      out.counters.emplace_back(std::string(name, len),
                                __atomic_load_n(&values[i], __ATOMIC_RELAXED));
      name += len + 1;
    }
  }
  munmap(map, size);
  return ok;
}

std::vector<CountersSnapshot> read_all_counters(pid_t only_pid) {
  std::vector<CountersSnapshot> out;
  DIR* d = opendir(kCountersDir);
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind("vrnic.", 0) != 0) continue;
    pid_t pid = static_cast<pid_t>(std::strtol(name.c_str() + 6, nullptr, 10));
    if (pid <= 0 || (only_pid && pid != only_pid)) continue;
    if (kill(pid, 0) != 0 && errno == ESRCH) continue;  // stale: the program died
    CountersSnapshot s;
    if (!read_counters_file(std::string(kCountersDir) + "/" + name, s) || s.pid != pid) continue;
    // The pid was reused: the file's writer died and another process now has its number.
    if (s.proc_start_ticks && s.proc_start_ticks != process_start_ticks(pid)) continue;
    out.push_back(std::move(s));
  }
  closedir(d);
  return out;
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
