// The live runtime's messages on stderr: errors always, diagnostics when VRNIC_DEBUG is set.
#pragma once

namespace vrnic::live {

// Turns the diagnostics on or off (LiveConfig::debug; off until the device opens).
void set_debug_log(bool on);
bool debug_log_enabled();
// printf-style; "vrnic[<pid>]: <message>\n" in one write, so that the lines of processes
// sharing stderr never interleave.
void log_debug(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void log_error(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace vrnic::live
