// Device, port, GID and P_Key queries: what the device advertises, from the engine's limits.
#include <endian.h>
#include <net/if.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "abi/identity.h"
#include "abi/objects.h"
#include "abi/ops.h"
#include "live/address.h"
#include "live/live_nic.h"

using namespace vrnic::abi;

#ifdef ibv_query_port
#undef ibv_query_port
#endif

namespace {

constexpr uint8_t kPort = 1;
constexpr int kGidTableLen = 1;  // one RoCEv2 GID: the device address
constexpr uint16_t kDefaultPkey = 0xffff;  // the default partition, full membership
constexpr uint64_t kDeviceAtomicWrite = 1ull << 40;  // IB_UVERBS_DEVICE_ATOMIC_WRITE
// ibv_gid_type_sysfs (driver.h, not installed): 0 RoCE v1, 1 RoCE v2.
constexpr int kGidTypeSysfsRoceV2 = 1;

vrnic::live::LiveNic* nic_of(ibv_context* c) { return to_context(c)->nic; }

vrnic::engine::DeviceLimits limits_of(ibv_context* c) {
  return nic_of(c)->locked([](vrnic::engine::Device& d) { return d.config().limits; });
}

void fill_device_attr(ibv_context* context, ibv_device_attr& a) {
  const vrnic::engine::DeviceLimits l = limits_of(context);
  const uint64_t guid = guid_from_gid(nic_of(context)->gid().raw.data());
  std::memset(&a, 0, sizeof(a));
  std::snprintf(a.fw_ver, sizeof(a.fw_ver), "%s", VRNIC_VERSION);
  a.node_guid = guid;
  a.sys_image_guid = guid;
  a.max_mr_size = l.max_mr_size;
  a.page_size_cap = 0xfffff000;  // any power of two from 4 KiB
  a.vendor_id = kVendorId;
  a.vendor_part_id = kVendorPartId;
  a.hw_ver = kHwVer;
  a.max_qp = int(l.max_qp);
  a.max_qp_wr = int(l.max_qp_wr);
  // The responder answers a SEND that finds no receive WQE with an RNR NAK.
  a.device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SYS_IMAGE_GUID |
                       IBV_DEVICE_CHANGE_PHY_PORT;
  // Memory windows: type 1 and type 2B (bound to the QP that binds them).
  a.device_cap_flags |= IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B;
  a.device_cap_flags |= IBV_DEVICE_XRC;  // XRC domains, SRQs and QPs (xrc.cc)
  a.max_mw = int(l.max_mw);
  a.max_sge = int(l.max_sge);
  a.max_sge_rd = int(l.max_sge);
  a.max_cq = int(l.max_cq);
  a.max_cqe = int(l.max_cqe);
  a.max_mr = int(l.max_mr);
  a.max_pd = int(l.max_pd);
  a.max_qp_rd_atom = int(l.max_qp_rd_atom);
  a.max_res_rd_atom = int(l.max_res_rd_atom);
  a.max_qp_init_rd_atom = int(l.max_qp_init_rd_atom);
  // Atomics run as CPU atomic instructions on the target word, so they are atomic against
  // every agent; the device still reports HCA, as rxe and mlx5 do: UCX's verbs transports
  // offer atomics only on IBV_ATOMIC_HCA (uct_ib_verbs_md_open), and HCA is the weaker promise.
  a.atomic_cap = IBV_ATOMIC_HCA;
  a.max_ah = int(l.max_ah);
  a.max_mcast_grp = int(l.max_mcast_grp);  // UD multicast (src/abi/ah.cc)
  a.max_mcast_qp_attach = int(l.max_mcast_qp_attach);
  a.max_total_mcast_qp_attach = int(l.max_mcast_grp * l.max_mcast_qp_attach);
  a.max_srq = int(l.max_srq);
  a.max_srq_wr = int(l.max_srq_wr);
  a.max_srq_sge = l.max_srq ? int(l.max_srq_sge) : 0;
  a.max_pkeys = 1;
  a.local_ca_ack_delay = 15;
  a.phys_port_cnt = 1;
}

void fill_port_attr(ibv_context* context, ibv_port_attr& p) {
  const vrnic::engine::DeviceLimits l = limits_of(context);
  p.state = IBV_PORT_ACTIVE;
  p.max_mtu = ibv_mtu(l.max_mtu);
  p.active_mtu = ibv_mtu(l.active_mtu);
  p.gid_tbl_len = kGidTableLen;
  p.port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
  p.max_msg_sz = 1u << 31;  // IBA: an RC message is at most 2^31 bytes
  p.bad_pkey_cntr = 0;
  // Datagrams dropped for a wrong Q_Key (the port's Q_Key violation counter, IBA 14.2.5.6).
  p.qkey_viol_cntr = uint32_t(nic_of(context)->locked(
      [](vrnic::engine::Device& d) { return d.counters().rx_qkey_errors; }));
  p.pkey_tbl_len = 1;
  p.lid = 0;  // RoCE has no LIDs
  p.sm_lid = 0;
  p.lmc = 0;
  p.max_vl_num = 1;
  p.sm_sl = 0;
  p.subnet_timeout = 0;
  p.init_type_reply = 0;
  // 4X EDR, 100 Gb/s: what mlx5 reports for a 100GBASE-*4 Ethernet link (the kernel's
  // translate_eth_legacy_proto_oper). UCX derives its protocol thresholds from this rate
  // against its own memcpy bandwidth: with 1X (25 Gb/s, below memcpy) it never zero-copies
  // and keeps messages up to 256 KiB in eager bcopy (docs/abi.md).
  p.active_width = 2;   // 4X
  p.active_speed = 32;  // EDR (25 Gb/s per lane)
  p.phys_state = 5;     // LinkUp
  p.link_layer = IBV_LINK_LAYER_ETHERNET;
}

bool valid_port(uint32_t port) { return port == kPort; }

}  // namespace

