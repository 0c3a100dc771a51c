// debug_log / error_log: one formatted line per call, written with a single write(2).
#include "transport/udp/log.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace vrnic::transport {
namespace {

void vlog(const char* fmt, va_list ap) {
  char buf[512];
  int n = std::snprintf(buf, sizeof buf, "vrnic[%d]: ", static_cast<int>(getpid()));
  if (n < 0) return;
  int m = std::vsnprintf(buf + n, sizeof buf - n - 1, fmt, ap);
  if (m < 0) return;
  size_t len = std::strlen(buf);
  buf[len++] = '\n';
  // One write so that lines of concurrent processes sharing stderr do not interleave.
  ssize_t ignored = write(STDERR_FILENO, buf, len);
  (void)ignored;
}

}  // namespace

bool debug_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("VRNIC_DEBUG");
    return v && *v && std::strcmp(v, "0") != 0;
  }();
  return enabled;
}

void debug_log(const char* fmt, ...) {
  if (!debug_enabled()) return;
  va_list ap;
  va_start(ap, fmt);
  vlog(fmt, ap);
  va_end(ap);
}

void error_log(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlog(fmt, ap);
  va_end(ap);
}

}  // namespace vrnic::transport
