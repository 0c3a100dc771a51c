#!/usr/bin/python3
"""rsockets between two hosts: rdma-core's own rsocket programs (Debian's rdmacm-utils and
librspreload.so) on vrnic's librdmacm in two network namespaces joined by a veth pair (MTU
1500, segmentation in software so that each RoCE packet is its own IP packet), every process
run as a plain user.

  rsocket_veth.py --bin BUILD/bin rsocket_mtu1500|rsocket_loss1_mtu1500

Server in namespace b (10.97.0.2), client in a (10.97.0.1), each `runuser -u nobody --
vrnic run --stats --ip ADDR -- PROGRAM`:
  rstream -T v and riostream -T v, 1,000 messages of 64 KiB each way, every byte checked;
  rcopy of a 16 MiB file, compared with cmp; udpong, 1,000 datagrams of 1000 B one way (at
  least half received; the first datagram goes over kernel UDP, the rest as UD SENDs); iperf
  -n 16M under librspreload.so (TCP turned into stream rsockets; the client's vrnic must have
  sent the 16 MiB: the preload library falls back to kernel TCP silently).
rsocket_loss1: nftables in each namespace drops 1 % of the RoCEv2 packets it receives from the
veth (`numgen random`); the same runs must pass, and the pairs' counters must show resends.
Exit status: 0 pass, 1 fail, 77 skipped (not root, no `ip netns`, no nft, no user nobody, a
program missing).
"""
import argparse
import os
import pwd
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../faults"))
from faults_common import counters  # noqa: E402
from veth_wire import Skipped, VethPair, run_case  # noqa: E402

USER = "nobody"  # a plain user every Debian system has
RSPRELOAD = "/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so"
MIB16 = 16 << 20


def drop_received(veth, per10000):
    """nftables in both namespaces: drop `per10000` / 10000 of the RoCEv2 packets each
    receives from the veth (on receive: a drop on send fails the sender's sendmsg)."""
    for i in range(2):
        rules = ("table ip vrnic_rs_loss {\n chain pre {\n"
                 "  type filter hook prerouting priority 0;\n"
                 f'  iifname "{veth.dev[i]}" udp dport 4791 numgen random mod 10000 < {per10000}'
                 " counter drop\n }\n}\n")
        r = subprocess.run([*veth.exec(i), "nft", "-f", "-"], input=rules, capture_output=True,
                           text=True)
        if r.returncode != 0:
            raise Skipped(f"nft: {r.stderr.strip()}")


def dropped(veth):
    """Packets the nft rules dropped, per namespace."""
    out = []
    for i in range(2):
        text = veth.run(*veth.exec(i), "nft", "list", "table", "ip", "vrnic_rs_loss")
        m = re.search(r"counter packets (\d+)", text)
        out.append(int(m.group(1)) if m else 0)
    return out


class Pair:
    """A server in namespace b and a client in namespace a, both as USER under `vrnic run`."""

    def __init__(self, veth, vrnic, tmp):
        self.veth, self.vrnic, self.tmp = veth, vrnic, tmp

    def start(self, side, argv, tag):
        i = 1 if side == "server" else 0
        log = os.path.join(self.tmp, f"{tag}.{side}.log")
        cmd = [*self.veth.exec(i), "runuser", "-u", USER, "--", self.vrnic, "run", "--stats",
               "--ip", self.veth.addr[i], "--", *argv]
        p = subprocess.Popen(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                             start_new_session=True, cwd=self.tmp)
        return p, log

    def udp_bound(self, port):
        """Whether namespace b has a UDP socket bound to `port` (a datagram rsocket's)."""
        out = self.veth.run(*self.veth.exec(1), "ss", "-Huln", f"sport = :{port}")
        return bool(out.strip())

    def run(self, tag, server, client, persists=False, timeout=180, udp_port=None):
        """Problems, the server's and the client's log text. The client starts 3 s after the
        server, or once the server's UDP port is bound (a datagram server, `udp_port`)."""
        s, slog = self.start("server", server, tag)
        for _ in range(100 if udp_port else 1):
            time.sleep(0.1 if udp_port else 3)
            if udp_port and self.udp_bound(udp_port):
                break
        c, clog = self.start("client", client, tag)
        problems = []
        t0 = time.time()
        try:
            rc = c.wait(timeout=timeout)
            if rc:
                problems.append(f"{tag} client: exit {rc}")
        except subprocess.TimeoutExpired:
            os.killpg(c.pid, signal.SIGKILL)
            problems.append(f"{tag} client: no exit within {timeout} s")
        elapsed = time.time() - t0
        if persists:
            time.sleep(0.5)
            os.killpg(s.pid, signal.SIGTERM)
        try:
            rc = s.wait(timeout=30)
            if rc and not persists:
                problems.append(f"{tag} server: exit {rc}")
        except subprocess.TimeoutExpired:
            os.killpg(s.pid, signal.SIGKILL)
            problems.append(f"{tag} server: no exit")
        texts = [open(slog).read(), open(clog).read()]
        print(f"----- {tag}: client {elapsed:.1f} s, pair {time.time() - t0:.1f} s -----")
        for side, text in zip(("server", "client"), texts):
            for line in [l for l in text.splitlines() if not re.match(r"^\w+ \d+$", l)][-8:]:
                print(f"[{side}] {line}")
        return problems, texts


