// Address handles (ibv_create_ah, ibv_create_ah_from_wc, ibv_init_ah_from_wc) and multicast
// attach / detach for UD QPs.
#include <arpa/inet.h>

#include <cstring>
#include <new>

#include "abi/objects.h"
#include "live/live_nic.h"
#include "wire/gid.h"

using namespace vrnic::abi;
using vrnic::engine::Device;

namespace {

// The GID of the IPv4 address at `addr` (four bytes, network order).
ibv_gid gid_of_ipv4(const uint8_t* addr) {
  std::array<uint8_t, 16> ip{};
  std::memcpy(ip.data(), addr, 4);
  const auto g = vrnic::wire::gid_of_ip(ip, false);
  ibv_gid out;
  std::memcpy(out.raw, g.data(), sizeof(out.raw));
  return out;
}

vrnic::engine::Gid to_engine_gid(const ibv_gid& g) {
  vrnic::engine::Gid out;
  std::memcpy(out.raw.data(), g.raw, sizeof(g.raw));
  return out;
}

// The GRH area of a UD receive holds an IPv6 header, or for RoCEv2 over IPv4 the IPv4 header
// in its last 20 bytes (the first 20 undefined). Tells them apart the way rdma-core does: a
// version-6 first nibble is IPv6 unless a valid 20-byte IPv4 header sits at byte 20.
int grh_version(const ibv_grh* grh) {
  const auto* b = reinterpret_cast<const uint8_t*>(grh);
  const uint8_t* v4 = b + 20;
  if ((b[0] >> 4) != 6) return (v4[0] >> 4) == 4 ? 4 : -1;
  if (v4[0] != 0x45) return 6;
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += (uint32_t{v4[i]} << 8) | v4[i + 1];
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return sum == 0xffff ? 4 : 6;
}

// The GID index of gid on the port (vrnic has one: index 0), or -1.
int gid_index(ibv_context* context, uint8_t port, const ibv_gid& gid) {
  ibv_gid mine{};
  if (ibv_query_gid(context, port, 0, &mine) != 0) return -1;
  return std::memcmp(mine.raw, gid.raw, 16) == 0 ? 0 : -1;
}

}  // namespace

VRNIC_EXPORT ibv_ah* ibv_create_ah(ibv_pd* ibv_pd, ibv_ah_attr* attr) {
  if (ibv_pd == nullptr || attr == nullptr) return fail_null<ibv_ah>(EINVAL);
  // RoCE: every packet carries an IP header, so the AH must name a GID (a LID-only AH is
  // refused, as RoCE providers do).
  if (!attr->is_global) return fail_null<ibv_ah>(EINVAL);
  if (attr->port_num != 1) return fail_null<ibv_ah>(EINVAL);
  vrnic::engine::AddressVector av;
  av.dgid = to_engine_gid(attr->grh.dgid);
  av.sgid_index = attr->grh.sgid_index;
  av.hop_limit = attr->grh.hop_limit;
  av.traffic_class = attr->grh.traffic_class;
  av.flow_label = attr->grh.flow_label;
  av.sl = attr->sl;
  av.port_num = attr->port_num;
  auto* ah = new (std::nothrow) Ah{};
  if (!ah) return fail_null<ibv_ah>(ENOMEM);
  int err = 0;
  Pd* pd = to_pd(ibv_pd);
  ah->ah = to_context(ibv_pd->context)->nic->locked(
      [&](Device& d) { return d.create_ah(pd->pd, av, err); });
  if (!ah->ah) {
    delete ah;
    return fail_null<ibv_ah>(err ? err : ENOMEM);
  }
  hold_domain(ibv_pd);
  ah->ibv.context = ibv_pd->context;
  ah->ibv.pd = ibv_pd;
  ah->ibv.handle = 0;
  return &ah->ibv;
}

VRNIC_EXPORT int ibv_destroy_ah(ibv_ah* ibv) {
  if (ibv == nullptr) return EINVAL;
  Ah* ah = to_ah(ibv);
  const int err = to_context(ibv->context)->nic->locked(
      [&](Device& d) { return d.destroy_ah(ah->ah); });
  if (err) return err;
  release_domain(ibv->pd);
  delete ah;
  return 0;
}

// Fills an AH attribute that answers the sender of a received datagram: its address (the
// GRH source) becomes the destination. Returns 0, or -1 with errno (rdma-core's convention).
VRNIC_EXPORT int ibv_init_ah_from_wc(ibv_context* context, uint8_t port_num, ibv_wc* wc,
                                     ibv_grh* grh, ibv_ah_attr* ah_attr) {
  std::memset(ah_attr, 0, sizeof *ah_attr);
  ah_attr->dlid = wc->slid;
  ah_attr->sl = wc->sl;
  ah_attr->src_path_bits = wc->dlid_path_bits;
  ah_attr->port_num = port_num;
  if (!(wc->wc_flags & IBV_WC_GRH)) return 0;
  ah_attr->is_global = 1;
  const int version = grh_version(grh);
  if (version < 0) {
    errno = EPROTONOSUPPORT;
    return -1;
  }
  ibv_gid local{};
  if (version == 4) {
    const auto* v4 = reinterpret_cast<const uint8_t*>(grh) + 20;
    if ((v4[16] & 0xf0) == 0xe0) {  // sent to a multicast group: no GID of ours to answer from
      errno = EINVAL;
      return -1;
    }
    local = gid_of_ipv4(v4 + 16);
    ah_attr->grh.dgid = gid_of_ipv4(v4 + 12);
    ah_attr->grh.hop_limit = v4[8];
    ah_attr->grh.traffic_class = v4[1];
  } else {
    if (grh->dgid.raw[0] == 0xff) {
      errno = EINVAL;
      return -1;
    }
    if (grh->next_hdr != 17) {  // RoCEv2 only: the next header is UDP
      errno = EPROTONOSUPPORT;
      return -1;
    }
    local = grh->dgid;
    ah_attr->grh.dgid = grh->sgid;
    const uint32_t vtf = ntohl(grh->version_tclass_flow);
    ah_attr->grh.flow_label = vtf & 0xfffff;
    ah_attr->grh.traffic_class = (vtf >> 20) & 0xff;
    ah_attr->grh.hop_limit = grh->hop_limit;
  }
  const int index = gid_index(context, port_num, local);
  if (index < 0) {
    errno = ENOENT;  // the packet was not addressed to a GID of this port
    return -1;
  }
  ah_attr->grh.sgid_index = uint8_t(index);
  return 0;
}

VRNIC_EXPORT ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh,
                                           uint8_t port_num) {
  ibv_ah_attr attr;
  if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr) != 0) return nullptr;
  return ibv_create_ah(pd, &attr);
}

VRNIC_EXPORT int ibv_attach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
  if (qp == nullptr || gid == nullptr) return EINVAL;
  vrnic::engine::Gid g = to_engine_gid(*gid);
  Qp* q = to_qp(qp);
  return to_context(qp->context)->nic->locked(
      [&](Device& d) { return d.attach_mcast(q->qp, g, lid); });
}

VRNIC_EXPORT int ibv_detach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
  if (qp == nullptr || gid == nullptr) return EINVAL;
  vrnic::engine::Gid g = to_engine_gid(*gid);
  Qp* q = to_qp(qp);
  return to_context(qp->context)->nic->locked(
      [&](Device& d) { return d.detach_mcast(q->qp, g, lid); });
}
