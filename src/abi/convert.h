// Pure conversions between rdma-core structs and engine value types (no device, no state).
#pragma once
#include <infiniband/verbs.h>

#include "engine/types.h"

namespace vrnic::abi {

// ibv_qp_attr (the fields attr_mask selects) -> engine::QpAttr. EINVAL when the address
// vector has no GRH: RoCE carries the GRH in the IP header and routes by GID only.
int to_engine_qp_attr(const ibv_qp_attr& in, int attr_mask, engine::QpAttr& out);
void to_ibv_qp_attr(const engine::QpAttr& in, ibv_qp_attr& out);
void to_ibv_qp_cap(const engine::QpCap& in, ibv_qp_cap& out);
engine::QpCap to_engine_qp_cap(const ibv_qp_cap& in);

// Converts one send WR; EINVAL for an opcode the engine has no value for. The engine's Sge
// has the layout of ibv_sge, so sg_list is passed through without copying.
int to_engine_send_wr(const ibv_send_wr& in, engine::SendWr& out);
void to_engine_recv_wr(const ibv_recv_wr& in, engine::RecvWr& out);
void to_ibv_wc(const engine::WorkCompletion& in, ibv_wc& out);

// Access flags: the optional range (IBV_ACCESS_OPTIONAL_RANGE) may be dropped when the device
// does not know a bit; mandatory unknown bits are an error (EINVAL).
int to_engine_access(unsigned int ibv_access, uint32_t& out);

}  // namespace vrnic::abi
