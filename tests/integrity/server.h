// Entry points of the integrity test's two roles.
#pragma once
#include <cstdint>
#include <string>

namespace vrnic_test {
int run_server(uint16_t port, int sessions, int atomic_sessions);
int run_client(const std::string& host, uint16_t port, const std::string& mode, int threads,
               int iterations);
}  // namespace vrnic_test
