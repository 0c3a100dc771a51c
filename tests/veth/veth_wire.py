#!/usr/bin/python3
"""RoCEv2 between two hosts: two network namespaces joined by a veth pair at MTU 1500 or 9000.

  veth_wire.py --bin BUILD/bin icrc_mtu1500|icrc_mtu9000|data_mtu1500|data_mtu9000|
                               fi_msg_mtu1500|fi_rdm_mtu1500|fi_dgram_mtu1500

icrc_*: both veth ends segment in software (tx-udp-segmentation off), as a NIC without UDP
segmentation offload does, and dumpcap records what crosses the link while ib_write_bw and
ib_read_bw move 64 KiB messages. Every RoCE frame must carry the ICRC of its own IP header (the
IP ID the kernel gave that segment), fit the link MTU, and some frames must be segments after
the first of a group (IP ID > 0): vrnic handed the kernel whole groups.
data_*: offload on (the veth passes the groups whole, the receiver reads them with UDP_GRO);
vrnic_integrity checks every byte of its WRITEs, READs and SENDs.
fi_*: libfabric's fi_pingpong over its verbs provider (MSG through the RDMA CM, RDM through
ofi_rxm on MSG, DGRAM on UD), every size from 64 B to 1 MiB answered (DGRAM: to the 1 KiB
path MTU), 1000 round trips each (libfabric lists verbs
endpoints only for devices whose address is on a non-loopback interface: hence the veth).
In all, neither side may count an ICRC error.
Exit status: 0 pass, 1 fail, 77 skipped (not root, no `ip netns`, no ethtool/dumpcap).
"""
import argparse
import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import time
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../faults"))
from faults_common import counters  # noqa: E402


class Skipped(Exception):
    pass


class VethPair:
    """Namespaces a (10.97.0.1) and b (10.97.0.2), removed on exit."""

    def __init__(self, mtu):
        tag = str(os.getpid())
        self.ns = [f"vrnicw-a-{tag}", f"vrnicw-b-{tag}"]
        self.dev = [f"vwa{tag}"[:15], f"vwb{tag}"[:15]]
        self.addr = ["10.97.0.1", "10.97.0.2"]
        self.mtu = mtu

    def run(self, *args):
        r = subprocess.run(list(args), capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip()}")
        return r.stdout

    def __enter__(self):
        if os.geteuid() != 0:
            raise Skipped("not root: network namespaces need CAP_NET_ADMIN")
        for ns in self.ns:
            if subprocess.run(["ip", "netns", "add", ns], capture_output=True).returncode:
                self.__exit__()
                raise Skipped("ip netns add failed")
        self.run("ip", "link", "add", self.dev[0], "netns", self.ns[0], "type", "veth",
                 "peer", "name", self.dev[1], "netns", self.ns[1])
        for i in range(2):
            self.run("ip", "-n", self.ns[i], "link", "set", self.dev[i], "mtu", str(self.mtu))
            self.run("ip", "-n", self.ns[i], "addr", "add", self.addr[i] + "/24", "dev",
                     self.dev[i])
            self.run("ip", "-n", self.ns[i], "link", "set", self.dev[i], "up")
            self.run("ip", "-n", self.ns[i], "link", "set", "lo", "up")
        return self

    def __exit__(self, *exc):
        for ns in self.ns:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        return False

    def exec(self, i):
        return ["ip", "netns", "exec", self.ns[i]]


def icrc_ok(ip_packet):
    """(checked, ok, ip_id) for one IPv4 packet: the RoCEv2 ICRC (IBA A17.3.3) over the
    masked IP/UDP/BTH headers and the payload, against the four bytes it ends with."""
    ihl = (ip_packet[0] & 0x0F) * 4
    if ip_packet[0] >> 4 != 4 or ip_packet[9] != 17 or len(ip_packet) < ihl + 8 + 12 + 4:
        return False, False, 0
    if struct.unpack("!H", ip_packet[ihl + 2:ihl + 4])[0] != 4791:
        return False, False, 0
    masked = bytearray(ip_packet[:-4])
    masked[1] = 0xFF              # DSCP/ECN
    masked[8] = 0xFF              # TTL
    masked[10:12] = b"\xff\xff"   # header checksum
    masked[ihl + 6:ihl + 8] = b"\xff\xff"  # UDP checksum
    masked[ihl + 8 + 4] = 0xFF    # BTH reserved byte (resv8a)
    crc = zlib.crc32(b"\xff" * 8 + bytes(masked)) & 0xFFFFFFFF
    stored = int.from_bytes(ip_packet[-4:], "little")
    return True, crc == stored, struct.unpack("!H", ip_packet[4:6])[0]


