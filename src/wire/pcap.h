// The classic pcap capture format (LINKTYPE_ETHERNET) as bytes, and the 802.1Qbb PFC frame:
// what a capture holds, built without any I/O (the writers are above).
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace vrnic::wire {

inline constexpr uint32_t kPcapMagicMicro = 0xa1b2c3d4;  // timestamps in microseconds
inline constexpr uint32_t kPcapMagicNano = 0xa1b23c4d;   // timestamps in nanoseconds
inline constexpr uint32_t kPcapSnapLen = 262144;

// The 24-byte global header, host byte order (readers detect it by the magic).
std::vector<uint8_t> pcap_header(bool nanoseconds);

// Appends one record: seconds, the fraction (micro- or nanoseconds, as the header says),
// then the frame, cut at kPcapSnapLen (the original length kept).
void append_pcap_record(std::vector<uint8_t>& out, uint32_t sec, uint32_t frac,
                        std::span<const uint8_t> frame);

// A PFC frame (802.1Qbb MAC control: to 01:80:C2:00:00:01, EtherType 0x8808, opcode
// 0x0101) from `src_mac`, enabling priority `prio` with `quanta` (0: XON), padded to the
// 60-byte minimum (no FCS, as captures hold frames).
std::vector<uint8_t> build_pfc_frame(const std::array<uint8_t, 6>& src_mac, uint8_t prio,
                                     uint16_t quanta);

}  // namespace vrnic::wire