VRNIC_EXPORT int ibv_query_device(ibv_context* context, ibv_device_attr* attr) {
  fill_device_attr(context, *attr);
  return 0;
}

int vrnic::abi::op_query_device_ex(ibv_context* context, const ibv_query_device_ex_input* input,
                                   ibv_device_attr_ex* attr, size_t attr_size) {
  if (input && input->comp_mask) return EINVAL;
  if (attr_size < sizeof(ibv_device_attr)) return EINVAL;
  ibv_device_attr_ex ex;
  std::memset(&ex, 0, sizeof(ex));
  fill_device_attr(context, ex.orig_attr);
  // ATOMIC WRITE, as rxe reports it: IB_UVERBS_DEVICE_ATOMIC_WRITE, bit 40 of the extended
  // flags (rdma-core v44's kernel-headers/rdma/ib_user_verbs.h; its verbs.h names no IBV_
  // constant for it).
  ex.device_cap_flags_ex = ex.orig_attr.device_cap_flags | kDeviceAtomicWrite;
  // Completion timestamps are CLOCK_MONOTONIC ns (cq_ex.cc): a 1 GHz clock, 64 bits wide.
  ex.hca_core_clock = 1000000;  // kHz
  ex.completion_timestamp_mask = ~uint64_t(0);
  ex.phys_port_cnt_ex = ex.orig_attr.phys_port_cnt;
  // On-demand paging: every access to a region, whatever the transport, checks the pages it
  // touches when it touches them (MemoryTable::check). So each transport reports what it
  // does: RC everything; UC no READ or atomics; UD SENDs and receives; XRC (an initiator
  // sends, a target receives through XRC SRQs only) no plain receive queue.
  constexpr uint32_t kSend = IBV_ODP_SUPPORT_SEND, kRecv = IBV_ODP_SUPPORT_RECV,
                     kWrite = IBV_ODP_SUPPORT_WRITE, kRead = IBV_ODP_SUPPORT_READ,
                     kAtomic = IBV_ODP_SUPPORT_ATOMIC, kSrqRecv = IBV_ODP_SUPPORT_SRQ_RECV;
  ex.odp_caps.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
  ex.odp_caps.per_transport_caps.rc_odp_caps =
      kSend | kRecv | kWrite | kRead | kAtomic | kSrqRecv;
  ex.odp_caps.per_transport_caps.uc_odp_caps = kSend | kRecv | kWrite | kSrqRecv;
  ex.odp_caps.per_transport_caps.ud_odp_caps = kSend | kRecv | kSrqRecv;
  ex.xrc_odp_caps = kSend | kWrite | kRead | kAtomic | kSrqRecv;
  // CQ moderation (ibv_modify_cq), mlx5's ranges.
  const vrnic::engine::DeviceLimits l = limits_of(context);
  ex.cq_mod_caps.max_cq_count = l.max_cq_count;
  ex.cq_mod_caps.max_cq_period = l.max_cq_period_us;
  ex.max_dm_size = kMaxDmSize;  // ibv_alloc_dm (dm.cc)
  std::memset(attr, 0, attr_size);
  std::memcpy(attr, &ex, std::min(attr_size, sizeof(ex)));
  return 0;
}

