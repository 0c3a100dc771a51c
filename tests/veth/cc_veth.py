#!/usr/bin/python3
"""Congestion control between two hosts: two network namespaces joined by a veth pair (MTU
1500, segmentation in software so that each RoCE packet is its own IP packet), nftables in the
receiver's namespace marking CE on a fraction of the ECT(0) RoCEv2 packets it gets (this kernel
has no RED, so marking is random, not queue-driven).

  cc_veth.py --bin BUILD/bin cc_mark10

cc_mark10: a short marked run captured on the receiver's end: data frames leave ECT(0) and the
CNPs coming back decode in tshark as CNPs (opcode 0x81) from the receiver, DSCP 48, Not-ECT.
ib_write_bw (64 KiB, -D 3) unmarked and 10 % marked: np_cnp_sent > 0 at the receiver and
rp_cnp_handled > 0 at the sender (both figures printed). Then, the port's line_rate set to
1.25x what the unmarked run moved and the limiter's first rate to half of it (see
case_mark10), one run, 2 s unmarked, 2 s with 10 % marked, 3 s unmarked, the sender's bytes
and QP rate sampled from `vrnic stats` every 50 ms: the marked stretch moves below 0.8x the
unmarked one before it; after the marking stops the QP is released back to line rate
("(released)") and the last second moves at least 0.8x what the run moved before the marking.
Exit status: 0 pass, 1 fail, 77 skipped (not root, no `ip netns`, no nft/ethtool/tshark).
"""
import argparse
import os
import re
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../faults"))
from faults_common import counters  # noqa: E402
from veth_wire import VethPair, run_case  # noqa: E402

BW_ROW = re.compile(r"^\s*65536\s+(\d+)\s+[\d.]+\s+([\d.]+)", re.M)
RATE = re.compile(r"^qp 0x([0-9a-f]+) rate ([\d.]+) Mb/s target ([\d.]+) Mb/s alpha ([\d.]+)"
                  r"( \(released\))?$", re.M)


