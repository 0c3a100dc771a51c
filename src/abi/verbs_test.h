// Test fixture shared by the verbs tests: vrnic's device opened through the public API.
#pragma once
#include <infiniband/verbs.h>
#include <gtest/gtest.h>

#include <cstring>

namespace vrnic::abi::test {

class VerbsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int n = 0;
    list_ = ibv_get_device_list(&n);
    ASSERT_NE(list_, nullptr);
    ASSERT_EQ(n, 1);
    ASSERT_STREQ(ibv_get_device_name(list_[0]), "vrnic0");  // ours, not rdma-core's
    ctx_ = ibv_open_device(list_[0]);
    ASSERT_NE(ctx_, nullptr) << std::strerror(errno);
    pd_ = ibv_alloc_pd(ctx_);
    ASSERT_NE(pd_, nullptr);
  }
  void TearDown() override {
    if (pd_) {
      EXPECT_EQ(ibv_dealloc_pd(pd_), 0);
    }
    if (ctx_) {
      EXPECT_EQ(ibv_close_device(ctx_), 0);
    }
    if (list_) ibv_free_device_list(list_);
  }

  ibv_device** list_ = nullptr;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
};

}  // namespace vrnic::abi::test
