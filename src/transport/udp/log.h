// Diagnostics of the live runtime: VRNIC_DEBUG=1 turns on debug messages on stderr.
#pragma once

namespace vrnic::transport {

bool debug_enabled();
// printf-style; writes "vrnic: <message>\n" to stderr when debug_enabled().
void debug_log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// Always written: errors the user must see (e.g. no free address).
void error_log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace vrnic::transport
