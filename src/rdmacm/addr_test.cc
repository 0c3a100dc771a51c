// Tests of librdmacm's addressing: rdma_getaddrinfo from hints alone, and binding to loopback
// and to addresses the device does not have.
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstring>

#include <gtest/gtest.h>

namespace {

sockaddr_in v4(const char* ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip, &a.sin_addr);
  return a;
}

// As librdmacm: with neither node nor service the hints' addresses are the answer, and the
// family is the hints' (libfabric's ofi_rxm asks this way and needs ai_family).
TEST(RdmacmAddr, getaddrinfo__hints_only__addresses_and_family_from_the_hints) {
  sockaddr_in dst = v4("10.1.2.3", 7471);
  rdma_addrinfo hints{};
  hints.ai_dst_addr = reinterpret_cast<sockaddr*>(&dst);
  hints.ai_dst_len = sizeof dst;
  rdma_addrinfo* res = nullptr;
  ASSERT_EQ(rdma_getaddrinfo(nullptr, nullptr, &hints, &res), 0);
  ASSERT_NE(res, nullptr);
  EXPECT_EQ(res->ai_family, AF_INET);  // from the address, the hints leaving it 0
  ASSERT_EQ(res->ai_dst_len, sizeof dst);
  EXPECT_EQ(std::memcmp(res->ai_dst_addr, &dst, sizeof dst), 0);
  rdma_freeaddrinfo(res);

  sockaddr_in src = v4("10.1.2.4", 0);
  rdma_addrinfo only_src{};
  only_src.ai_family = AF_INET;
  only_src.ai_flags = RAI_PASSIVE;
  only_src.ai_src_addr = reinterpret_cast<sockaddr*>(&src);
  only_src.ai_src_len = sizeof src;
  ASSERT_EQ(rdma_getaddrinfo(nullptr, nullptr, &only_src, &res), 0);
  EXPECT_EQ(res->ai_family, AF_INET);
  EXPECT_EQ(res->ai_flags & RAI_PASSIVE, RAI_PASSIVE);
  ASSERT_EQ(res->ai_src_len, sizeof src);
  EXPECT_EQ(std::memcmp(res->ai_src_addr, &src, sizeof src), 0);
  rdma_freeaddrinfo(res);

  errno = 0;
  EXPECT_EQ(rdma_getaddrinfo(nullptr, nullptr, nullptr, &res), -1);
  EXPECT_EQ(errno, EINVAL);
}

// Binding to a loopback address succeeds as with the kernel's CM; the device has no such
// address, so the id is bound but not attached (verbs NULL) and keeps the address.
TEST(RdmacmAddr, bind_addr__loopback__bound_without_a_device) {
  rdma_event_channel* ch = rdma_create_event_channel();
  ASSERT_NE(ch, nullptr);
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in lo = v4("127.0.0.250", 0);  // an address no vrnic device of the test has
  ASSERT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&lo)), 0);
  EXPECT_EQ(id->verbs, nullptr);
  auto* local = reinterpret_cast<sockaddr_in*>(rdma_get_local_addr(id));
  EXPECT_EQ(local->sin_addr.s_addr, lo.sin_addr.s_addr);
  EXPECT_NE(rdma_get_src_port(id), 0);  // an ephemeral port, as bind with port 0 gives
  EXPECT_EQ(rdma_listen(id, 4), 0);
  EXPECT_EQ(rdma_destroy_id(id), 0);

  ASSERT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in foreign = v4("192.0.2.1", 0);  // TEST-NET-1: not this device's address
  errno = 0;
  EXPECT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&foreign)), -1);
  EXPECT_EQ(errno, ENODEV);
  EXPECT_EQ(rdma_destroy_id(id), 0);
  rdma_destroy_event_channel(ch);
}

}  // namespace