def set_marking(veth, percent):
    """nftables in the receiver's namespace: CE on `percent` % of ECT(0) RoCEv2 packets."""
    veth.run(*veth.exec(1), "nft", "flush", "ruleset")
    if percent <= 0:
        return
    rules = ("table inet vrnic_cc {\n chain pre {\n"
             "  type filter hook prerouting priority -300;\n"
             f"  udp dport 4791 ip ecn ect0 numgen random mod 100 < {percent} ip ecn set ce\n"
             " }\n}\n")
    r = subprocess.run([*veth.exec(1), "nft", "-f", "-"], input=rules, capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise RuntimeError(f"nft: {r.stderr.strip()}")


def software_segmentation(veth):
    for i in range(2):
        veth.run(*veth.exec(i), "ethtool", "-K", veth.dev[i], "tx-udp-segmentation", "off")


def stats_blocks(vrnic):
    """`vrnic stats`: {ip: (counters, [rates])} of every running vrnic program."""
    out = subprocess.run([vrnic, "stats"], capture_output=True, text=True).stdout
    blocks = {}
    for block in out.split("# pid ")[1:]:
        ip = block.split("\n", 1)[0].split()[-1]
        values = {k: int(v) for k, v in re.findall(r"^([a-z0-9_]+) (\d+)$", block, re.M)}
        rates = [(int(q, 16), float(r), float(t), float(a), bool(rel))
                 for q, r, t, a, rel in RATE.findall(block)]
        blocks[ip] = (values, rates)
    return blocks


def write_bw(veth, vrnic, seconds, tmp, tag, during=None, cc=None):
    """ib_write_bw -D seconds from a to b, both with `vrnic run --cc cc` if given.
    during(t0, client_ip): called in a thread while it runs. Returns (MB/s, server output,
    client output)."""
    logs = [os.path.join(tmp, f"{tag}.{s}.log") for s in ("server", "client")]
    args = ["ib_write_bw", "-s", "65536", "-D", str(seconds)]
    opts = ["--stats", *(["--cc", cc] if cc else [])]
    s = subprocess.Popen([*veth.exec(1), vrnic, "run", *opts, "--ip", veth.addr[1], "--",
                          *args], stdout=open(logs[0], "w"), stderr=subprocess.STDOUT)
    time.sleep(1)
    c = subprocess.Popen([*veth.exec(0), vrnic, "run", *opts, "--ip", veth.addr[0], "--",
                          *args, veth.addr[1]], stdout=open(logs[1], "w"),
                         stderr=subprocess.STDOUT)
    worker = None
    if during:
        worker = threading.Thread(target=during, args=(time.monotonic(), veth.addr[0]))
        worker.start()
    for p in (c, s):
        try:
            p.wait(timeout=seconds + 60)
        except subprocess.TimeoutExpired:
            p.kill()
    if worker:
        worker.join()
    out = [open(x).read() for x in logs]
    m = BW_ROW.search(out[1])
    return (float(m.group(2)) if m else 0.0), out[0], out[1]


def burst(veth, vrnic, tmp, before_s, marked_s, after_s, percent=10, period=0.05, cc=None):
    """One run: unmarked for before_s seconds, marked for marked_s, unmarked for after_s.
    Samples of the sender's bytes sent and QP rates: [(t, tx_bytes, [rates])], t from the
    client's start."""
    samples = []
    total_s = before_s + marked_s + after_s

    def sample(t0, ip):
        t0 += 1  # the client starts a second after the server
        phase = 0
        while time.monotonic() - t0 < total_s:
            t = time.monotonic() - t0
            if phase == 0 and t >= before_s:
                set_marking(veth, percent)
                phase = 1
            if phase == 1 and t >= before_s + marked_s:
                set_marking(veth, 0)
                phase = 2
            b = stats_blocks(vrnic).get(ip)
            if b:
                samples.append((t, b[0].get("tx_bytes", 0), b[1]))
            time.sleep(period)
        set_marking(veth, 0)

    bw, srv, cli = write_bw(veth, vrnic, total_s, tmp, "burst", during=sample, cc=cc)
    return samples, bw, srv, cli


def throughput(samples, t_from, t_to):
    """MB/s the sender moved between two sample times (the samples nearest inside)."""
    inside = [s for s in samples if t_from <= s[0] <= t_to]
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return 0.0
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0]) / 1e6


def capture_check(veth, vrnic, tmp):
    """A short marked run with dumpcap on b's end: ECT(0) data, decoded CNPs with DSCP 48."""
    pcap = os.path.join(tmp, "cc.pcap")
    cap = subprocess.Popen([*veth.exec(1), "dumpcap", "-q", "-i", veth.dev[1], "-s", "128",
                            "-w", pcap], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1)
    set_marking(veth, 10)
    write_bw(veth, vrnic, 1, tmp, "capture")
    set_marking(veth, 0)
    time.sleep(0.5)
    cap.terminate()
    cap.wait()

    def fields(flt, *names):
        r = subprocess.run(["tshark", "-r", pcap, "-Y", flt, "-T", "fields",
                            *[x for n in names for x in ("-e", n)]], capture_output=True,
                           text=True)
        return [line.split("\t") for line in r.stdout.splitlines() if line]

    data = fields("infiniband.bth.opcode >= 6 && infiniband.bth.opcode <= 11",  # RC WRITEs
                  "ip.dsfield.ecn")
    cnps = fields("infiniband.bth.opcode == 129", "ip.dsfield.dscp", "ip.dsfield.ecn",
                  "ip.src")
    problems = []
    ecn = {row[0] for row in data}
    print(f"capture: {len(data)} WRITE frames, ECN values {sorted(ecn)}; "
          f"{len(cnps)} CNPs, DSCP/ECN {sorted({(r[0], r[1]) for r in cnps})}")
    if not data or not ecn <= {"2", "3"} or "2" not in ecn:
        problems.append(f"data frames are not ECT(0) (ECN {sorted(ecn)})")
    if not cnps:
        problems.append("no CNP decoded by tshark")
    elif any(r[0] != "48" or r[1] != "0" or r[2] != veth.addr[1] for r in cnps):
        problems.append("a CNP not from the receiver with DSCP 48, Not-ECT")
    return problems


