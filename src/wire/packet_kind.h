// PacketKind: what a packet is to those who carry and schedule it (the runtime, the fabric).
#pragma once
#include <cstdint>

namespace vrnic::wire {

// The engine stamps it on every packet it sends (wire::packet_kind, from the opcode table),
// so that nobody above or beside the engine has to read opcodes: the live layer, the
// transport and the simulator's switches route on it.
enum class PacketKind : uint8_t {
  kRequest,   // SEND, RDMA WRITE, RDMA READ request, atomics: RC, UC, UD and XRC
  kResponse,  // RDMA READ response, ATOMIC ACKNOWLEDGE: data back to the requester
  kAck,       // ACK or NAK: an AETH and nothing else
  kCnp,       // congestion notification (RoCEv2 Annex A17.9.3)
  kCmMad,     // a MAD of the General Services Interface, to QP1 (connection management)
};

// Acknowledgements and CNPs: no message of their own, never ECN-capable.
constexpr bool is_control(PacketKind k) { return k == PacketKind::kAck || k == PacketKind::kCnp; }

const char* to_string(PacketKind k);

}  // namespace vrnic::wire