int vrnic::abi::op_query_port(ibv_context* context, uint8_t port_num, ibv_port_attr* attr,
                              size_t attr_len) {
  if (!valid_port(port_num)) return EINVAL;
  ibv_port_attr p;
  std::memset(&p, 0, sizeof(p));
  fill_port_attr(context, p);
  std::memset(attr, 0, attr_len);
  std::memcpy(attr, &p, std::min(attr_len, sizeof(p)));
  return 0;
}

// The exported entry: it receives the compat struct, the layout before port_cap_flags2
// (it ends with `flags`).
VRNIC_EXPORT int ibv_query_port(ibv_context* context, uint8_t port_num,
                                _compat_ibv_port_attr* port_attr) {
  return op_query_port(context, port_num, reinterpret_cast<ibv_port_attr*>(port_attr),
                       offsetof(ibv_port_attr, flags) + sizeof(uint8_t));
}

VRNIC_EXPORT int ibv_query_gid(ibv_context* context, uint8_t port_num, int index, ibv_gid* gid) {
  if (!valid_port(port_num) || index < 0 || index >= kGidTableLen) {
    errno = EINVAL;
    return -1;
  }
  std::memcpy(gid->raw, nic_of(context)->gid().raw.data(), 16);
  return 0;
}

VRNIC_EXPORT int _ibv_query_gid_ex(ibv_context* context, uint32_t port_num, uint32_t gid_index,
                                   ibv_gid_entry* entry, uint32_t flags, size_t entry_size) {
  if (flags || entry_size < sizeof(ibv_gid_entry)) return EINVAL;
  if (!valid_port(port_num)) return EINVAL;
  if (gid_index >= uint32_t(kGidTableLen)) return ENODATA;
  std::memset(entry, 0, entry_size);
  std::memcpy(entry->gid.raw, nic_of(context)->gid().raw.data(), 16);
  entry->gid_index = gid_index;
  entry->port_num = port_num;
  entry->gid_type = IBV_GID_TYPE_ROCE_V2;
  // The interface that holds the address (the sysfs view's gid_attrs/ndevs/0), as rdma-core
  // reads it: if_nametoindex of that name; 0 when no interface holds it.
  const std::string ndev = vrnic::live::interface_name(
      vrnic::transport::IpAddress::from_gid(nic_of(context)->gid().raw));
  entry->ndev_ifindex = ndev.empty() ? 0 : if_nametoindex(ndev.c_str());
  return 0;
}

VRNIC_EXPORT ssize_t _ibv_query_gid_table(ibv_context* context, ibv_gid_entry* entries,
                                          size_t max_entries, uint32_t flags,
                                          size_t entry_size) {
  if (flags || entry_size < sizeof(ibv_gid_entry)) return -EINVAL;
  if (max_entries < size_t(kGidTableLen)) return -EINVAL;
  auto* out = reinterpret_cast<ibv_gid_entry*>(entries);
  for (int i = 0; i < kGidTableLen; ++i) {
    auto* e = reinterpret_cast<ibv_gid_entry*>(reinterpret_cast<char*>(out) + i * entry_size);
    if (int rc = _ibv_query_gid_ex(context, kPort, uint32_t(i), e, 0, entry_size)) return -rc;
  }
  return kGidTableLen;
}

VRNIC_EXPORT int ibv_query_gid_type(ibv_context* context, uint8_t port_num, unsigned int index,
                                    int* type) {
  if (!valid_port(port_num) || index >= unsigned(kGidTableLen)) {
    errno = EINVAL;
    return -1;
  }
  *type = kGidTypeSysfsRoceV2;
  return 0;
}

VRNIC_EXPORT int ibv_query_pkey(ibv_context* context, uint8_t port_num, int index, __be16* pkey) {
  if (!valid_port(port_num) || index != 0) {
    errno = EINVAL;
    return -1;
  }
  *pkey = htobe16(kDefaultPkey);
  return 0;
}

VRNIC_EXPORT int ibv_get_pkey_index(ibv_context* context, uint8_t port_num, __be16 pkey) {
  if (!valid_port(port_num) || be16toh(pkey) != kDefaultPkey) {
    errno = ENOENT;
    return -1;
  }
  return 0;
}
