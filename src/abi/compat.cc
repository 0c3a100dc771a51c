// The IBVERBS_1.0 entry points (the 2006 ABI with its own struct layouts, ibv_*_1_0) and the
// pre-v34 provider registration at IBVERBS_1.1: present so old binaries load, and failing
// with EOPNOTSUPP, since vrnic implements only the current layouts.
#include "abi/objects.h"

// Each compat function is defined under a private name and bound to NAME@VERSION.
#define VRNIC_SYMVER(impl, name, version) \
  __asm__(".symver " #impl "," #name "@" #version);

#define VRNIC_COMPAT_PTR(name)                                            \
  VRNIC_EXPORT void* vrnic_compat_##name() { return vrnic::abi::fail_null(EOPNOTSUPP); } \
  VRNIC_SYMVER(vrnic_compat_##name, name, IBVERBS_1.0)
#define VRNIC_COMPAT_INT(name)                                            \
  VRNIC_EXPORT int vrnic_compat_##name() { return EOPNOTSUPP; }           \
  VRNIC_SYMVER(vrnic_compat_##name, name, IBVERBS_1.0)
#define VRNIC_COMPAT_VOID(name)                                           \
  VRNIC_EXPORT void vrnic_compat_##name() {}                              \
  VRNIC_SYMVER(vrnic_compat_##name, name, IBVERBS_1.0)

VRNIC_COMPAT_PTR(ibv_get_device_list)
VRNIC_COMPAT_VOID(ibv_free_device_list)  // nothing can have been listed
VRNIC_COMPAT_PTR(ibv_get_device_name)
VRNIC_COMPAT_PTR(ibv_open_device)
VRNIC_COMPAT_PTR(ibv_alloc_pd)
VRNIC_COMPAT_PTR(ibv_reg_mr)
VRNIC_COMPAT_PTR(ibv_create_cq)
VRNIC_COMPAT_PTR(ibv_create_srq)
VRNIC_COMPAT_PTR(ibv_create_qp)
VRNIC_COMPAT_PTR(ibv_create_ah)
VRNIC_COMPAT_INT(ibv_close_device)
VRNIC_COMPAT_INT(ibv_get_async_event)
VRNIC_COMPAT_VOID(ibv_ack_async_event)  // no event can have been returned
VRNIC_COMPAT_INT(ibv_query_device)
VRNIC_COMPAT_INT(ibv_query_port)
VRNIC_COMPAT_INT(ibv_query_gid)
VRNIC_COMPAT_INT(ibv_query_pkey)
VRNIC_COMPAT_INT(ibv_dealloc_pd)
VRNIC_COMPAT_INT(ibv_dereg_mr)
VRNIC_COMPAT_INT(ibv_resize_cq)
VRNIC_COMPAT_INT(ibv_destroy_cq)
VRNIC_COMPAT_INT(ibv_get_cq_event)
VRNIC_COMPAT_VOID(ibv_ack_cq_events)  // no event can have been returned
VRNIC_COMPAT_INT(ibv_modify_srq)
VRNIC_COMPAT_INT(ibv_query_srq)
VRNIC_COMPAT_INT(ibv_destroy_srq)
VRNIC_COMPAT_INT(ibv_modify_qp)
VRNIC_COMPAT_INT(ibv_query_qp)
VRNIC_COMPAT_INT(ibv_destroy_qp)
VRNIC_COMPAT_INT(ibv_destroy_ah)
VRNIC_COMPAT_INT(ibv_attach_mcast)
VRNIC_COMPAT_INT(ibv_detach_mcast)

// ibv_get_device_guid@IBVERBS_1.0 returns a GUID; 0 is "none".
VRNIC_EXPORT uint64_t vrnic_compat_ibv_get_device_guid() { return 0; }
VRNIC_SYMVER(vrnic_compat_ibv_get_device_guid, ibv_get_device_guid, IBVERBS_1.0)

// Pre-v34 providers registered with this; vrnic loads none.
VRNIC_EXPORT void vrnic_compat_ibv_register_driver() {}
VRNIC_SYMVER(vrnic_compat_ibv_register_driver, ibv_register_driver, IBVERBS_1.1)
