// Unreliable transports: address handles and multicast groups (UD), the send path of UD and
// UC QPs (no ACK, no retransmission: a WQE completes when its last packet is sent) and UD's
// receive path (Q_Key check and GRH placement); UC's receive side is the responder's.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "engine/types.h"
#include "wire/headers.h"
#include "wire/icrc.h"

namespace vrnic::engine {

class Core;
class Qp;

// An address handle: the destination of UD sends, resolved once when it is created.
class Ah {
 public:
  Pd* pd = nullptr;
  AddressVector av;
  bool ipv6 = false;
  std::array<uint8_t, 16> dst{};  // IP address (IPv4 in the first four bytes)
};

// BTH destination QPN of multicast packets (IBA 10.5.2.3: the permissive QPN 0xFFFFFF).
inline constexpr uint32_t kMulticastQpn = 0xffffff;
// The GRH (or the IPv4 header that stands for it) at the start of every UD receive buffer.
inline constexpr uint32_t kGrhSize = 40;
// A WR Q_Key with this bit set asks for the QP's own Q_Key (IBA 10.2.5, C10-15).
inline constexpr uint32_t kPrivilegedQkeyBit = 0x80000000u;

// A multicast GID: ff00::/8, or an IPv4-mapped 224.0.0.0/4 address (RoCEv2 over IPv4).
bool is_multicast(const Gid& g);

// Pacing of unreliable traffic. Nothing tells a UD / UC sender that the receiver's socket
// buffer overflowed (RoCE relies on a lossless fabric; a UDP receive queue is not one), so
// the device sends UD and UC packets through a token bucket: bursts up to kPaceBurstBytes,
// kPaceBytesPerUs on average (about 1 GB/s, below what one receiving vrnic process drains;
// DeviceConfig::unreliable_pace_bytes_per_us, whose default this is).
inline constexpr uint64_t kPaceBytesPerUs = 1000;
inline constexpr uint64_t kPaceBurstBytes = 2u << 20;

// The device's UD state: its address handles, multicast groups (MGID -> attached QPs) and
// the unreliable-traffic token bucket.
struct UdTables {
  std::vector<std::unique_ptr<Ah>> ahs;
  std::map<std::array<uint8_t, 16>, std::vector<Qp*>> groups;
  std::set<std::array<uint8_t, 16>> port_joined;  // groups the port delivers itself
  uint64_t pace_tokens = kPaceBurstBytes;
  uint64_t pace_last_ns = 0;
};

// Address handles. create checks the AV (family of the device, port 1); the PD is checked
// by the caller.
Ah* ud_create_ah(Core& c, Pd* pd, const AddressVector& av, Errno& err);
Errno ud_destroy_ah(Core& c, Ah* ah);
// Multicast attach / detach (UD QPs, multicast GIDs only: EINVAL otherwise).
Errno ud_attach_mcast(Core& c, Qp& qp, const Gid& gid);
Errno ud_detach_mcast(Core& c, Qp& qp, const Gid& gid);
// A QP going away leaves every group.
void ud_forget_qp(Core& c, Qp& qp);

// Post-time checks of a WR on a UD or UC QP (opcode allowed for the transport, UD message
// within the port MTU, an AH of this device). 0 or EINVAL.
Errno unreliable_check_post(Core& c, const Qp& qp, const SendWr& wr);
// Sends the queued WQEs of a UD or UC QP and completes each when its last packet is out.
void unreliable_progress(Core& c, Qp& qp);

// A UD packet for this QP (state checked by the caller). ip: the packet's addresses.
void ud_receive(Core& c, Qp& qp, const wire::Packet& p, const wire::IpUdpInfo& ip);
// A UD packet to the multicast QPN: delivered to every QP attached to its destination group.
void ud_receive_multicast(Core& c, const wire::Packet& p, const wire::IpUdpInfo& ip);

}  // namespace vrnic::engine
