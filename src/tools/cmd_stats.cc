// `vrnic stats`: the counters of running vrnic programs, read from their /dev/shm files.
#include <cstdio>

#include "live/counters_file.h"
#include "tools/commands.h"

namespace vrnic::tools {

int cmd_stats(const StatsOptions& o) {
  auto all = live::read_all_counters(o.pid);
  if (all.empty()) {
    if (o.pid)
      std::fprintf(stderr, "vrnic stats: no running vrnic program with pid %d\n", o.pid);
    else
      std::fprintf(stderr, "vrnic stats: no running vrnic program\n");
    return 1;
  }
  bool first = true;
  for (const auto& s : all) {
    if (!first) std::printf("\n");
    first = false;
    std::printf("# pid %d %s  %s %s\n", static_cast<int>(s.pid), s.program.c_str(),
                s.device.c_str(), s.ip.c_str());
    for (const auto& [name, value] : s.counters)
      if (o.all || value != 0) std::printf("%s %llu\n", name.c_str(), (unsigned long long)value);
    // DCQCN: the rate of each QP that has had a CNP (docs/live.md "Congestion control").
    std::fputs(live::format_rates(s.rates).c_str(), stdout);
  }
  return 0;
}

}  // namespace vrnic::tools
