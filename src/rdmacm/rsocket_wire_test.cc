// Tests of the rsocket formats against bytes written out by hand from rdma-core v44's
// librdmacm/rsocket.c (struct rs_conn_data, rs_sge, rs_iomap, ds_header, ds_udp_header and the
// immediate data encoding), each format encoded and decoded.
#include "rdmacm/rsocket_wire.h"

#include <arpa/inet.h>

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

namespace vrnic::rdmacm::rs {
namespace {

using Bytes = std::vector<uint8_t>;

TEST(RsocketWire, imm_of__op_in_top_three_bits_argument_below) {
  EXPECT_EQ(imm_of(Op::kData, 65536), 0x00010000u);
  EXPECT_EQ(imm_of(Op::kSgl, 384 + 17), 0x80000191u);
  EXPECT_EQ(imm_of(Op::kIomapSgl, 3), 0xc0000003u);
  EXPECT_EQ(imm_of(Op::kCtrl, uint32_t(Ctrl::kDisconnect)), 0xe0000000u);
  EXPECT_EQ(imm_of(Op::kCtrl, uint32_t(Ctrl::kKeepalive)), 0xe0000001u);
  EXPECT_EQ(imm_of(Op::kCtrl, uint32_t(Ctrl::kShutdown)), 0xe0000002u);
  EXPECT_EQ(imm_op(0xe0000002u), Op::kCtrl);
  EXPECT_EQ(imm_data(0xe0000002u), 2u);
  EXPECT_EQ(imm_op(0x0000ffffu), Op::kData);
  EXPECT_EQ(imm_data(0x9ffffffeu), 0x1ffffffeu);
}

TEST(RsocketWire, encode_conn_data__layout_of_rs_conn_data) {
  ConnData c;
  c.flags = kConnFlagIomap;
  c.credits = 384;
  c.iomap_scale = 1;
  c.target_sgl = {0x00007f0011223340ull, 0xa1b2c3d4, 2};
  c.data_buf = {0x00007f0055667780ull, 0x01020304, 65536};
  uint8_t out[kConnDataSize];
  encode_conn_data(c, out);
  const Bytes want = {
      1, 0x02, 0x01, 0x80, 0, 0, 0, 1,                         // version flags credits rsvd size
      0x00, 0x00, 0x7f, 0x00, 0x11, 0x22, 0x33, 0x40,          // target_sgl.addr
      0xa1, 0xb2, 0xc3, 0xd4, 0x00, 0x00, 0x00, 0x02,          // .key .length
      0x00, 0x00, 0x7f, 0x00, 0x55, 0x66, 0x77, 0x80,          // data_buf.addr
      0x01, 0x02, 0x03, 0x04, 0x00, 0x01, 0x00, 0x00};         // .key .length
  EXPECT_EQ(Bytes(out, out + kConnDataSize), want);
}

TEST(RsocketWire, decode_conn_data__fields_and_refusals) {
  Bytes b = {1, 0x03, 0x00, 0x10, 9, 9, 9, 0x81,
             0, 0, 0, 0, 0, 0, 0x10, 0x00, 0, 0, 0, 7, 0, 0, 0, 2,
             0, 0, 0, 0, 0, 0, 0x20, 0x00, 0, 0, 0, 8, 0, 0, 0x10, 0};
  const auto c = decode_conn_data(b);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->flags, kConnFlagNet | kConnFlagIomap);
  EXPECT_EQ(c->credits, 16);
  EXPECT_EQ(c->iomap_scale, 0x81);  // reserved bytes are not looked at
  EXPECT_EQ(c->target_sgl, (Sge{0x1000, 7, 2}));
  EXPECT_EQ(c->data_buf, (Sge{0x2000, 8, 4096}));
  EXPECT_FALSE(decode_conn_data(std::span(b).first(39)).has_value());
  b[0] = 2;
  EXPECT_FALSE(decode_conn_data(b).has_value());
}

TEST(RsocketWire, put_sge__in_the_table_owners_byte_order) {
  uint8_t le[kSgeSize], be[kSgeSize];
  const Sge s{0x0102030405060708ull, 0x11223344, 0x00010000};
  put_sge(le, s, false);
  put_sge(be, s, true);
  EXPECT_EQ(Bytes(le, le + 16),
            (Bytes{8, 7, 6, 5, 4, 3, 2, 1, 0x44, 0x33, 0x22, 0x11, 0, 0, 1, 0}));
  EXPECT_EQ(Bytes(be, be + 16),
            (Bytes{1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x22, 0x33, 0x44, 0, 1, 0, 0}));
  EXPECT_EQ(get_sge(le, false), s);
  EXPECT_EQ(get_sge(be, true), s);
}

TEST(RsocketWire, put_iomap_entry__offset_then_sge) {
  uint8_t out[kIomapEntrySize];
  const IomapEntry e{0x40, {0x7000, 0x99, 0x10000}};
  put_iomap_entry(out, e, false);
  EXPECT_EQ(Bytes(out, out + 24),
            (Bytes{0x40, 0, 0, 0, 0, 0, 0, 0,     // offset
                   0, 0x70, 0, 0, 0, 0, 0, 0,     // address
                   0x99, 0, 0, 0, 0, 0, 1, 0}));  // key, length
  EXPECT_EQ(get_iomap_entry(out, false), e);
}

TEST(RsocketWire, iomap_scale_of__small_as_is_large_in_units_of_256) {
  EXPECT_EQ(iomap_scale_of(0), 0);
  EXPECT_EQ(iomap_scale_of(128), 128);
  EXPECT_EQ(iomap_scale_of(512), 0x82);
  EXPECT_EQ(iomap_size_of(0x82), 512u);
  EXPECT_EQ(iomap_size_of(iomap_scale_of(1000)), 768u);  // rounded down
  EXPECT_EQ(iomap_size_of(7), 7u);
}

sockaddr_in v4(const char* ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip, &a.sin_addr);
  return a;
}

