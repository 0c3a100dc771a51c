// log_debug / log_error: one formatted line per call, written with a single write(2).
#include "live/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace vrnic::live {
namespace {

std::atomic<bool> g_debug{false};

void vlog(const char* fmt, va_list ap) {
  char buf[512];
  int n = std::snprintf(buf, sizeof buf, "vrnic[%d]: ", static_cast<int>(getpid()));
  if (n < 0) return;
  int m = std::vsnprintf(buf + n, sizeof buf - n - 1, fmt, ap);
  if (m < 0) return;
  size_t len = std::strlen(buf);
  buf[len++] = '\n';
  ssize_t ignored = write(STDERR_FILENO, buf, len);
  (void)ignored;
}

}  // namespace

void set_debug_log(bool on) { g_debug.store(on, std::memory_order_relaxed); }
bool debug_log_enabled() { return g_debug.load(std::memory_order_relaxed); }

void log_debug(const char* fmt, ...) {
  if (!debug_log_enabled()) return;
  va_list ap;
  va_start(ap, fmt);
  vlog(fmt, ap);
  va_end(ap);
}

void log_error(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlog(fmt, ap);
  va_end(ap);
}

}  // namespace vrnic::live
