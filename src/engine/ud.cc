// UD and UC: address handles, multicast groups, the unreliable send path and UD's receive
// path. Nothing here is acknowledged or retransmitted: a sender completes its WQE when the
// last packet leaves, a receiver drops what it cannot take and counts it.
#include "engine/congestion.h"
#include "engine/ud.h"

#include <cerrno>

#include <algorithm>
#include <cstring>

#include "engine/core.h"
#include "engine/qp_transition.h"
#include "engine/responder.h"
#include "wire/opcode.h"
#include "wire/psn.h"
#include "wire/frame.h"
#include "wire/gid.h"

namespace vrnic::engine {

using wire::psn_add;

namespace {

// The 40 bytes placed before a UD payload (IBA 11.4.1.2: the GRH; RoCEv2 over IPv4 puts the
// IPv4 header in the last 20 bytes and zeroes the first 20, as RoCE NICs do and as
// rdma-core's ibv_init_ah_from_wc reads it). udp_payload_len: BTH .. ICRC inclusive.
// (The TTL / hop limit a UDP socket does not report is the sender's default, 64; the
// traffic class 0.)
void build_grh(const wire::IpUdpInfo& ip, size_t udp_payload_len, uint8_t* out) {
  std::memset(out, 0, kGrhSize);
  wire::write_ip_header(ip, 8 + udp_payload_len, 0, ip.ipv6 ? out : out + 20);
}

bool check_local_sges(Core& c, const Qp& qp, const SendWqe& w) {
  if (!w.inline_data.empty() || (w.send_flags & kSendInline)) return true;
  for (const Sge& s : w.sges)
    if (s.length != 0 && c.mem.check_local(s.lkey, qp.pd, s.addr, s.length, 0) == nullptr)
      return false;
  return true;
}

// UC opcode of packet k of n (IBA 9.2.1 table 35: the RC operation codes under transport 001).
uint8_t uc_opcode(WrOpcode op, uint32_t k, uint32_t n) {
  bool first = k == 0, last = k + 1 == n;
  uint8_t code = 0;
  switch (op) {
    case WrOpcode::kSend:
      code = first && last ? wire::kUcSendOnly : first ? wire::kUcSendFirst
             : last ? wire::kUcSendLast : wire::kUcSendMiddle;
      break;
    case WrOpcode::kSendWithImm:
      code = first && last ? wire::kUcSendOnlyImm : first ? wire::kUcSendFirst
             : last ? wire::kUcSendLastImm : wire::kUcSendMiddle;
      break;
    case WrOpcode::kRdmaWrite:
      code = first && last ? wire::kUcWriteOnly : first ? wire::kUcWriteFirst
             : last ? wire::kUcWriteLast : wire::kUcWriteMiddle;
      break;
    case WrOpcode::kRdmaWriteWithImm:
      code = first && last ? wire::kUcWriteOnlyImm : first ? wire::kUcWriteFirst
             : last ? wire::kUcWriteLastImm : wire::kUcWriteMiddle;
      break;
    default: break;
  }
  return code;
}

uint32_t ud_mtu(const Core& c) { return mtu_bytes(c.config.limits.active_mtu); }

// Retires the front send WQE (its CQE when signaled or failed).
void retire(Core& c, Qp& qp, WcStatus st) {
  SendWqe& w = qp.sq.front();
  if (w.signaled || st != WcStatus::kSuccess) {
    WorkCompletion wc;
    wc.wr_id = w.wr_id;
    wc.status = st;
    wc.opcode = w.opcode == WrOpcode::kRdmaWrite || w.opcode == WrOpcode::kRdmaWriteWithImm
                    ? WcOpcode::kRdmaWrite : WcOpcode::kSend;
    wc.vendor_err = st == WcStatus::kSuccess ? kVendorNone : kVendorLocalKey;
    wc.byte_len = w.length;
    wc.qp_num = qp.qpn;
    c.complete(qp.send_cq, wc);
  }
  qp.sq.pop_front();
  qp.req.cursor = 0;
  qp.req.cursor_pkt = 0;
}

// A send WQE failed locally: UD and UC QPs go to SQE, not ERR (IBA 10.3.1: the send queue
// stops, its other WQEs flush, the receive queue keeps working until SQE -> RTS).
void send_queue_error(Core& c, Qp& qp, WcStatus st) {
  retire(c, qp, st);
  while (!qp.sq.empty()) retire(c, qp, WcStatus::kWrFlushErr);
  qp_transition(c, qp, QpState::kSqe, QpCause::kSendQueueError);
}

// Takes `bytes` from the device's token bucket. When it holds too few, arms the QP's wait
// (req.rnr_deadline serves UD / UC as the pacing timer: the device wakes the QP through
// the same timer path) and returns false.
bool pace(Core& c, Qp& qp, uint64_t bytes) {
  const uint64_t rate = c.config.unreliable_pace_bytes_per_us;
  if (rate == 0) return true;
  UdTables& u = c.ud;
  const uint64_t now = c.now();
  if (now > u.pace_last_ns) {
    const uint64_t add = (now - u.pace_last_ns) * rate / 1000;
    u.pace_tokens = u.pace_tokens + add > kPaceBurstBytes ? kPaceBurstBytes : u.pace_tokens + add;
  }
  u.pace_last_ns = now;
  if (u.pace_tokens >= bytes) {
    u.pace_tokens -= bytes;
    return true;
  }
  uint64_t wait = (bytes - u.pace_tokens) * 1000 / rate;
  qp.req.rnr_deadline = now + (wait < 10000 ? 10000 : wait);
  c.note_qp_deadline(qp, qp.req.rnr_deadline);
  return false;
}

// Sends packet k of the front WQE; false when its memory failed the check.
bool send_packet(Core& c, Qp& qp, SendWqe& w, uint32_t k) {
  const bool ud = qp.type == QpType::kUd;
  const uint32_t mtu = ud ? ud_mtu(c) : qp.mtu();
  const uint64_t off = uint64_t{k} * mtu;
  uint64_t len = w.length > off ? w.length - off : 0;
  if (len > mtu) len = mtu;
  const bool last = k + 1 == w.npkts;
  const bool imm = w.opcode == WrOpcode::kSendWithImm || w.opcode == WrOpcode::kRdmaWriteWithImm;
  wire::Packet p;
  p.bth.pkey = 0xffff;
  p.bth.psn = qp.req.next_psn;
  p.bth.solicited = last && (w.send_flags & kSendSolicited);
  wire::IpUdpInfo ip;
  if (ud) {
    p.bth.opcode = imm ? wire::kUdSendOnlyImm : wire::kUdSendOnly;
    p.bth.dest_qp = w.remote_qpn;
    p.deth.qkey = w.remote_qkey;
    p.deth.src_qp = qp.qpn;
    ip = c.local_ip;
    ip.src_port = qp.src_port;
    ip.ipv6 = w.dst_ipv6;
    ip.dst = w.dst;
  } else {
    p.bth.opcode = uc_opcode(w.opcode, k, w.npkts);
    p.bth.dest_qp = qp.attr.dest_qp_num;
    ip = qp.ip;
  }
  const wire::OpcodeInfo& info = wire::opcode_info(p.bth.opcode);
  if (info.has(wire::kHasReth)) p.reth = {w.remote_addr, w.rkey, w.length};
  if (info.has(wire::kHasImm)) p.imm = w.imm_data;
  const uint8_t tos = data_tos(c, ud ? w.traffic_class : qp.attr.ah.traffic_class);
  std::span<uint8_t> payload = c.tx.start(p, len, ip, tos);
  if (!w.inline_data.empty()) {
    std::memcpy(payload.data(), w.inline_data.data() + off, len);
  } else if (!c.gather(qp.pd, w.sges, off, payload.data(), len)) {
    return false;  // not committed: never sent
  }
  // A multicast send reaches the QPs of this device attached to the group as well (the
  // network would loop it back to them): done here unless the port joined the group and
  // delivers the copy itself. The payload is copied before the batch may flush.
  std::vector<uint8_t> local;
  const bool mcast = ud && w.remote_qpn == kMulticastQpn &&
                     c.ud.port_joined.count(wire::gid_of_ip(ip.dst, ip.ipv6)) == 0;
  if (mcast) local.assign(payload.begin(), payload.end());
  const size_t size = c.commit_packet();
  if (!ud) cc_on_sent(c, qp, size);
  if (mcast) {
    wire::Packet in = p;
    in.payload = local;
    ud_receive_multicast(c, in, ip);
  }
  return true;
}

}  // namespace

bool is_multicast(const Gid& g) {
  if (g.is_ipv4_mapped()) return (g.raw[12] & 0xf0) == 0xe0;  // 224.0.0.0/4
  return g.raw[0] == 0xff;
}

// --- address handles and groups ------------------------------------------------------------

Ah* ud_create_ah(Core& c, Pd* pd, const AddressVector& av, Errno& err) {
  err = 0;
  // One address family per device, port 1 only (as modify_qp's AV check).
  if (av.dgid.is_ipv4_mapped() != c.config.gid.is_ipv4_mapped() || av.port_num > 1 ||
      av.sgid_index != 0) {
    err = EINVAL;
    return nullptr;
  }
  if (c.ud.ahs.size() >= c.config.limits.max_ah) {
    err = ENOMEM;
    return nullptr;
  }
  auto ah = std::make_unique<Ah>();
  ah->pd = pd;
  ah->av = av;
  ah->dst = wire::ip_of_gid(av.dgid.raw, ah->ipv6);
  ++pd->users;
  c.ud.ahs.push_back(std::move(ah));
  return c.ud.ahs.back().get();
}

Errno ud_destroy_ah(Core& c, Ah* ah) {
  auto& v = c.ud.ahs;
  auto it = std::find_if(v.begin(), v.end(), [&](auto& a) { return a.get() == ah; });
  if (it == v.end()) return EINVAL;
  --ah->pd->users;
  v.erase(it);
  return 0;
}

namespace {
// The last member left: drop the group and let the port leave it.
std::map<std::array<uint8_t, 16>, std::vector<Qp*>>::iterator leave_group(
    Core& c, std::map<std::array<uint8_t, 16>, std::vector<Qp*>>::iterator it) {
  if (c.ud.port_joined.erase(it->first)) {
    bool ipv6 = false;
    const std::array<uint8_t, 16> ip = wire::ip_of_gid(it->first, ipv6);
    c.port.set_multicast(ip, ipv6, false);
  }
  return c.ud.groups.erase(it);
}
}  // namespace

Errno ud_attach_mcast(Core& c, Qp& qp, const Gid& gid) {
  if (qp.type != QpType::kUd || !is_multicast(gid)) return EINVAL;
  const DeviceLimits& l = c.config.limits;
  auto it = c.ud.groups.find(gid.raw);
  if (it == c.ud.groups.end()) {
    if (c.ud.groups.size() >= l.max_mcast_grp) return ENOMEM;
    it = c.ud.groups.emplace(gid.raw, std::vector<Qp*>{}).first;
    // The first member: the port joins the group, so packets from other hosts / processes
    // reach it (when the transport can; otherwise only this device's own sends loop back).
    bool ipv6 = false;
    const std::array<uint8_t, 16> ip = wire::ip_of_gid(gid.raw, ipv6);
    if (c.port.set_multicast(ip, ipv6, true)) c.ud.port_joined.insert(gid.raw);
  }
  std::vector<Qp*>& members = it->second;
  // Attaching twice is harmless (the kernel's ib_attach_mcast accepts it too).
  if (std::find(members.begin(), members.end(), &qp) != members.end()) return 0;
  if (members.size() >= l.max_mcast_qp_attach) return ENOMEM;
  members.push_back(&qp);
  return 0;
}

Errno ud_detach_mcast(Core& c, Qp& qp, const Gid& gid) {
  if (qp.type != QpType::kUd || !is_multicast(gid)) return EINVAL;
  auto it = c.ud.groups.find(gid.raw);
  if (it == c.ud.groups.end()) return EINVAL;
  auto& m = it->second;
  auto at = std::find(m.begin(), m.end(), &qp);
  if (at == m.end()) return EINVAL;  // not attached (mlx5 and rxe: EINVAL)
  m.erase(at);
  if (m.empty()) leave_group(c, it);
  return 0;
}

void ud_forget_qp(Core& c, Qp& qp) {
  for (auto it = c.ud.groups.begin(); it != c.ud.groups.end();) {
    auto& m = it->second;
    m.erase(std::remove(m.begin(), m.end(), &qp), m.end());
    it = m.empty() ? leave_group(c, it) : std::next(it);
  }
}

// --- send ----------------------------------------------------------------------------------

Errno unreliable_check_post(Core& c, const Qp& qp, const SendWr& wr) {
  const bool ud = qp.type == QpType::kUd;
  switch (wr.opcode) {
    case WrOpcode::kSend:
    case WrOpcode::kSendWithImm:
      break;
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm:
      if (ud) return EINVAL;  // UD carries SENDs only (IBA 9.8; rxe: EINVAL)
      break;
    default:
      return EINVAL;  // READ, atomics, SEND_WITH_INV, ...: not UC / UD operations
  }
  if (!ud) return 0;
  const Ah* ah = wr.ah;
  if (ah == nullptr) return EINVAL;
  auto& v = c.ud.ahs;
  if (std::none_of(v.begin(), v.end(), [&](auto& a) { return a.get() == ah; })) return EINVAL;
  if (ah->pd != qp.pd) return EINVAL;  // C10-10: the AH and the QP share the PD
  uint64_t total = 0;
  for (uint32_t i = 0; i < wr.num_sge && wr.sg_list; ++i) total += wr.sg_list[i].length;
  if (total > ud_mtu(c)) return EINVAL;  // a UD message is one packet (rxe: EINVAL at post)
  return 0;
}

void unreliable_progress(Core& c, Qp& qp) {
  if (!qp.sending() || qp.req.rnr_deadline != 0) return;
  RequesterState& r = qp.req;
  const bool ud = qp.type == QpType::kUd;
  while (!qp.sq.empty()) {
    SendWqe& w = qp.sq.front();
    if (!w.started) {
      if (qp.state() == QpState::kSqd) break;  // SQD starts no new WQE
      if (!check_local_sges(c, qp, w)) return send_queue_error(c, qp, WcStatus::kLocProtErr);
      w.started = true;
      w.first_psn = r.next_psn;
      const uint32_t mtu = ud ? ud_mtu(c) : qp.mtu();
      w.npkts = w.length == 0 ? 1 : static_cast<uint32_t>((uint64_t{w.length} + mtu - 1) / mtu);
      r.cursor_pkt = 0;
    }
    {
      const uint32_t mtu = ud ? ud_mtu(c) : qp.mtu();
      const uint64_t off = uint64_t{r.cursor_pkt} * mtu;
      const uint64_t left = w.length > off ? w.length - off : 0;
      if (!pace(c, qp, (left < mtu ? left : mtu) + 64)) break;  // + headers
    }
    if (cc_pacer_holds(c, qp)) break;  // DCQCN's rate (UC; congestion.h)
    if (!send_packet(c, qp, w, r.cursor_pkt)) return send_queue_error(c, qp, WcStatus::kLocProtErr);
    // A multicast send delivered to this very QP may have moved it to ERR (a receive too
    // short): its queues, this WQE included, are flushed then.
    if (qp.state() == QpState::kErr) return;
    r.next_psn = psn_add(r.next_psn, 1);
    r.next_new_psn = r.una = r.high_psn = r.next_psn;
    if (++r.cursor_pkt >= w.npkts) retire(c, qp, WcStatus::kSuccess);
  }
  if (qp.state() == QpState::kSqd && qp.sq_drain_notify &&
      (qp.sq.empty() || !qp.sq.front().started)) {
    qp.sq_drain_notify = false;
    c.async_event(AsyncEventType::kSqDrained, qp.user_context);
  }
}

// --- receive -------------------------------------------------------------------------------

void ud_receive(Core& c, Qp& qp, const wire::Packet& p, const wire::IpUdpInfo& ip) {
  // A datagram whose Q_Key differs from the QP's is silently dropped (IBA 10.2.5).
  if (p.deth.qkey != qp.attr.qkey) {
    ++c.ctr.rx_qkey_errors;
    return;
  }
  const size_t n = p.payload.size();
  if (n > ud_mtu(c)) {
    ++c.ctr.rx_malformed;
    return;
  }
  // No receive WQE: UD has no RNR NAK, the datagram is dropped (class D, IBA 9.9.3.1).
  if (!responder_take_recv(c, qp)) {
    ++c.ctr.rx_dropped_no_recv;
    return;
  }
  WorkCompletion wc;
  wc.opcode = WcOpcode::kRecv;
  wc.src_qp = p.deth.src_qp;
  if (kGrhSize + n > qp.resp.recv.length) {
    wc.status = WcStatus::kLocLenErr;
    return responder_complete_recv(c, qp, wc, false);
  }
  uint8_t grh[kGrhSize];
  const size_t udp_len = wire::header_size(p.bth.opcode) + n + p.bth.pad_count + wire::kIcrcSize;
  build_grh(ip, udp_len, grh);
  if (!c.scatter(responder_recv_pd(qp), qp.resp.recv.sges, 0, grh, kGrhSize) ||
      !c.scatter(responder_recv_pd(qp), qp.resp.recv.sges, kGrhSize, p.payload.data(), n)) {
    wc.status = WcStatus::kLocProtErr;
    return responder_complete_recv(c, qp, wc, false);
  }
  wc.byte_len = static_cast<uint32_t>(kGrhSize + n);
  wc.wc_flags = kWcGrh;
  // RoCEv2 A17.4.5.1: a UD completion tells whether the frame was IPv4 or IPv6 (the GRH area
  // alone cannot: IPv4 leaves its first 20 bytes zero). There is no ibv_wc field for it; RoCE
  // NICs put the packet type in sl (bit 3: UDP-encapsulated, bits 2..0: 1 IPv6, 2 IPv4),
  // which is where UCX's ud transport looks for it. SL means nothing on RoCE otherwise.
  wc.sl = static_cast<uint8_t>(0x8 | (ip.ipv6 ? 0x1 : 0x2));
  if (wire::opcode_info(p.bth.opcode).has(wire::kHasImm)) {
    wc.wc_flags |= kWcWithImm;
    wc.imm_data = p.imm;
  }
  responder_complete_recv(c, qp, wc, p.bth.solicited);
}

void ud_receive_multicast(Core& c, const wire::Packet& p, const wire::IpUdpInfo& ip) {
  auto it = c.ud.groups.find(wire::gid_of_ip(ip.dst, ip.ipv6));
  if (it == c.ud.groups.end()) {
    ++c.ctr.rx_unknown_qp;
    return;
  }
  ++c.ctr.rx_mcast_packets;
  // A copy: a member in error leaves the group list untouched, but be safe against changes.
  std::vector<Qp*> members = it->second;
  for (Qp* qp : members) {
    QpState s = qp->state();
    if (s != QpState::kRtr && s != QpState::kRts && s != QpState::kSqd && s != QpState::kSqe)
      continue;
    ud_receive(c, *qp, p, ip);
  }
}

}  // namespace vrnic::engine