def read_pcap(path):
    """The frames of a classic pcap file (Ethernet link type)."""
    data = open(path, "rb").read()
    magic = struct.unpack("<I", data[:4])[0]
    endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    off, frames = 24, []
    while off + 16 <= len(data):
        _, _, incl, _ = struct.unpack(endian + "IIII", data[off:off + 16])
        frames.append(data[off + 16:off + 16 + incl])
        off += 16 + incl
    return frames


def start_pair(veth, vrnic, server, client, tmp, tag):
    """server in namespace b, client in a; returns both logs' text after both exit."""
    logs = [os.path.join(tmp, f"{tag}.{side}.log") for side in ("server", "client")]
    s = subprocess.Popen([*veth.exec(1), vrnic, "run", "--stats", "--ip", veth.addr[1], "--",
                          *server], stdout=open(logs[0], "w"), stderr=subprocess.STDOUT)
    time.sleep(1)
    c = subprocess.Popen([*veth.exec(0), vrnic, "run", "--stats", "--ip", veth.addr[0], "--",
                          *client], stdout=open(logs[1], "w"), stderr=subprocess.STDOUT)
    problems = []
    for name, p in (("client", c), ("server", s)):
        try:
            rc = p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = "timeout"
        if rc != 0:
            problems.append(f"{tag} {name}: exit {rc}")
    texts = [open(x).read() for x in logs]
    if problems:  # the server's own words too: a failed case otherwise shows the client's only
        print(f"----- {tag} server (failed pair) -----\n" + "\n".join(texts[0].splitlines()[-40:]))
    return problems, texts


def check_counters(tag, texts):
    problems = []
    for side, text in zip(("server", "client"), texts):
        c = counters(text)
        shown = {k: c.get(k, 0) for k in ("tx_packets", "rx_packets", "rx_icrc_errors",
                                          "rx_icrc_ip_id_recovered", "retransmitted_packets")}
        print(f"{tag} {side}: {shown}")
        if c.get("rx_icrc_errors", 0):
            problems.append(f"{tag} {side}: {c['rx_icrc_errors']} ICRC errors")
    return problems


