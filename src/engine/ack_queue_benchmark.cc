// ACK queue lookup cost: the grouped two-level lookup against a linear scan, at 16, 256
// and 1024 entries, for PSNs spread over the whole queue.
#include <benchmark/benchmark.h>

#include "engine/ack_queue.h"

namespace vrnic::engine {
namespace {

AckQueue filled(uint32_t n) {
  AckQueue q(n);
  for (uint32_t i = 0; i < n; ++i) {
    AckEntry e;
    e.kind = AckEntry::Kind::kAtomic;
    e.psn = (0xFFFF00 + 2 * i) & 0xffffff;  // straddles the 2^24 wrap
    e.orig = i;
    q.push(e);
  }
  return q;
}

void BM_AckQueueGrouped(benchmark::State& state) {
  uint32_t n = static_cast<uint32_t>(state.range(0));
  AckQueue q = filled(n);
  uint32_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(q.find((0xFFFF00 + 2 * (i % n)) & 0xffffff));
    i += 7;
  }
}

void BM_AckQueueLinear(benchmark::State& state) {
  uint32_t n = static_cast<uint32_t>(state.range(0));
  AckQueue q = filled(n);
  uint32_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(q.find_linear((0xFFFF00 + 2 * (i % n)) & 0xffffff));
    i += 7;
  }
}

BENCHMARK(BM_AckQueueGrouped)->Arg(16)->Arg(256)->Arg(1024);
BENCHMARK(BM_AckQueueLinear)->Arg(16)->Arg(256)->Arg(1024);

}  // namespace
}  // namespace vrnic::engine

BENCHMARK_MAIN();
