// Tests of device address allocation (separate processes take separate addresses) and MTUs.
#include "live/address.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include <gtest/gtest.h>

namespace vrnic::live {
namespace {

// A test-only UDP port, so that running devices on 4791 do not disturb the test.
constexpr uint16_t kTestPort = 47910;

transport::UdpPortOptions test_options() {
  transport::UdpPortOptions o;
  o.port = kTestPort;
  return o;
}

TEST(OpenDevicePort, loopback__second_open_takes_the_next_free_address) {
  int err = 0;
  std::string msg;
  auto a = open_device_port("", "", test_options(), err, msg);
  ASSERT_NE(a, nullptr) << msg;
  auto b = open_device_port("", "", test_options(), err, msg);
  ASSERT_NE(b, nullptr) << msg;
  EXPECT_NE(a->address(), b->address());
  EXPECT_EQ(a->address().bytes[0], 127);
  EXPECT_EQ(b->address().bytes[0], 127);
  EXPECT_GT(b->address().bytes[3], a->address().bytes[3]);  // taken in order
  // Once a closes, its address is free again.
  transport::IpAddress freed = a->address();
  a.reset();
  auto c = open_device_port("", "", test_options(), err, msg);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->address(), freed);
}

TEST(OpenDevicePort, loopback__two_processes_get_different_addresses) {
  int to_parent[2];
  ASSERT_EQ(pipe(to_parent), 0);
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int err = 0;
    std::string msg;
    auto p = open_device_port("", "", test_options(), err, msg);
    uint8_t last = p ? p->address().bytes[3] : 0;
    (void)!write(to_parent[1], &last, 1);
    char c;
    (void)!read(go[0], &c, 1);  // hold the address until the parent has taken its own
    _exit(p ? 0 : 1);
  }
  uint8_t child_last = 0;
  ASSERT_EQ(read(to_parent[0], &child_last, 1), 1);
  ASSERT_NE(child_last, 0);
  int err = 0;
  std::string msg;
  auto mine = open_device_port("", "", test_options(), err, msg);
  ASSERT_NE(mine, nullptr) << msg;
  EXPECT_NE(mine->address().bytes[3], child_last);
  (void)!write(go[1], "x", 1);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(OpenDevicePort, requested__taken_address_is_eaddrinuse_with_a_message) {
  int err = 0;
  std::string msg;
  auto a = open_device_port("127.0.0.240", "", test_options(), err, msg);
  ASSERT_NE(a, nullptr) << msg;
  EXPECT_EQ(a->address().to_string(), "127.0.0.240");
  auto b = open_device_port("127.0.0.240", "", test_options(), err, msg);
  EXPECT_EQ(b, nullptr);
  EXPECT_EQ(err, EADDRINUSE);
  EXPECT_NE(msg.find("127.0.0.240"), std::string::npos);
}

TEST(OpenDevicePort, requested__not_an_address_is_einval) {
  int err = 0;
  std::string msg;
  EXPECT_EQ(open_device_port("127.0.0.999", "", test_options(), err, msg), nullptr);
  EXPECT_EQ(err, EINVAL);
}

TEST(OpenDevicePort, requested__ipv6_loopback) {
  int err = 0;
  std::string msg;
  auto a = open_device_port("::1", "", test_options(), err, msg);
  if (!a && err == EADDRNOTAVAIL) GTEST_SKIP() << "no IPv6";
  ASSERT_NE(a, nullptr) << msg;
  EXPECT_TRUE(a->address().ipv6);
  EXPECT_EQ(a->address().gid(), a->address().bytes);
}

TEST(InterfaceMtu, loopback__is_found) {
  EXPECT_GE(interface_mtu(transport::IpAddress::v4(127, 0, 0, 7)), 1500);
  EXPECT_EQ(interface_mtu(transport::IpAddress::v4(192, 0, 2, 1)), 0);  // TEST-NET: nobody's
}

TEST(IbMtuFor, interface_mtus__largest_fitting_path_mtu) {
  EXPECT_EQ(ib_mtu_for(65536, false, 5), 5);  // loopback: 4096
  EXPECT_EQ(ib_mtu_for(9000, false, 5), 5);
  EXPECT_EQ(ib_mtu_for(1500, false, 5), 3);   // Ethernet: 1024, as RoCE NICs report
  EXPECT_EQ(ib_mtu_for(1500, true, 5), 3);
  EXPECT_EQ(ib_mtu_for(4096 + 63, false, 5), 4);  // 4096 + 64 bytes of headers needed
  EXPECT_EQ(ib_mtu_for(4096 + 64, false, 5), 5);
  EXPECT_EQ(ib_mtu_for(65536, false, 3), 3);  // capped by the device
  EXPECT_EQ(ib_mtu_for(300, false, 5), 1);
}

}  // namespace
}  // namespace vrnic::live