def case_icrc(veth, vrnic, tmp):
    problems = []
    for i in range(2):
        veth.run(*veth.exec(i), "ethtool", "-K", veth.dev[i], "tx-udp-segmentation", "off")
    pcap = os.path.join(tmp, "link.pcap")
    cap = subprocess.Popen([*veth.exec(0), "dumpcap", "-q", "-P", "-i", veth.dev[0], "-f",
                            "udp port 4791", "-w", pcap], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    time.sleep(1.5)
    for tool in ("ib_write_bw", "ib_read_bw"):
        args = [tool, "-s", "65536", "-n", "300"]
        p, texts = start_pair(veth, vrnic, args, [*args, veth.addr[1]], tmp, tool)
        problems += p + check_counters(tool, texts)
    time.sleep(0.5)
    cap.send_signal(signal.SIGINT)
    cap.wait(timeout=10)
    checked = bad = later = too_big = 0
    for f in read_pcap(pcap):
        if len(f) < 14 or f[12:14] != b"\x08\x00":
            continue
        ip = f[14:]
        is_roce, ok, ip_id = icrc_ok(ip)
        if not is_roce:
            continue
        checked += 1
        bad += not ok
        later += ip_id > 0
        too_big += len(ip) > veth.mtu
    print(f"capture: {checked} RoCE frames, {bad} with a wrong ICRC, {later} with IP ID > 0, "
          f"{too_big} over the {veth.mtu} B MTU")
    if checked < 1000:
        problems.append(f"only {checked} RoCE frames captured")
    if bad:
        problems.append(f"{bad} frames with a wrong ICRC")
    if too_big:
        problems.append(f"{too_big} frames over the MTU")
    if later < checked // 4:
        problems.append(f"{later} of {checked} frames were later segments of a group: "
                        "segmentation offload was not used")
    return problems


def case_data(veth, vrnic, tmp):
    integrity = os.path.join(os.path.dirname(vrnic), "vrnic_integrity")
    problems = []
    for mode in ("data", "access"):
        p, texts = start_pair(veth, vrnic, [integrity, "server", "18900", "1", "0"],
                              [integrity, "client", veth.addr[1], "18900", mode], tmp, mode)
        problems += p + check_counters(mode, texts)
        if not re.search(rf"client {mode}: PASS", texts[1]):
            problems.append(f"{mode}: the client printed no PASS")
        print(f"----- {mode} client -----\n" + "\n".join(
            l for l in texts[1].splitlines() if not re.match(r"^\w+ \d+$", l)))
    return problems


def case_fi(veth, vrnic, tmp, ep):
    if subprocess.run(["which", "fi_pingpong"], capture_output=True).returncode:
        raise Skipped("'fi_pingpong' (libfabric-bin) is not installed")
    provider = "verbs;ofi_rxm" if ep == "rdm" else "verbs"
    args = ["fi_pingpong", "-p", provider, "-e", ep, "-I", "1000"]
    problems, texts = start_pair(veth, vrnic, args, [*args, veth.addr[1]], tmp, ep)
    problems += check_counters(ep, texts)
    rows = re.findall(r"^(\S+)\s+1k\s+=1k\s", texts[1], re.M)
    print(f"----- {ep} client -----\n" + "\n".join(
        l for l in texts[1].splitlines() if not re.match(r"^\w+ \d+$", l)))
    # A datagram is at most one path MTU (1024 B here): DGRAM stops at 1 KiB.
    want = ["64", "256", "1k"] + ([] if ep == "dgram" else ["4k", "64k", "1m"])
    if rows != want:
        problems.append(f"{ep}: client rows {rows}, want {want}, each with 1k acks")
    if counters(texts[1]).get("tx_packets", 0) < 1000 * len(want):
        problems.append(f"{ep}: the client's vrnic sent too few packets: not over vrnic")
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("case", choices=["icrc_mtu1500", "icrc_mtu9000", "data_mtu1500",
                                     "data_mtu9000", "fi_msg_mtu1500", "fi_rdm_mtu1500",
                                     "fi_dgram_mtu1500"])
    a = ap.parse_args()
    vrnic = os.path.join(os.path.abspath(a.bin), "vrnic")
    kind, mtu = a.case.rsplit("_mtu", 1)

    def body(veth, tmp):
        if kind.startswith("fi_"):
            return case_fi(veth, vrnic, tmp, kind[3:])
        return (case_icrc if kind == "icrc" else case_data)(veth, vrnic, tmp)
    return run_case(a.case, int(mtu), ("ip", "ethtool", "dumpcap", "ib_write_bw"), body)


def run_case(name, mtu, tools, body):
    """Runs body(veth, tmp) on a fresh VethPair; prints the problems it returns. Exit status:
    0 pass, 1 fail, 77 skipped (a tool missing, not root, no namespaces)."""
    def go():
        for tool in tools:
            if subprocess.run(["which", tool], capture_output=True).returncode:
                raise Skipped(f"'{tool}' is not installed")
        with VethPair(mtu) as veth, tempfile.TemporaryDirectory() as tmp:
            return body(veth, tmp)
    return report(name, go)


def report(name, go):
    """Runs go(), which returns a list of problems or raises Skipped; prints the outcome.
    Exit status: 0 pass, 1 fail, 77 skipped."""
    try:
        problems = go()
    except Skipped as e:
        print(f"SKIPPED: {e}")
        return 77
    for p in problems:
        print(f"FAIL: {p}")
    print(f"== {name}: {'FAIL' if problems else 'PASS'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
