// Names of verbs enums and the IB static-rate conversions.
#include "abi/objects.h"

namespace {

template <size_t N>
const char* name_of(const char* const (&table)[N], unsigned v) {
  return v < N && table[v] ? table[v] : nullptr;
}

}  // namespace

VRNIC_EXPORT const char* ibv_node_type_str(ibv_node_type t) {
  static const char* const kNames[] = {nullptr, "InfiniBand channel adapter", "InfiniBand switch",
                                       "InfiniBand router", "iWARP NIC", "usNIC", "usNIC UDP",
                                       "unspecified"};
  const char* n = name_of(kNames, unsigned(t));
  return n ? n : "unknown";
}

VRNIC_EXPORT const char* ibv_port_state_str(ibv_port_state s) {
  static const char* const kNames[] = {"no state change (NOP)", "down", "init", "armed",
                                       "active", "active deferred"};
  const char* n = name_of(kNames, unsigned(s));
  return n ? n : "unknown";
}

VRNIC_EXPORT const char* ibv_event_type_str(ibv_event_type e) {
  static const char* const kNames[] = {
      "CQ error", "local work queue catastrophic error", "invalid request local work queue error",
      "local access violation work queue error", "communication established",
      "send queue drained", "path migrated", "path migration request error",
      "local catastrophic error", "port active", "port error", "LID change", "P_Key change",
      "SM change", "SRQ catastrophic error", "SRQ limit reached", "last WQE reached",
      "client reregistration", "GID table change", "WQ fatal"};
  const char* n = name_of(kNames, unsigned(e));
  return n ? n : "unknown";
}

VRNIC_EXPORT const char* ibv_wc_status_str(ibv_wc_status s) {
  static const char* const kNames[] = {
      "success", "local length error", "local QP operation error", "local EE context operation error",
      "local protection error", "Work Request Flushed Error", "memory bind operation error",
      "bad response error", "local access error", "remote invalid request error",
      "remote access error", "remote operation error", "transport retry counter exceeded",
      "RNR retry counter exceeded", "local RDD violation error",
      "remote invalid RD request", "aborted error", "invalid EE context number",
      "invalid EE context state", "fatal error", "response timeout error", "general error",
      "TM error", "TM rendezvous error"};
  const char* n = name_of(kNames, unsigned(s));
  return n ? n : "unknown";
}

namespace {

// Each static-rate enum value with its multiple of 2.5 Gb/s and its data rate in Mb/s.
struct Rate {
  ibv_rate rate;
  int mult;
  int mbps;
};
constexpr Rate kRates[] = {
    // SDR..QDR-era rates are whole multiples of 2.5 Gb/s; later ones (64b/66b) are not (0).
    {IBV_RATE_2_5_GBPS, 1, 2500},     {IBV_RATE_5_GBPS, 2, 5000},
    {IBV_RATE_10_GBPS, 4, 10000},     {IBV_RATE_20_GBPS, 8, 20000},
    {IBV_RATE_30_GBPS, 12, 30000},    {IBV_RATE_40_GBPS, 16, 40000},
    {IBV_RATE_60_GBPS, 24, 60000},    {IBV_RATE_80_GBPS, 32, 80000},
    {IBV_RATE_120_GBPS, 48, 120000},  {IBV_RATE_14_GBPS, 0, 14062},
    {IBV_RATE_56_GBPS, 0, 56250},     {IBV_RATE_112_GBPS, 0, 112500},
    {IBV_RATE_168_GBPS, 0, 168750},   {IBV_RATE_25_GBPS, 0, 25781},
    {IBV_RATE_100_GBPS, 0, 103125},   {IBV_RATE_200_GBPS, 0, 206250},
    {IBV_RATE_300_GBPS, 0, 309375},   {IBV_RATE_28_GBPS, 0, 28125},
    {IBV_RATE_50_GBPS, 0, 53125},     {IBV_RATE_400_GBPS, 0, 425000},
    {IBV_RATE_600_GBPS, 0, 637500},   {IBV_RATE_800_GBPS, 0, 850000},
    {IBV_RATE_1200_GBPS, 0, 1275000},
};

}  // namespace

VRNIC_EXPORT int ibv_rate_to_mult(ibv_rate rate) {
  for (const Rate& r : kRates)
    if (r.rate == rate && r.mult) return r.mult;
  return -1;
}

VRNIC_EXPORT ibv_rate mult_to_ibv_rate(int mult) {
  for (const Rate& r : kRates)
    if (r.mult && r.mult == mult) return r.rate;
  return IBV_RATE_MAX;
}

VRNIC_EXPORT int ibv_rate_to_mbps(ibv_rate rate) {
  for (const Rate& r : kRates)
    if (r.rate == rate) return r.mbps;
  return -1;
}

VRNIC_EXPORT ibv_rate mbps_to_ibv_rate(int mbps) {
  for (const Rate& r : kRates)
    if (r.mbps == mbps) return r.rate;
  return IBV_RATE_MAX;
}
