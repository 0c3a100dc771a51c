// QP1: GSI datagrams handed to the connection manager, and its MADs sent as UD SEND_ONLY packets.
#include "engine/gsi.h"

#include <cstring>

#include "wire/cm_mad.h"
#include "wire/opcode.h"

namespace vrnic::engine {

void gsi_receive(Core& c, const wire::Packet& p, const wire::IpUdpInfo& ip) {
  const std::span<const uint8_t> mad = wire::cm::gsi_mad(p);
  if (mad.empty()) {
    // QP1 takes only UD SENDs with the GSI Q_Key (IBA 13.5.1); the rest is malformed here.
    ++(p.deth.qkey != wire::cm::kGsiQkey ? c.ctr.rx_qkey_errors : c.ctr.rx_malformed);
    return;
  }
  if (!c.events.on_gsi_mad(ip, mad)) {
    ++c.ctr.rx_unknown_qp;
    return;
  }
  ++c.ctr.rx_gsi;
}

void gsi_send(Core& c, const wire::IpUdpInfo& to, std::span<const uint8_t, 256> mad) {
  wire::Packet p;
  p.bth.opcode = wire::kUdSendOnly;
  p.bth.mig_req = false;
  p.bth.dest_qp = wire::cm::kGsiQpn;
  p.bth.psn = c.gsi_psn++ & 0xffffff;
  p.deth.qkey = wire::cm::kGsiQkey;
  p.deth.src_qp = wire::cm::kGsiQpn;
  wire::IpUdpInfo ip = c.local_ip;
  ip.ipv6 = to.ipv6;
  ip.dst = to.dst;
  ip.src_port = c.port.source_port_for(wire::cm::kGsiQpn);
  std::span<uint8_t> payload = c.tx.start(p, mad.size(), ip);
  std::memcpy(payload.data(), mad.data(), mad.size());
  c.tx.commit(c.port, c.ctr);
  ++c.ctr.tx_gsi;
}

}  // namespace vrnic::engine
