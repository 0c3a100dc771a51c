// IBVERBS_PRIVATE_34: the provider interface of rdma-core v44 (driver.h). vrnic loads no
// providers, but libmlx5 and libefa link against these names and register themselves from
// their constructors, so every name exists: registration is accepted and ignored, and each
// kernel command fails with EOPNOTSUPP (no provider device is ever opened to issue one).
#include <cstdarg>

#include "abi/objects.h"

using vrnic::abi::fail_null;

// Providers read this flag; vrnic never disassociates a device.
extern "C" {
__attribute__((visibility("default"))) bool verbs_allow_disassociate_destroy = false;
}

// A provider announces itself; vrnic serves only its own device, so there is nothing to do.
VRNIC_EXPORT void verbs_register_driver_34(const void*) {}

// Context set-up helpers a provider calls while opening its own device (never reached).
VRNIC_EXPORT void* _verbs_init_and_alloc_context(ibv_device*, int, size_t, void*, uint32_t) {
  return fail_null(EOPNOTSUPP);
}
VRNIC_EXPORT ibv_context* verbs_open_device(ibv_device*, void*) {
  return fail_null<ibv_context>(EOPNOTSUPP);
}
VRNIC_EXPORT void verbs_uninit_context(void*) {}
VRNIC_EXPORT void verbs_set_ops(void*, const void*) {}
VRNIC_EXPORT void verbs_init_cq(ibv_cq*, ibv_context*, ibv_comp_channel*, void*) {}
VRNIC_EXPORT void __verbs_log(void*, uint32_t, const char*, ...) {}
VRNIC_EXPORT int ibv_read_ibdev_sysfs_file(char*, size_t, void*, const char*, ...) {
  errno = EOPNOTSUPP;
  return -1;
}

// The ioctl command buffer: no kernel to execute it.
VRNIC_EXPORT int execute_ioctl(ibv_context*, void*) { return EOPNOTSUPP; }
VRNIC_EXPORT unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, void*) {
  return num_attrs;
}

// The write()-based kernel commands: every one returns EOPNOTSUPP. Their arguments differ
// but none is read, and with the C calling convention a callee may ignore its arguments.
#define VRNIC_CMD(name) \
  VRNIC_EXPORT int name() { return EOPNOTSUPP; }
VRNIC_CMD(ibv_cmd_advise_mr)
VRNIC_CMD(ibv_cmd_alloc_dm)
VRNIC_CMD(ibv_cmd_alloc_mw)
VRNIC_CMD(ibv_cmd_alloc_pd)
VRNIC_CMD(ibv_cmd_attach_mcast)
VRNIC_CMD(ibv_cmd_close_xrcd)
VRNIC_CMD(ibv_cmd_create_ah)
VRNIC_CMD(ibv_cmd_create_counters)
VRNIC_CMD(ibv_cmd_create_cq)
VRNIC_CMD(ibv_cmd_create_cq_ex)
VRNIC_CMD(ibv_cmd_create_flow)
VRNIC_CMD(ibv_cmd_create_flow_action_esp)
VRNIC_CMD(ibv_cmd_create_qp)
VRNIC_CMD(ibv_cmd_create_qp_ex)
VRNIC_CMD(ibv_cmd_create_qp_ex2)
VRNIC_CMD(ibv_cmd_create_rwq_ind_table)
VRNIC_CMD(ibv_cmd_create_srq)
VRNIC_CMD(ibv_cmd_create_srq_ex)
VRNIC_CMD(ibv_cmd_create_wq)
VRNIC_CMD(ibv_cmd_dealloc_mw)
VRNIC_CMD(ibv_cmd_dealloc_pd)
VRNIC_CMD(ibv_cmd_dereg_mr)
VRNIC_CMD(ibv_cmd_destroy_ah)
VRNIC_CMD(ibv_cmd_destroy_counters)
VRNIC_CMD(ibv_cmd_destroy_cq)
VRNIC_CMD(ibv_cmd_destroy_flow)
VRNIC_CMD(ibv_cmd_destroy_flow_action)
VRNIC_CMD(ibv_cmd_destroy_qp)
VRNIC_CMD(ibv_cmd_destroy_rwq_ind_table)
VRNIC_CMD(ibv_cmd_destroy_srq)
VRNIC_CMD(ibv_cmd_destroy_wq)
VRNIC_CMD(ibv_cmd_detach_mcast)
VRNIC_CMD(ibv_cmd_free_dm)
VRNIC_CMD(ibv_cmd_get_context)
VRNIC_CMD(ibv_cmd_modify_cq)
VRNIC_CMD(ibv_cmd_modify_flow_action_esp)
VRNIC_CMD(ibv_cmd_modify_qp)
VRNIC_CMD(ibv_cmd_modify_qp_ex)
VRNIC_CMD(ibv_cmd_modify_srq)
VRNIC_CMD(ibv_cmd_modify_wq)
VRNIC_CMD(ibv_cmd_open_qp)
VRNIC_CMD(ibv_cmd_open_xrcd)
VRNIC_CMD(ibv_cmd_post_recv)
VRNIC_CMD(ibv_cmd_post_send)
VRNIC_CMD(ibv_cmd_post_srq_recv)
VRNIC_CMD(ibv_cmd_query_context)
VRNIC_CMD(ibv_cmd_query_device_any)
VRNIC_CMD(ibv_cmd_query_mr)
VRNIC_CMD(ibv_cmd_query_port)
VRNIC_CMD(ibv_cmd_query_qp)
VRNIC_CMD(ibv_cmd_query_srq)
VRNIC_CMD(ibv_cmd_read_counters)
VRNIC_CMD(ibv_cmd_reg_dm_mr)
VRNIC_CMD(ibv_cmd_reg_dmabuf_mr)
VRNIC_CMD(ibv_cmd_reg_mr)
VRNIC_CMD(ibv_cmd_req_notify_cq)
VRNIC_CMD(ibv_cmd_rereg_mr)
VRNIC_CMD(ibv_cmd_resize_cq)
#undef VRNIC_CMD

// ibv_cmd_poll_cq returns a count: report the failure as a negative number.
VRNIC_EXPORT int ibv_cmd_poll_cq() { return -EOPNOTSUPP; }
