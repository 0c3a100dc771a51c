#!/usr/bin/python3
"""Congestion control live, between two network namespaces on a veth pair (needs root):
ib_write_bw 64 KiB while nftables marks CE on a fraction of the ECT(0) RoCE packets at the
receiver. Prints a table of bandwidth and CNP counters against the marking fraction, and one
run through a marking burst (unmarked, 10 % marked, unmarked) with the sender's QP rate and
throughput over time; writes bench/out/cc_live.json and cc_live.png (two panels).

  bench/cc_live.py [--bin build/release/bin] [--out bench/out] [--seconds 4]
"""
import argparse
import json
import os
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "../tests/veth"))
sys.path.insert(0, os.path.join(here, "../tests/faults"))
from cc_veth import burst, set_marking, software_segmentation, throughput, write_bw  # noqa: E402
from faults_common import counters  # noqa: E402
from veth_wire import VethPair  # noqa: E402

FRACTIONS = [0, 1, 5, 10, 20]


def sweep(veth, vrnic, tmp, seconds):
    rows = []
    for pct in FRACTIONS:
        set_marking(veth, pct)
        bw, srv, cli = write_bw(veth, vrnic, seconds, tmp, f"mark{pct}")
        s, c = counters(srv), counters(cli)
        rows.append({"marked_pct": pct, "MBps": bw,
                     "np_ecn_marked_roce_packets": s.get("np_ecn_marked_roce_packets", 0),
                     "np_cnp_sent": s.get("np_cnp_sent", 0),
                     "rp_cnp_handled": c.get("rp_cnp_handled", 0),
                     "tx_packets": c.get("tx_packets", 0)})
        print(f"  {pct:>3} % marked: {bw:7.0f} MB/s, CNPs sent {rows[-1]['np_cnp_sent']}",
              flush=True)
    set_marking(veth, 0)
    return rows


def timeline(samples):
    """(t, QP rate Mb/s, throughput MB/s over the last sample period) per sample."""
    out, prev = [], None
    for t, tx, rates in samples:
        rate = rates[0][1] if rates else None
        mbps = (tx - prev[1]) / (t - prev[0]) / 1e6 if prev and t > prev[0] else None
        prev = (t, tx)
        out.append((t, rate, mbps))
    return out


def plot(rows, line, phases, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    a.plot([r["marked_pct"] for r in rows], [r["MBps"] for r in rows], "o-")
    a.set_xlabel("ECT(0) packets marked CE at the receiver (%)")
    a.set_ylabel("ib_write_bw 64 KiB (MB/s)")
    a.set_title("Bandwidth against marking (veth, MTU 1500)")
    a.grid(True, alpha=0.3)
    t = [x[0] for x in line]
    b.plot(t, [x[1] if x[1] is not None else 25000 for x in line], label="QP rate (DCQCN), Mb/s")
    b.plot(t, [x[2] * 8 if x[2] is not None else None for x in line],
           label="sent, Mb/s (50 ms samples)")
    b.axvspan(phases[0], phases[1], color="orange", alpha=0.15, label="10 % marked")
    b.set_yscale("log")
    b.set_xlabel("time since the client started (s)")
    b.set_title("One QP through a marking burst and recovery")
    b.legend(loc="lower right")
    b.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(here, "../build/release/bin"))
    ap.add_argument("--out", default=os.path.join(here, "out"))
    ap.add_argument("--seconds", type=int, default=4)
    a = ap.parse_args()
    vrnic = os.path.join(os.path.abspath(a.bin), "vrnic")
    os.makedirs(a.out, exist_ok=True)
    with VethPair(1500) as veth, tempfile.TemporaryDirectory() as tmp:
        software_segmentation(veth)
        rows = sweep(veth, vrnic, tmp, a.seconds)
        samples, _, srv, cli = burst(veth, vrnic, tmp, 2, 2, 4)
    line = timeline(samples)
    before, during = throughput(samples, 0.5, 2.0), throughput(samples, 2.5, 4.0)
    after = throughput(samples, samples[-1][0] - 1.0, samples[-1][0])
    released = next((t for t, _, rates in samples
                     if t > 4.0 and rates and all(r[4] for r in rates)), None)
    print("\n| marked | MB/s | vs 0 % | CE-marked packets | CNPs sent | CNPs handled |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        ratio = r["MBps"] / rows[0]["MBps"] if rows[0]["MBps"] else 0
        print(f"| {r['marked_pct']} % | {r['MBps']:.0f} | {ratio:.2f} | "
              f"{r['np_ecn_marked_roce_packets']} | {r['np_cnp_sent']} | {r['rp_cnp_handled']} |")
    print(f"\nburst run: unmarked {before:.0f} MB/s, marked {during:.0f} MB/s, last second "
          f"{after:.0f} MB/s; QP back at line rate (released) at t = "
          f"{f'{released:.2f}' if released is not None else 'never'} s; counters: receiver "
          f"np_cnp_sent {counters(srv).get('np_cnp_sent', 0)}, sender rp_cnp_handled "
          f"{counters(cli).get('rp_cnp_handled', 0)}")
    with open(os.path.join(a.out, "cc_live.json"), "w") as f:
        json.dump({"sweep": rows, "burst": line}, f, indent=1)
    plot(rows, line, (2.0, 4.0), os.path.join(a.out, "cc_live.png"))
    print(f"wrote {a.out}/cc_live.json and cc_live.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
