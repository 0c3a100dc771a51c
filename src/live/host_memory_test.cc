// ProcessMemory: page presence of real mappings (read-write, PROT_NONE, read-only) through
// process_vm_readv/writev and through the pipe fallback, never a signal, no byte changed.
#include "live/host_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include <gtest/gtest.h>

namespace vrnic::live {
namespace {

// Three pages: [0] read-write, [1] inaccessible (PROT_NONE: reserved, so no other mapping of
// the process can land there as it could in an unmapped hole), [2] read-only.
struct Region {
  size_t ps = size_t(sysconf(_SC_PAGESIZE));
  uint8_t* base = nullptr;
  Region() {
    base = static_cast<uint8_t*>(
        mmap(nullptr, 3 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    EXPECT_NE(base, MAP_FAILED);
    std::memset(base, 0x5a, 3 * ps);
    EXPECT_EQ(mprotect(base + ps, ps, PROT_NONE), 0);
    EXPECT_EQ(mprotect(base + 2 * ps, ps, PROT_READ), 0);
  }
  ~Region() { munmap(base, 3 * ps); }
};

TEST(ProcessMemory, pages_present__reports_mapping_and_write_permission) {
  Region r;
  ProcessMemory m;
  EXPECT_TRUE(m.pages_present(r.base, r.ps, false));
  EXPECT_TRUE(m.pages_present(r.base, r.ps, true));
  EXPECT_FALSE(m.pages_present(r.base, r.ps + 1, false));  // runs into the hole
  EXPECT_FALSE(m.pages_present(r.base + r.ps + 10, 4, false));
  EXPECT_TRUE(m.pages_present(r.base + 2 * r.ps, r.ps, false));
  EXPECT_FALSE(m.pages_present(r.base + 2 * r.ps, r.ps, true));  // read-only page
  EXPECT_EQ(r.base[0], 0x5a);  // the write probe left the byte as it was
  EXPECT_TRUE(m.pages_present(r.base, 0, true));
  EXPECT_FALSE(m.pages_present(nullptr, 8, false));  // address 0 is never mapped
}

TEST(ProcessMemory, pages_present_by_pipe__gives_the_same_answers) {
  Region r;
  r.base[5] = 0x42;
  EXPECT_TRUE(ProcessMemory::pages_present_by_pipe(r.base, r.ps, false));
  EXPECT_TRUE(ProcessMemory::pages_present_by_pipe(r.base + 5, r.ps - 5, true));
  EXPECT_EQ(r.base[5], 0x42);  // written back unchanged
  EXPECT_FALSE(ProcessMemory::pages_present_by_pipe(r.base, r.ps + 1, false));
  EXPECT_FALSE(ProcessMemory::pages_present_by_pipe(r.base + r.ps + 10, 4, false));
  EXPECT_TRUE(ProcessMemory::pages_present_by_pipe(r.base + 2 * r.ps, r.ps, false));
  EXPECT_FALSE(ProcessMemory::pages_present_by_pipe(r.base + 2 * r.ps, r.ps, true));
  // The pipe stays empty after a refused write-back: the next answers are still right.
  EXPECT_TRUE(ProcessMemory::pages_present_by_pipe(r.base, 16, true));
  EXPECT_EQ(r.base[0], 0x5a);
}

}  // namespace
}  // namespace vrnic::live
