// IpAddress: parsing, printing, and the RoCEv2 GID of an address and back.
#include "transport/udp/ip_address.h"

#include <gtest/gtest.h>

namespace vrnic::transport {
namespace {

TEST(IpAddress, parse__v4_v6_and_mapped) {
  IpAddress a;
  ASSERT_TRUE(IpAddress::parse("127.0.0.5", a));
  EXPECT_FALSE(a.ipv6);
  EXPECT_EQ(a.to_string(), "127.0.0.5");
  auto g = a.gid();
  EXPECT_EQ(g[10], 0xff);
  EXPECT_EQ(g[11], 0xff);
  EXPECT_EQ(g[15], 5);
  ASSERT_TRUE(IpAddress::parse("::ffff:10.1.2.3", a));
  EXPECT_FALSE(a.ipv6);
  EXPECT_EQ(a.to_string(), "10.1.2.3");
  ASSERT_TRUE(IpAddress::parse("fd00::1", a));
  EXPECT_TRUE(a.ipv6);
  EXPECT_EQ(a.gid(), a.bytes);
  EXPECT_FALSE(IpAddress::parse("not-an-address", a));
}

TEST(IpAddress, from_gid__ipv4_mapped_gid_gives_the_ipv4_address) {
  std::array<uint8_t, 16> gid{};
  gid[10] = gid[11] = 0xff;
  gid[12] = 10, gid[13] = 1, gid[14] = 2, gid[15] = 3;
  const IpAddress a = IpAddress::from_gid(gid);
  EXPECT_EQ(a, IpAddress::v4(10, 1, 2, 3));
  EXPECT_EQ(a.to_string(), "10.1.2.3");
  EXPECT_EQ(a.gid(), gid);
}

TEST(IpAddress, from_gid__other_gid_is_that_ipv6_address) {
  IpAddress v6;
  ASSERT_TRUE(IpAddress::parse("fd00::1:2", v6));
  const IpAddress a = IpAddress::from_gid(v6.gid());
  EXPECT_TRUE(a.ipv6);
  EXPECT_EQ(a, v6);
  EXPECT_EQ(a.to_string(), "fd00::1:2");
}

}  // namespace
}  // namespace vrnic::transport
