#!/usr/bin/python3
"""Middleware on vrnic next to the same middleware over kernel TCP, same machine, same run:
UCX (ucx_perftest: UCT am_lat and put_bw, UCP tag_lat and tag_bw) over vrnic's rc_verbs
against UCX over TCP, and an Open MPI ping-pong (tests/mpi/mpi_check --pingpong) with the UCX
PML on vrnic against Open MPI over TCP (ob1 + tcp BTL). Prints a table with ratios and writes
bench/out/middleware.json.

  bench/middleware.py [--bin build/release/bin] [--out bench/out] [--runs N]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import pair  # noqa: E402

FINAL = re.compile(r"^Final:\s+\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)"
                   r"\s+([\d.]+)\s+([\d.]+)", re.M)
PINGPONG = re.compile(r"^pingpong (\d+) B: ([\d.]+) us, ([\d.]+) MB/s", re.M)
# (name, ucx_perftest test, size, iterations, metric)
UCX_TESTS = [("am_lat", "am_lat", 8, 20000, "lat_us"),
             ("put_bw", "put_bw", 65536, 5000, "bw_MBps"),
             ("tag_lat", "tag_lat", 8, 20000, "lat_us"),
             ("tag_bw", "tag_bw", 65536, 5000, "bw_MBps")]


def ucx(bindir, test, size, iters, over):
    """One ucx_perftest pair; `over` is "vrnic" (rc_verbs on vrnic0, both under `vrnic run`)
    or "tcp" (UCX's TCP transport on lo). Returns (typical latency us, bandwidth MB/s)."""
    uct = test in ("am_lat", "put_bw")
    if over == "vrnic":
        env = dict(os.environ, UCX_TLS="rc_verbs,ud_verbs,self")
        run = [os.path.join(bindir, "vrnic"), "run", "--"]
        dev = ["-d", "vrnic0:1", "-x", "rc_verbs"] if uct else []
    else:
        env = dict(os.environ, UCX_TLS="tcp", UCX_NET_DEVICES="lo")
        run, dev = [], (["-d", "lo", "-x", "tcp"] if uct else [])
    layout = ["-D", "zcopy"] if test == "put_bw" else []
    client = [*run, "ucx_perftest", "127.0.0.1", *dev, "-t", test, "-s", str(size),
              "-n", str(iters), *layout]
    out, _ = pair([*run, "ucx_perftest", *dev], client, env=env, settle=1.5)
    m = FINAL.search(out or "")
    return (float(m.group(1)), float(m.group(5))) if m else (None, None)


def mpi(bindir, over):
    """mpi_check --pingpong with 2 ranks: {size: (half round trip us, MB/s)}."""
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    if over == "vrnic":
        opts = ["--mca", "pml", "ucx", "--mca", "btl", "self",
                "-x", "UCX_TLS=rc_verbs,ud_verbs,self", os.path.join(bindir, "vrnic"), "run", "--"]
    else:
        # The TCP BTL leaves out loopback unless told: here both ranks meet on lo.
        opts = ["--mca", "pml", "ob1", "--mca", "btl", "tcp,self",
                "--mca", "btl_tcp_if_include", "lo"]
    p = subprocess.run(["mpirun", *root, "-np", "2", *opts, os.path.join(bindir, "mpi_check"),
                        "--pingpong"], capture_output=True, text=True, timeout=300)
    return {int(s): (float(lat), float(bw)) for s, lat, bw in PINGPONG.findall(p.stdout)}


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--bin", default=os.path.join(here, "../build/release/bin"))
    ap.add_argument("--out", default=os.path.join(here, "out"))
    ap.add_argument("--runs", type=int, default=3, help="runs per figure (the median is kept)")
    a = ap.parse_args()
    bindir = os.path.abspath(a.bin)
    rows = []
    for name, test, size, iters, metric in UCX_TESTS:
        idx = 0 if metric == "lat_us" else 1
        v, t = ([ucx(bindir, test, size, iters, over)[idx] for _ in range(a.runs)]
                for over in ("vrnic", "tcp"))
        rows.append((f"UCX {name} {size} B", metric, median(v), median(t)))
    runs = {over: [mpi(bindir, over) for _ in range(a.runs)] for over in ("vrnic", "tcp")}
    for size, idx, metric in ((8, 0, "lat_us"), (1048576, 1, "bw_MBps")):
        v, t = (median([r.get(size, (None, None))[idx] for r in runs[o]]) for o in ("vrnic", "tcp"))
        rows.append((f"MPI ping-pong {size} B", metric, v, t))
    fmt = lambda x: "n/a" if x is None else f"{x:.4g}"
    print("\n| figure | metric | vrnic | over TCP | vrnic / TCP |\n|---|---|---|---|---|")
    out = []
    for name, metric, v, t in rows:
        ratio = v / t if v and t else None
        out.append({"figure": name, "metric": metric, "vrnic": v, "tcp": t, "ratio": ratio})
        print(f"| {name} | {metric} | {fmt(v)} | {fmt(t)} | {fmt(ratio)} |")
    am = out[0]["ratio"]
    met = "met" if am and am <= 1 else "missed"
    print(f"\ntarget UCX am_lat vrnic / TCP <= 1.0: {fmt(am)} ({met})")
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "middleware.json"), "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
