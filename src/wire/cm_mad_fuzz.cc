// libFuzzer harness of the CM MAD parser: never reads out of bounds, and what it accepts rebuilds to a MAD that parses the same.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "wire/cm_mad.h"

using namespace vrnic::wire::cm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A heap copy of exactly `size` bytes, so ASan flags any read past the span.
  const std::vector<uint8_t> buf(data, data + size);
  Mad mad;
  if (parse_mad(buf, mad) != MadError::kOk) return 0;
  uint8_t rebuilt[kMadSize];
  build_mad(mad, rebuilt);
  Mad again;
  if (parse_mad({rebuilt, kMadSize}, again) != MadError::kOk) abort();
  uint8_t twice[kMadSize];
  build_mad(again, twice);
  if (std::memcmp(rebuilt, twice, kMadSize) != 0) abort();  // parse . build is a fixed point
  IpCmHeader h;
  if (const auto* req = std::get_if<Req>(&mad.msg)) (void)parse_ip_cm_header(req->private_data, h);
  return 0;
}
