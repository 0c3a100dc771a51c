// The live HostMemory (engine/ports.h): asks the kernel whether pages of this process are
// present, touching them as the device's page fault would, for on-demand regions.
#pragma once
#include <cstdint>

#include "engine/ports.h"

namespace vrnic::live {

class ProcessMemory final : public engine::HostMemory {
 public:
  // One byte per page through process_vm_readv / process_vm_writev on this process (which
  // faults the pages in and fails, without a signal, on a page that is not mapped readable
  // or writable); through a pipe where a seccomp policy refuses those calls.
  bool pages_present(const uint8_t* p, uint64_t len, bool write) override;
  // The pipe way on its own: write(2) one byte from each page, read(2) it back into it.
  static bool pages_present_by_pipe(const uint8_t* p, uint64_t len, bool write);
};

}  // namespace vrnic::live
