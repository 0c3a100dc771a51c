// The entry points installed in ibv_context.ops / verbs_context (rdma-core's inline verbs call
// these), and the engine callbacks, shared between the shim's files.
#pragma once
#include <infiniband/verbs.h>

#include <memory>

#include "engine/types.h"

namespace vrnic::engine {
class Cq;
}

namespace vrnic::abi {

int op_poll_cq(ibv_cq* cq, int num_entries, ibv_wc* wc);
int op_req_notify_cq(ibv_cq* cq, int solicited_only);
int op_modify_cq(ibv_cq* cq, ibv_modify_cq_attr* attr);
int op_post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr);
int op_post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);
int op_post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);
int op_advise_mr(ibv_pd* pd, ibv_advise_mr_advice advice, uint32_t flags, ibv_sge* sg_list,
                 uint32_t num_sge);
ibv_mw* op_alloc_mw(ibv_pd* pd, ibv_mw_type type);
int op_dealloc_mw(ibv_mw* mw);
int op_bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* mw_bind);
int op_query_port(ibv_context* context, uint8_t port_num, ibv_port_attr* attr, size_t attr_len);
int op_query_device_ex(ibv_context* context, const ibv_query_device_ex_input* input,
                       ibv_device_attr_ex* attr, size_t attr_size);

// The extended verbs (qp_ex.cc, cq_ex.cc).
struct Qp;
// Makes qp's engine QP (init.user_context: qp) and fills the ibv_qp fields every QP type has;
// 0 or the errno (qp.cc).
int make_qp(ibv_context* context, Qp* qp, engine::QpInitAttr& init, void* qp_context,
            ibv_qp_type type);
ibv_qp* op_create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex* attr);
void free_qp_ex(Qp* qp);  // ibv_destroy_qp: the ibv_wr_* state, if any
// ibv_create_cq, optionally on a parent domain (ibv_create_cq_ex, IBV_CQ_INIT_ATTR_MASK_PD).
ibv_cq* create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                  int comp_vector, ibv_pd* parent_domain);
ibv_cq_ex* op_create_cq_ex(ibv_context* context, ibv_cq_init_attr_ex* attr);
int op_query_rt_values(ibv_context* context, ibv_values_ex* values);

// Thread and parent domains (domain.cc), device memory (dm.cc).
struct Pd;
struct DmBlock;
ibv_td* op_alloc_td(ibv_context* context, ibv_td_init_attr* attr);
int op_dealloc_td(ibv_td* td);
ibv_pd* op_alloc_parent_domain(ibv_context* context, ibv_parent_domain_init_attr* attr);
int dealloc_parent_domain(Pd* pd);  // ibv_dealloc_pd of a parent domain
ibv_dm* op_alloc_dm(ibv_context* context, ibv_alloc_dm_attr* attr);
int op_free_dm(ibv_dm* dm);
ibv_mr* op_reg_dm_mr(ibv_pd* pd, ibv_dm* dm, uint64_t dm_offset, size_t length,
                     unsigned int access);
void release_dm_mr(ibv_mr* mr);  // ibv_dereg_mr of an MR on device memory
// A new ibv_dm of `context` over `block` with `handle` (ibv_alloc_dm, ibv_import_dm).
ibv_dm* new_dm_handle(ibv_context* context, DmBlock* block, uint32_t handle);

// XRC (xrc.cc).
ibv_xrcd* op_open_xrcd(ibv_context* context, ibv_xrcd_init_attr* attr);
int op_close_xrcd(ibv_xrcd* xrcd);
ibv_srq* op_create_srq_ex(ibv_context* context, ibv_srq_init_attr_ex* attr);
int op_get_srq_num(ibv_srq* srq, uint32_t* srq_num);
ibv_qp* create_xrc_tgt_qp(ibv_context* context, ibv_qp_init_attr_ex* attr);  // create_qp_ex

// Called by the live NIC with its lock held (see live::LiveNicCallbacks).
void on_cq_event(engine::Cq* cq, void* cq_user_context);
void on_async_event(const engine::AsyncEvent& ev);

// Tells the handler of vrnic_qp_fatal_attach (the connection manager) that a QP failed.
void notify_qp_fatal(uint32_t qp_num);

// Queues an async event for the program and wakes ibv_get_async_event.
struct Context;
void push_async_event(Context* ctx, const ibv_async_event& ev);
// Forgets the unread events of an object being destroyed (element: its ibv_qp/ibv_cq).
void drop_async_events(Context* ctx, const void* element);

// A context on `device` with command fd `cmd_fd` (which it then owns: closed if this fails)
// over `file` (ibv_open_device, ibv_import_device). Null with errno.
class CmdFile;
ibv_context* new_context(ibv_device* device, int cmd_fd, std::shared_ptr<CmdFile> file);

// Blocks on an eventfd token (EFD_SEMAPHORE): 0, or -1 with errno (EAGAIN if non-blocking).
int take_token(int fd);
void give_token(int fd);

}  // namespace vrnic::abi
