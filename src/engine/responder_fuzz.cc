// libFuzzer harness for the engine's receive path: arbitrary packets (given a correct ICRC
// so they get past the check) hit a connected RC QP, or with an XRC opcode an XRC target QP
// whose domain has XRC SRQ 1, over guarded memory; the engine must never crash, never write
// outside the registered region, never read uninitialised state. Input: a sequence of
// [len:1][bytes:len] records.
#include <cstring>
#include <vector>

#include "engine/device.h"
#include "engine/test_host_memory.h"
#include "wire/icrc.h"

namespace {

using namespace vrnic::engine;

struct NullPort : PacketPort {
  void send(std::span<const WirePacket>) override {}
  uint16_t source_port_for(uint32_t) override { return 0xC001; }
};
struct FixedClock : Clock {
  uint64_t t = 1'000'000;
  uint64_t now_ns() const override { return t; }
};
struct NullSink : EventSink {
  void on_cq_event(Cq*, void*) override {}
  void on_async_event(const AsyncEvent&) override {}
};

// Connects qp (RC or an XRC target) to 10.0.0.1, QP 0x77, PSN 0.
void connect(Device& dev, Qp* qp) {
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.port_num = 1;
  a.qp_access_flags = kRemoteWrite | kRemoteRead | kRemoteAtomic;
  dev.modify_qp(qp, a, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags);
  a.qp_state = QpState::kRtr;
  a.path_mtu = 1;
  a.dest_qp_num = 0x77;
  a.rq_psn = 0;
  a.max_dest_rd_atomic = 4;
  a.ah.dgid.raw = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1};
  dev.modify_qp(qp, a, kAttrState | kAttrAv | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn |
                           kAttrMaxDestRdAtomic | kAttrMinRnrTimer);
  a.qp_state = QpState::kRts;
  a.timeout = 1;
  a.max_rd_atomic = 4;
  dev.modify_qp(qp, a, kAttrState | kAttrSqPsn | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry |
                           kAttrMaxQpRdAtomic);
}

// An XRC target QP, connected, and an XRC SRQ of its domain holding one receive WQE.
Qp* xrc_target(Device& dev, Pd* pd, Cq* cq, const Sge& sg) {
  QpInitAttr init;
  init.type = QpType::kXrcTgt;
  init.xrcd = dev.open_xrcd();
  Errno err;
  Qp* qp = dev.create_qp(init, err);
  Device::SrqAttr sa{8, 1, 0};
  Srq* srq = dev.create_xrc_srq(pd, init.xrcd, cq, sa, nullptr, err);
  RecvWr rw{2, &sg, 1};
  size_t bad;
  dev.post_srq_recv(srq, &rw, 1, &bad);
  connect(dev, qp);
  return qp;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  NullPort port;
  FixedClock clock;
  NullSink sink;
  testing::FakeHostMemory memory;  // no on-demand region: never asked
  DeviceConfig cfg;
  cfg.gid.raw = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2};
  Device dev(cfg, port, clock, memory, sink);
  Pd* pd = dev.alloc_pd();
  uint32_t cqe = 64;
  Cq* cq = dev.create_cq(cqe, nullptr);
  QpInitAttr init;
  init.pd = pd;
  init.send_cq = init.recv_cq = cq;
  init.cap = {16, 16, 2, 2, 0};
  Errno err;
  Qp* qp = dev.create_qp(init, err);
  // Guard bytes around the region: they must stay untouched.
  std::vector<uint8_t> mem(4096 + 128, 0x5A);
  MrInfo mr;
  dev.reg_mr(pd, mem.data() + 64, 4096, 0x1000, kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic, mr);
  connect(dev, qp);
  Sge sg{reinterpret_cast<uint64_t>(mem.data() + 64), 512, mr.lkey};
  RecvWr rw{1, &sg, 1};
  size_t bad;
  dev.post_recv(qp, &rw, 1, &bad);
  Qp* tgt = xrc_target(dev, pd, cq, sg);

  vrnic::wire::IpUdpInfo ip;
  ip.src = {10, 0, 0, 1};
  ip.dst = {10, 0, 0, 2};
  size_t at = 0;
  std::vector<uint8_t> pkt;
  while (at < size) {
    size_t len = data[at++];
    if (len > size - at) len = size - at;
    pkt.assign(data + at, data + at + len);
    at += len;
    if (pkt.size() >= 4 + 3) {
      // Point the BTH at the QP (XRC opcodes: the target) and seal it with a correct ICRC.
      uint32_t qpn = dev.qp_num(pkt[0] >= 0xa0 && pkt[0] < 0xc0 ? tgt : qp);
      if (pkt.size() >= 8) {
        pkt[5] = static_cast<uint8_t>(qpn >> 16);
        pkt[6] = static_cast<uint8_t>(qpn >> 8);
        pkt[7] = static_cast<uint8_t>(qpn);
      }
      pkt.resize(pkt.size() + 4);
      uint32_t icrc = vrnic::wire::compute_icrc(ip, {pkt.data(), pkt.size() - 4});
      vrnic::wire::store_icrc(icrc, pkt.data() + pkt.size() - 4);
    }
    WirePacket w;
    w.ip = ip;
    w.data = pkt;
    dev.receive({&w, 1});
    clock.t += 100'000;
    if (dev.next_timer_ns() <= clock.t) dev.on_timer();
  }
  for (size_t i = 0; i < 64; ++i)
    if (mem[i] != 0x5A || mem[mem.size() - 1 - i] != 0x5A) __builtin_trap();
  WorkCompletion wc[64];
  dev.poll_cq(cq, wc, 64);
  return 0;
}
