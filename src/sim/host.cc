// A simulated host's device, port and verbs (host.h).
#include "sim/host.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "wire/gid.h"
#include "wire/headers.h"
#include "wire/opcode.h"

namespace vrnic::sim {

using namespace engine;

Gid gid_of_ipv4(uint32_t ipv4) {
  const std::array<uint8_t, 16> ip{static_cast<uint8_t>(ipv4 >> 24),
                                   static_cast<uint8_t>(ipv4 >> 16),
                                   static_cast<uint8_t>(ipv4 >> 8), static_cast<uint8_t>(ipv4)};
  Gid g;
  g.raw = wire::gid_of_ip(ip, false);
  return g;
}

Host::Host(Network& net, Clock& clock, uint32_t port, uint32_t ipv4, const DeviceConfig& cfg,
           uint32_t cq_entries, Payload& payload)
    : net_(net), clock_(clock), port_(port), ipv4_(ipv4), payload_(payload) {
  DeviceConfig c = cfg;
  c.gid = gid_of_ipv4(ipv4);
  dev_ = std::make_unique<Device>(c, *this, clock, *this, *this);
  pd_ = dev_->alloc_pd();
  cq_ = dev_->create_cq(cq_entries, nullptr);
  const uint32_t access = kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic;
  const auto reg = [&](void* p, uint64_t len, MrInfo& mr) {
    return dev_->reg_mr(pd_, p, len, reinterpret_cast<uint64_t>(p), access, mr) == 0;
  };
  if (!pd_ || !cq_ || !reg(payload.src.data(), payload.src.size(), src_mr_) ||
      !reg(payload.dst.data(), payload.dst.size(), dst_mr_))
    throw std::runtime_error("sim: host setup failed (PD, CQ or MR)");
}

void Host::register_words() {
  if (words_mr_.lkey != 0) return;
  const uint32_t access = kLocalWrite | kRemoteAtomic;
  if (dev_->reg_mr(pd_, words_.data(), sizeof(words_), reinterpret_cast<uint64_t>(words_.data()),
                   access, words_mr_) != 0)
    throw std::runtime_error("sim: registering a host's atomic words failed");
}

void Host::send(std::span<const WirePacket> batch) {
  for (const WirePacket& w : batch) {
    Packet p;
    p.bytes = net_.take_buffer();
    p.ip = w.ip;
    p.tos = w.tos;
    p.kind = w.kind;
    p.bytes.assign(w.data.begin(), w.data.end());
    if (int_) add_int(p, w);
    if (ev_ != nullptr) {
      pending_.push_back(std::move(p));
    } else {
      net_.enqueue(port_, std::move(p));
    }
  }
}

namespace {
uint64_t int_key(const std::array<uint8_t, 16>& ip, uint32_t qpn) {
  const uint32_t v4 = uint32_t{ip[0]} << 24 | uint32_t{ip[1]} << 16 | uint32_t{ip[2]} << 8 | ip[3];
  return uint64_t{v4} << 16 | (qpn & 0x3fff);
}
}  // namespace

void Host::note_int(const Packet& p) {
  if (p.telemetry && !wire::is_control(p.kind))
    int_seen_[int_key(p.ip.src, p.ip.src_port)] = *p.telemetry;
}

// Data packets get an empty INT header for the switches to fill; an ACK the records last
// seen from the QP it is for (its BTH's destination QP at its destination address).
void Host::add_int(Packet& p, const WirePacket& w) {
  if (p.kind == wire::PacketKind::kCnp || p.kind == wire::PacketKind::kCmMad) return;
  p.telemetry = std::make_unique<IntRecord>();
  wire::Bth bth;
  if (p.kind != wire::PacketKind::kAck || !wire::parse_bth(w.data, bth)) return;
  const auto it = int_seen_.find(int_key(w.ip.dst, bth.dest_qp));
  if (it != int_seen_.end()) *p.telemetry = it->second;
}

void Host::hold(uint64_t delay_ns) {
  if (ev_ == nullptr || pending_.empty()) return;
  uint64_t at = clock_.now_ns() + delay_ns;
  if (!held_.empty()) at = std::max(at, held_.back().first);  // the NIC keeps its order
  for (Packet& p : pending_) held_.emplace_back(at, std::move(p));
  pending_.clear();
  ev_->push(at, EventKind::kNicRelease, index_);
}

void Host::release() {
  const uint64_t now = clock_.now_ns();
  while (!held_.empty() && held_.front().first <= now) {
    Packet p = std::move(held_.front().second);
    held_.pop_front();
    if (!p.bytes.empty() && wire::opcode_info(p.bytes[0]).kind == wire::OpKind::kAtomicAck)
      atomic_acks_out_.push_back(now);
    net_.enqueue(port_, std::move(p));
  }
}

uint64_t Host::atomic_word() const { return words_[0]; }
void Host::set_atomic_word(uint64_t v) { words_[0] = v; }
uint64_t Host::fetched() const { return words_[1]; }

int Host::post_faa(Qp* qp, const Host& peer, uint64_t wr_id, uint64_t add) {
  Sge s{reinterpret_cast<uint64_t>(&words_[1]), 8, words_mr_.lkey};
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = WrOpcode::kAtomicFetchAdd;
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.send_flags = kSendSignaled;
  wr.remote_addr = reinterpret_cast<uint64_t>(&peer.words_[0]);
  wr.rkey = peer.words_mr_.rkey;
  wr.compare_add = add;
  return dev_->post_send(qp, &wr, 1, nullptr);
}

Qp* Host::create_qp(QpType type, uint32_t send_wqes, uint32_t recv_wqes) {
  QpInitAttr init;
  init.type = type;
  init.pd = pd_;
  init.send_cq = init.recv_cq = cq_;
  init.cap = {send_wqes, recv_wqes, 1, 1, 0};
  Errno err = 0;
  Qp* qp = dev_->create_qp(init, err);
  if (!qp) throw std::runtime_error("sim: create_qp failed, errno " + std::to_string(err));
  return qp;
}

namespace {

uint8_t mtu_enum(uint32_t mtu) {  // IBV_MTU_256 .. IBV_MTU_4096
  return static_cast<uint8_t>(mtu == 256 ? 1 : mtu == 512 ? 2 : mtu == 1024 ? 3
                              : mtu == 2048 ? 4 : 5);
}

}  // namespace

int Host::connect(Qp* qp, QpType type, uint32_t peer_qpn, uint32_t peer_ipv4,
                  const PathParams& path) {
  const bool rc = type == QpType::kRc, ud = type == QpType::kUd;
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.port_num = 1;
  a.qkey = kUdQkey;
  a.qp_access_flags = rc ? kRemoteWrite | kRemoteRead | kRemoteAtomic : kRemoteWrite;
  if (int e = dev_->modify_qp(qp, a, kAttrState | kAttrPkeyIndex | kAttrPort |
                                         (ud ? kAttrQkey : kAttrAccessFlags)))
    return e;
  a.qp_state = QpState::kRtr;
  a.path_mtu = mtu_enum(path.mtu);
  a.dest_qp_num = peer_qpn;
  a.ah.dgid = gid_of_ipv4(peer_ipv4);
  a.ah.traffic_class = path.traffic_class;
  a.max_dest_rd_atomic = 16;
  const uint32_t rtr = ud   ? kAttrState
                       : rc ? kAttrState | kAttrAv | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn |
                                  kAttrMaxDestRdAtomic | kAttrMinRnrTimer
                            : kAttrState | kAttrAv | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn;
  if (int e = dev_->modify_qp(qp, a, rtr)) return e;
  a.qp_state = QpState::kRts;
  a.timeout = path.ack_timeout;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 16;
  return dev_->modify_qp(qp, a, rc ? kAttrState | kAttrSqPsn | kAttrTimeout | kAttrRetryCnt |
                                         kAttrRnrRetry | kAttrMaxQpRdAtomic
                                   : kAttrState | kAttrSqPsn);
}

Ah* Host::ah_for(uint32_t ipv4, uint8_t traffic_class) {
  Ah*& ah = ahs_[uint64_t{ipv4} << 8 | traffic_class];
  if (ah == nullptr) {
    AddressVector av;
    av.dgid = gid_of_ipv4(ipv4);
    av.traffic_class = traffic_class;
    Errno err = 0;
    ah = dev_->create_ah(pd_, av, err);
    if (!ah) throw std::runtime_error("sim: create_ah failed, errno " + std::to_string(err));
  }
  return ah;
}

int Host::post(Qp* qp, QpType type, Verb verb, const Host& peer, uint32_t peer_qpn,
               uint64_t wr_id, uint32_t bytes, bool imm, const PathParams& path) {
  Sge s{reinterpret_cast<uint64_t>(payload_.src.data()), bytes, src_mr_.lkey};
  SendWr wr;
  wr.wr_id = wr_id;
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.send_flags = kSendSignaled;
  wr.remote_addr = reinterpret_cast<uint64_t>(peer.payload_.dst.data());
  wr.rkey = peer.dst_mr_.rkey;
  if (verb == Verb::kWrite) {
    wr.opcode = imm ? WrOpcode::kRdmaWriteWithImm : WrOpcode::kRdmaWrite;
  } else if (verb == Verb::kRead) {
    wr.opcode = WrOpcode::kRdmaRead;
  } else {
    wr.opcode = WrOpcode::kSend;
  }
  if (type == QpType::kUd) {
    wr.ah = ah_for(peer.ipv4_, path.traffic_class);
    wr.remote_qpn = peer_qpn;
    wr.remote_qkey = kUdQkey;
  }
  return dev_->post_send(qp, &wr, 1, nullptr);
}

int Host::post_recv(Qp* qp, uint64_t wr_id, uint32_t bytes, bool ud) {
  Sge s{reinterpret_cast<uint64_t>(payload_.dst.data()), bytes + (ud ? kGrhBytes : 0),
        dst_mr_.lkey};
  RecvWr wr;
  wr.wr_id = wr_id;
  wr.sg_list = &s;
  wr.num_sge = 1;
  return dev_->post_recv(qp, &wr, 1, nullptr);
}

}  // namespace vrnic::sim
