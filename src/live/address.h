// Device address allocation: VRNIC_IP, or the first free loopback address, held by a bind.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "transport/udp/udp_port.h"

namespace vrnic::live {

// Opens the device's UDP port (RoCEv2, 4791). With `requested` non-empty (VRNIC_IP) that
// address is used; otherwise `reserved` if it is an address that can be had, then
// 127.0.0.1 .. 127.0.0.254 in order, the first on which (address, 4791) can be bound. The
// exclusive bind is the lock between processes: it is held as long as the port is open.
// Returns null and sets err: EINVAL (not an address), EADDRINUSE (taken / none free), or the
// bind's errno; `message` says why.
std::unique_ptr<transport::UdpPort> open_device_port(const std::string& requested,
                                                     const std::string& reserved,
                                                     transport::UdpPortOptions options,
                                                     int& err, std::string& message);

// `vrnic run` picks the program's address before exec (its sysfs view shows that address):
// the first one free at that moment, named in kReservationEnv ("ADDRESS"), which the program
// (or any process it starts) passes to open_device_port as `reserved` (LiveConfig): a
// process that took the address meanwhile only moves the program to the next.
inline constexpr char kReservationEnv[] = "VRNIC_RESERVED";
// Binds (first free loopback address, 4791) as open_device_port would and returns the socket,
// or -1 with err and message set as open_device_port sets them.
int reserve_device_address(transport::IpAddress& address, int& err, std::string& message);

// MTU of the interface holding `address` (0 if not found).
int interface_mtu(const transport::IpAddress& address);
// Name of the interface holding `address` ("lo" for all of 127/8); empty if none.
std::string interface_name(const transport::IpAddress& address);

// The largest IB path MTU (IBV_MTU_* enum, 1..5) whose packets, with IP, UDP, BTH, RETH,
// ImmDt and ICRC around them, fit in an interface MTU of `if_mtu`; at most `max_mtu`.
uint8_t ib_mtu_for(int if_mtu, bool ipv6, uint8_t max_mtu);

}  // namespace vrnic::live
