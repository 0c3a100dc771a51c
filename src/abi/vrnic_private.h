/* Entry points of vrnic's libibverbs.so.1 for vrnic's librdmacm.so.1 (version node VRNIC_PRIVATE_1). */
#pragma once
#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Receives a MAD for QP1 (the connection manager's datagrams). Runs with the device lock
 * held, on whichever thread received it: copy and return at once, never call back into
 * the verbs. Addresses are 16 bytes, IPv4 in the first four. Return 0 to drop the MAD as
 * for an unknown QP. */
typedef int (*vrnic_gsi_handler)(void* user, int ipv6, const uint8_t* src, const uint8_t* dst,
                                 const uint8_t* mad);

/* Attaches (fn != NULL) or detaches (fn == NULL) the handler of the device behind ctx.
 * 0 or an errno (EINVAL: not a vrnic context). */
int vrnic_gsi_attach(struct ibv_context* ctx, vrnic_gsi_handler fn, void* user);

/* Sends a 256-byte MAD from QP1 to the GSI (QP1) of dst. 0 or an errno. */
int vrnic_gsi_send(struct ibv_context* ctx, int ipv6, const uint8_t* dst, const uint8_t* mad);

/* Counters of a layer above the device (the connection manager's, cm/counters.h): n names
 * shown after the device's own (`vrnic stats`, VRNIC_STATS). Returns the index of the first
 * of their slots for vrnic_counters_set, or -EINVAL (not a vrnic context), -ENOSPC. */
int vrnic_counters_add(struct ibv_context* ctx, const char* const* names, size_t n);
/* The values of n added counters from slot `first` on. 0 or an errno. */
int vrnic_counters_set(struct ibv_context* ctx, int first, const uint64_t* values, size_t n);

/* Told when a QP of the process enters the error state on its own (IBV_EVENT_QP_FATAL: the
 * transport gave up on the peer, or a request broke the rules), so that the connection
 * manager can end the connection the QP carried. Same rules as vrnic_gsi_handler: the device
 * lock is held; note the QP number and return. */
typedef void (*vrnic_qp_fatal_handler)(void* user, uint32_t qp_num);

/* Attaches (fn != NULL) or detaches the process's one handler. 0 or an errno. */
int vrnic_qp_fatal_attach(vrnic_qp_fatal_handler fn, void* user);

/* Authenticated mode (docs/protocol.md "Authenticated mode"): 1 if the device behind ctx
 * runs in it (VRNIC_AUTH=1, `vrnic run --auth`), 0 if not, -1 for no vrnic context. */
int vrnic_auth_mode(struct ibv_context* ctx);

/* Gives the RC QP qp_num of the device behind ctx the keys the connection manager agreed:
 * from now on its packets carry a tag under tx and only packets tagged under rx are taken
 * (32 bytes each). 0 or an errno (EINVAL: no such RC QP, or not a vrnic context). */
int vrnic_qp_auth_set(struct ibv_context* ctx, uint32_t qp_num, const uint8_t* tx,
                      const uint8_t* rx);

#ifdef __cplusplus
}
#endif
