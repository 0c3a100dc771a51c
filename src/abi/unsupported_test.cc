// Every verb vrnic does not support fails with EOPNOTSUPP, through each way a program reaches it.
#include <dlfcn.h>

#include "abi/verbs_test.h"

namespace vrnic::abi::test {
namespace {

using Unsupported = VerbsTest;

TEST_F(Unsupported, exported_pointer_verbs__null_with_eopnotsupp) {
  errno = 0;
  EXPECT_EQ(ibv_reg_dmabuf_mr(pd_, 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
}

TEST_F(Unsupported, exported_int_verbs__return_eopnotsupp) {
  ibv_cq* cq = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = init.cap.max_recv_wr = 4;
  init.cap.max_send_sge = init.cap.max_recv_sge = 1;
  ibv_qp* qp = ibv_create_qp(pd_, &init);
  ASSERT_NE(qp, nullptr);
  ibv_ece ece{};
  EXPECT_EQ(ibv_query_ece(qp, &ece), EOPNOTSUPP);
  EXPECT_EQ(ibv_set_ece(qp, &ece), EOPNOTSUPP);
  EXPECT_EQ(ibv_qp_to_qp_ex(qp), nullptr);  // made by ibv_create_qp: no ibv_wr_* view
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
}

// These are static inline in verbs.h: they find a null verbs_context op and fail themselves.
TEST_F(Unsupported, inline_extended_verbs__eopnotsupp) {
  ibv_wq_init_attr wq{};
  errno = 0;
  EXPECT_EQ(ibv_create_wq(ctx_, &wq), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  ibv_counters_init_attr counters{};
  errno = 0;
  EXPECT_EQ(ibv_create_counters(ctx_, &counters), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  errno = 0;
  EXPECT_EQ(ibv_alloc_null_mr(pd_), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
}

// Provider (IBVERBS_PRIVATE_34) and 2006-ABI (IBVERBS_1.0) names, looked up by version.
TEST_F(Unsupported, private_and_compat_symbols__eopnotsupp) {
  auto cmd = reinterpret_cast<int (*)()>(dlvsym(RTLD_DEFAULT, "ibv_cmd_alloc_pd",
                                                "IBVERBS_PRIVATE_34"));
  ASSERT_NE(cmd, nullptr);
  EXPECT_EQ(cmd(), EOPNOTSUPP);
  auto reg = reinterpret_cast<void (*)(const void*)>(
      dlvsym(RTLD_DEFAULT, "verbs_register_driver_34", "IBVERBS_PRIVATE_34"));
  ASSERT_NE(reg, nullptr);
  reg(nullptr);  // accepted and ignored
  auto old_alloc_pd = reinterpret_cast<void* (*)(void*)>(
      dlvsym(RTLD_DEFAULT, "ibv_alloc_pd", "IBVERBS_1.0"));
  ASSERT_NE(old_alloc_pd, nullptr);
  errno = 0;
  EXPECT_EQ(old_alloc_pd(ctx_), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  auto cur_alloc_pd = dlvsym(RTLD_DEFAULT, "ibv_alloc_pd", "IBVERBS_1.1");
  EXPECT_EQ(cur_alloc_pd, reinterpret_cast<void*>(&ibv_alloc_pd));
}

}  // namespace
}  // namespace vrnic::abi::test