def case_mark10(veth, vrnic, tmp):
    software_segmentation(veth)
    problems = capture_check(veth, vrnic, tmp)
    clean, _, _ = write_bw(veth, vrnic, 3, tmp, "clean")
    set_marking(veth, 10)
    marked, srv, cli = write_bw(veth, vrnic, 3, tmp, "marked")
    set_marking(veth, 0)
    np_sent = counters(srv).get("np_cnp_sent", 0)
    rp_handled = counters(cli).get("rp_cnp_handled", 0)
    print(f"ib_write_bw 64 KiB -D 3: unmarked {clean:.0f} MB/s, 10 % marked {marked:.0f} MB/s "
          f"({marked / clean if clean else 0:.2f}x); np_cnp_sent {np_sent}, "
          f"rp_cnp_handled {rp_handled}")
    if np_sent == 0 or rp_handled == 0:
        problems.append("no CNP sent or handled")
    # The port's rate (vrnic's line_rate, 25 Gb/s by default) near what this link moves, as a
    # NIC's is its link's: DCQCN raises a QP's rate up to it, and far above what the host can
    # send the limiter does not bind. And the limiter starts at half that rate
    # (rate_to_set_on_first_cnp): the sending device reads its CNPs between the batches it
    # sends, in clumps 150-600 us apart at 1 GB/s, and a QP that starts at line rate may be
    # back there, released, before the next clump, with alpha decayed (1 run in 17 on a
    # faster host; docs/live.md, "Congestion control").
    rate = clean * 8
    cc = (f"line_rate={max(1000, round(rate * 1.25))},"
          f"rate_to_set_on_first_cnp={max(500, round(rate / 2))}")
    samples, _, _, _ = burst(veth, vrnic, tmp, 2, 2, 3, cc=cc)
    late = check_burst(samples)
    if late and all(p.startswith(("after the marking", "marked ")) for p in late):
        # The recovered throughput fell short (on a loaded machine the rate the run moves can
        # change within seconds), or the marked stretch stayed above 0.8x (DCQCN's other
        # outcome at 10 % marking, docs/live.md "Congestion control"). One more run decides
        # (both are printed); a QP whose rate is never limited fails either way.
        print("the marked or the last second fell short; one more run")
        samples, _, _, _ = burst(veth, vrnic, tmp, 2, 2, 3, cc=cc)
        late = check_burst(samples)
    return problems + late


def check_burst(samples):
    """Within one run: the marked stretch well below the unmarked one before it; after the
    marking stops, the QP released and the last second back at the rate before."""
    if len(samples) < 20:
        return [f"only {len(samples)} stats samples"]
    before = throughput(samples, 0.5, 2.0)
    during = throughput(samples, 2.5, 4.0)
    after = throughput(samples, samples[-1][0] - 1.0, samples[-1][0])
    limited = [r[1] for _, _, rs in samples for r in rs if not r[4]]
    last = samples[-1][2]
    released = bool(last) and all(r[4] for r in last)
    print(f"one run, MB/s: unmarked {before:.0f}, 10 % marked {during:.0f} "
          f"({during / before if before else 0:.2f}x), unmarked again (last second) "
          f"{after:.0f} ({after / before if before else 0:.2f}x); lowest QP rate "
          f"{min(limited) if limited else 0:.0f} Mb/s; at the end "
          f"{'released' if released else 'still limited'}")
    problems = []
    if not before or during >= 0.8 * before:
        problems.append(f"marked {during:.0f} MB/s not below 0.8x unmarked {before:.0f}")
    if not limited:
        problems.append("the QP's rate was never limited while marked")
    if not released:
        problems.append("the QP was not released back to line rate after the marking")
    if after < 0.8 * before:
        problems.append(f"after the marking {after:.0f} MB/s, below 0.8x {before:.0f}")
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("case", choices=["cc_mark10"])
    a = ap.parse_args()
    vrnic = os.path.join(os.path.abspath(a.bin), "vrnic")
    return run_case(a.case, 1500, ("ip", "ethtool", "nft", "dumpcap", "tshark", "ib_write_bw"),
                    lambda veth, tmp: case_mark10(veth, vrnic, tmp))


if __name__ == "__main__":
    sys.exit(main())