sockaddr_in6 v6(const char* ip, uint16_t port, uint32_t flow) {
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(port);
  a.sin6_flowinfo = htonl(flow);
  inet_pton(AF_INET6, ip, &a.sin6_addr);
  return a;
}

TEST(RsocketWire, put_ds_header__ipv4_eight_bytes) {
  const sockaddr_in a = v4("127.0.0.2", 7174);
  uint8_t out[32];
  ASSERT_EQ(put_ds_header(out, reinterpret_cast<const sockaddr*>(&a)), 8u);
  EXPECT_EQ(Bytes(out, out + 8), (Bytes{4, 8, 0x1c, 0x06, 127, 0, 0, 2}));
  sockaddr_storage from;
  ASSERT_EQ(get_ds_header(Bytes(out, out + 8), from), 8u);
  const auto* in = reinterpret_cast<const sockaddr_in*>(&from);
  EXPECT_EQ(in->sin_family, AF_INET);
  EXPECT_EQ(in->sin_port, a.sin_port);
  EXPECT_EQ(in->sin_addr.s_addr, a.sin_addr.s_addr);
}

TEST(RsocketWire, put_ds_header__ipv6_with_flow_label) {
  const sockaddr_in6 a = v6("fe80::1", 5000, 0x12345);
  uint8_t out[32];
  ASSERT_EQ(put_ds_header(out, reinterpret_cast<const sockaddr*>(&a)), 24u);
  EXPECT_EQ(Bytes(out, out + 24), (Bytes{6, 24, 0x13, 0x88, 0, 0x01, 0x23, 0x45, 0xfe, 0x80, 0, 0,
                                         0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}));
  sockaddr_storage from;
  ASSERT_EQ(get_ds_header(Bytes(out, out + 24), from), 24u);
  EXPECT_EQ(std::memcmp(&from, &a, sizeof a), 0);
}

TEST(RsocketWire, get_ds_header__wrong_version_length_or_short__invalid) {
  sockaddr_storage from;
  EXPECT_EQ(get_ds_header(Bytes{4, 24, 0, 1, 1, 2, 3, 4}, from), 0u);
  EXPECT_EQ(get_ds_header(Bytes{5, 8, 0, 1, 1, 2, 3, 4}, from), 0u);
  EXPECT_EQ(get_ds_header(Bytes{4, 8, 0, 1, 1, 2, 3}, from), 0u);
  EXPECT_EQ(get_ds_header(Bytes{6, 24, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}, from), 0u);  // short
}

TEST(RsocketWire, put_ds_udp_header__ipv4_sixteen_bytes) {
  const sockaddr_in a = v4("127.0.0.1", 1);
  uint8_t out[32];
  ASSERT_EQ(put_ds_udp_header(out, Op::kData, 0xab000123, reinterpret_cast<const sockaddr*>(&a)),
            16u);
  EXPECT_EQ(Bytes(out, out + 16), (Bytes{0x55, 0x55, 0x55, 0x55, 4, 0, 16, 0, 0, 0, 0x01, 0x23,
                                         127, 0, 0, 1}));
  const auto h = get_ds_udp_header(Bytes(out, out + 16), AF_INET);
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->op, Op::kData);
  EXPECT_EQ(h->qpn, 0x123u);
  EXPECT_EQ(h->length, 16u);
  EXPECT_FALSE(get_ds_udp_header(Bytes(out, out + 16), AF_INET6).has_value());  // family
}

TEST(RsocketWire, put_ds_udp_header__ipv6_ctrl_reply) {
  const sockaddr_in6 a = v6("::1", 9, 0);
  uint8_t out[32];
  ASSERT_EQ(put_ds_udp_header(out, Op::kCtrl, 0x00fffffe, reinterpret_cast<const sockaddr*>(&a)),
            28u);
  Bytes want = {0x55, 0x55, 0x55, 0x55, 6, 7, 28, 0, 0, 0xff, 0xff, 0xfe};
  want.resize(28, 0);
  want[27] = 1;
  EXPECT_EQ(Bytes(out, out + 28), want);
  const auto h = get_ds_udp_header(want, AF_INET6);
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->op, Op::kCtrl);
  EXPECT_EQ(h->qpn, 0xfffffeu);
}

TEST(RsocketWire, get_ds_udp_header__bad_tag_length_or_short__refused) {
  Bytes b = {0x55, 0x55, 0x55, 0x55, 4, 0, 16, 0, 0, 0, 0, 9, 127, 0, 0, 1};
  EXPECT_TRUE(get_ds_udp_header(b, AF_INET).has_value());
  Bytes bad_tag = b;
  bad_tag[3] = 0x54;
  EXPECT_FALSE(get_ds_udp_header(bad_tag, AF_INET).has_value());
  Bytes bad_len = b;
  bad_len[6] = 28;
  EXPECT_FALSE(get_ds_udp_header(bad_len, AF_INET).has_value());
  EXPECT_FALSE(get_ds_udp_header(std::span(b).first(15), AF_INET).has_value());
}

}  // namespace
}  // namespace vrnic::rdmacm::rs
