// QP1, the General Services Interface: MADs in UD datagrams between the wire and the connection manager.
#pragma once
#include <cstdint>
#include <span>

#include "engine/core.h"
#include "wire/headers.h"
#include "wire/icrc.h"

namespace vrnic::engine {

// A packet to QP1: handed to EventSink::on_gsi_mad if it is a GSI datagram, else dropped
// and counted.
void gsi_receive(Core& c, const wire::Packet& p, const wire::IpUdpInfo& ip);
// Queues a MAD from QP1 to the GSI at to.dst (to.ipv6); the caller flushes the batch.
void gsi_send(Core& c, const wire::IpUdpInfo& to, std::span<const uint8_t, 256> mad);

}  // namespace vrnic::engine
