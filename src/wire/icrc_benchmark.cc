// Cost of the ICRC: compute, verify on the fast path, and verify through the IPv4 ID solver.
#include <benchmark/benchmark.h>

#include <vector>

#include "wire/headers.h"
#include "wire/icrc.h"
#include "wire/opcode.h"

namespace vrnic::wire {
namespace {

IpUdpInfo receiver() {
  IpUdpInfo ip;
  ip.src = {10, 0, 0, 1};
  ip.dst = {10, 0, 0, 2};
  ip.src_port = 0xc011;
  return ip;
}

// A SEND Only of `n` payload bytes whose ICRC was computed with the sender's IPv4 ID.
std::vector<uint8_t> packet(size_t n, uint16_t sender_id) {
  Packet p;
  p.bth.opcode = kRcSendOnly;
  p.bth.pad_count = pad_for(n);
  std::vector<uint8_t> u(kBthSize + n + p.bth.pad_count + kIcrcSize, 0x5a);
  write_headers(p, u.data());
  IpUdpInfo sender = receiver();
  sender.ip_id = sender_id;
  const size_t t = u.size() - kIcrcSize;
  store_icrc(compute_icrc(sender, std::span(u).first(t)), u.data() + t);
  return u;
}

void BM_compute_icrc(benchmark::State& state) {
  const auto u = packet(static_cast<size_t>(state.range(0)), 0);
  const auto t = std::span(u).first(u.size() - kIcrcSize);
  const IpUdpInfo ip = receiver();
  for (auto _ : state) benchmark::DoNotOptimize(compute_icrc(ip, t));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * u.size()));
}
BENCHMARK(BM_compute_icrc)->Arg(0)->Arg(64)->Arg(1024)->Arg(4096);

// The common case: the peer sent IP ID 0 (vrnic, Linux with DF) and the first check matches.
void BM_verify_fast_path(benchmark::State& state) {
  const auto u = packet(static_cast<size_t>(state.range(0)), 0);
  const IpUdpInfo ip = receiver();
  for (auto _ : state) {
    if (verify_icrc(ip, u) != IcrcVerdict::kOk) state.SkipWithError("not ok");
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * u.size()));
}
BENCHMARK(BM_verify_fast_path)->Arg(0)->Arg(64)->Arg(1024)->Arg(4096);

// A peer NIC with its own IP ID counter: the direct check fails, the solver finds the ID.
void BM_verify_recovered_id(benchmark::State& state) {
  const auto u = packet(static_cast<size_t>(state.range(0)), 0x718c);
  const IpUdpInfo ip = receiver();
  uint16_t id = 0;
  for (auto _ : state) {
    if (verify_icrc(ip, u, &id) != IcrcVerdict::kOkRecoveredIpId) state.SkipWithError("no id");
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * u.size()));
}
BENCHMARK(BM_verify_recovered_id)->Arg(0)->Arg(64)->Arg(1024)->Arg(4096);

// The same, with `lengths` lengths in turn (range(1)): two, as a stream of messages
// interleaves full packets and each message's last, find their bases built; sixteen, more
// than a thread keeps, rebuild the basis (one crc32_combine_gen and 32 GF(2) multiplies)
// for every packet: the worst case.
void BM_verify_recovered_id_length_changes(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<std::vector<uint8_t>> packets;
  for (int64_t i = 0; i < state.range(1); ++i) packets.push_back(packet(n + 4 * size_t(i), 0x718c));
  const IpUdpInfo ip = receiver();
  uint16_t id = 0;
  size_t next = 0;
  for (auto _ : state) {
    if (verify_icrc(ip, packets[next], &id) != IcrcVerdict::kOkRecoveredIpId) {
      state.SkipWithError("no id");
    }
    next = (next + 1) % packets.size();
  }
}
BENCHMARK(BM_verify_recovered_id_length_changes)->ArgsProduct({{0, 64, 1024, 4096}, {2, 16}});

// A corrupted packet: both checks run and it is rejected.
void BM_verify_corrupted(benchmark::State& state) {
  auto u = packet(static_cast<size_t>(state.range(0)), 0);
  u[2] ^= 1;
  const IpUdpInfo ip = receiver();
  for (auto _ : state) {
    if (verify_icrc(ip, u) != IcrcVerdict::kBad) state.SkipWithError("accepted");
  }
}
BENCHMARK(BM_verify_corrupted)->Arg(64)->Arg(4096);

void BM_parse_packet(benchmark::State& state) {
  const auto u = packet(1024, 0);
  Packet p;
  for (auto _ : state) benchmark::DoNotOptimize(parse_packet(u, p));
}
BENCHMARK(BM_parse_packet);

}  // namespace
}  // namespace vrnic::wire

BENCHMARK_MAIN();