def expect(tag, text, side, patterns, forbid=()):
    problems = [f"{tag} {side}: no /{p}/" for p in patterns if not re.search(p, text)]
    return problems + [f"{tag} {side}: /{p}/ printed" for p in forbid if re.search(p, text)]


def summed(texts):
    total = {}
    for t in texts:
        for k, v in counters(t).items():
            total[k] = total.get(k, 0) + v
    return total


def case_rsocket(veth, vrnic, tmp, loss):
    try:
        pwd.getpwnam(USER)
    except KeyError:
        raise Skipped(f"no user {USER} (useradd -m {USER})")
    os.chmod(tmp, 0o777)
    for i in range(2):
        veth.run(*veth.exec(i), "ethtool", "-K", veth.dev[i], "tx-udp-segmentation", "off")
    if loss:
        drop_received(veth, loss)
    pair, srv, problems, resent = Pair(veth, vrnic, tmp), veth.addr[1], [], 0
    for tool in ("rstream", "riostream"):
        opts = ["-T", "v", "-S", "65536", "-C", "1000"]
        p, texts = pair.run(tool, [tool, "-b", srv, *opts], [tool, "-s", srv, *opts])
        problems += p
        for side, text in zip(("server", "client"), texts):
            problems += expect(tool, text, side, [r"(?m)^custom\s+64k\s+1k\s"],
                               ["verification failed"])
        resent += summed(texts).get("retransmitted_packets", 0)
    src, dst = os.path.join(tmp, "src.bin"), os.path.join(tmp, "dst.bin")
    with open(src, "wb") as f:
        f.write(os.urandom(MIB16))
    os.chmod(src, 0o644)
    p, texts = pair.run("rcopy", ["rcopy"], ["rcopy", src, f"{srv}:{dst}"], persists=True)
    problems += p + expect("rcopy", texts[1], "client", [rf"{MIB16} bytes in [\d.]+ seconds"])
    if not os.path.exists(dst) or subprocess.run(["cmp", src, dst]).returncode:
        problems.append("rcopy: dst.bin is not src.bin")
    resent += summed(texts).get("retransmitted_packets", 0)
    # udpong one way (its bandwidth mode): the count in the client's row is what the server
    # received. Not its echo mode (-T e): its client reads each echo into the message it
    # resends, so once an echo is late past its 1 ms resend and the datagram of the current
    # number is then lost, it resends a stale number for ever (rdma-core's udpong does the
    # same on any network that loses a datagram).
    p, texts = pair.run("udpong", ["stdbuf", "-oL", "udpong", "-b", srv],
                        ["udpong", "-s", srv, "-S", "1000", "-C", "1000"], persists=True,
                        udp_port=7174)
    problems += p + expect("udpong", texts[0], "server", [rf"client login from {veth.addr[0]}"])
    # udpong prints the count as rdma-core's size_str does: 1000 and more as "1k".
    m = re.search(r"(?m)^custom\s+1000\s+(\d+)(k?)\s", texts[1])
    got = int(m.group(1)) * (1000 if m.group(2) else 1) if m else None
    print(f"udpong: the server received {got if m else 'no count'} of 1000 datagrams")
    if not m or got < 500:
        problems.append("udpong: the client printed no row, or the server got under 500")
    if counters(texts[1]).get("tx_send", 0) < 1000:
        problems.append("udpong: the client's vrnic sent fewer than 1000 UD SENDs")
    preload = ["env", f"LD_PRELOAD={RSPRELOAD}", "iperf"]
    p, texts = pair.run("iperf", [*preload, "-s", "-p", "5201"],
                        [*preload, "-c", srv, "-p", "5201", "-n", "16M"], persists=True)
    problems += p + expect("iperf", texts[1], "client", [r"16\.0 MBytes"])
    problems += expect("iperf", texts[0], "server", [rf"connected with {veth.addr[0]}"])
    sent = counters(texts[1]).get("tx_bytes", 0)
    print(f"iperf: the client's vrnic sent {sent} bytes")
    if sent < MIB16:
        problems.append(f"iperf: the client's vrnic sent {sent} bytes: not over rsockets")
    resent += summed(texts).get("retransmitted_packets", 0)
    if loss:
        drops = dropped(veth)
        print(f"nft dropped {drops[0]} packets in namespace a, {drops[1]} in b; "
              f"stream pairs resent {resent} packets")
        if min(drops) == 0 or resent == 0:
            problems.append("loss: no packet dropped in a namespace, or none resent")
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("case", choices=["rsocket_mtu1500", "rsocket_loss1_mtu1500"])
    a = ap.parse_args()
    vrnic = os.path.join(os.path.abspath(a.bin), "vrnic")
    loss = 100 if "loss1" in a.case else 0
    tools = ("ip", "ethtool", "nft", "runuser", "rstream", "riostream", "rcopy", "udpong",
             "iperf")
    if not os.path.exists(RSPRELOAD):
        print(f"SKIPPED: {RSPRELOAD} (librdmacm1) is not installed")
        return 77
    return run_case(a.case, 1500, tools, lambda veth, tmp: case_rsocket(veth, vrnic, tmp, loss))


if __name__ == "__main__":
    sys.exit(main())
