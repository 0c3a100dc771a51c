#!/usr/bin/python3
"""Middleware on vrnic next to the same middleware over kernel TCP, same machine, same run:
UCX (ucx_perftest: UCT am_lat, put_bw and get (zero-copy, its bandwidth; 128 outstanding, as
perftest keeps), UCP tag_lat and tag_bw) over vrnic's rc_verbs against UCX over TCP, rsockets (rdma-core's rstream: 64 B latency, 64 KiB bandwidth) over
vrnic's librdmacm against rstream over kernel TCP, and an Open MPI ping-pong (tests/mpi/mpi_check --pingpong) with the UCX
PML on vrnic against Open MPI over TCP (ob1 + tcp BTL), and MPI_Allreduce / MPI_Alltoall
timings (tests/mpi/mpi_check --collectives, 2 and 4 ranks; 4 oversubscribe a 2-core machine)
and one-sided puts (mpi_check --put-flush).
Prints a table with ratios and writes bench/out/middleware.json.

  bench/middleware.py [--bin build/release/bin] [--out bench/out] [--runs N] [--veth [--veth-only]]

--veth adds the UCX rows between two network namespaces joined by a veth (MTU 1500 and
9000): vrnic's rc_verbs against UCX's TCP across the same link; and the Open MPI ping-pong
with one rank in each namespace (tests/veth/mpi_veth.py), UCX on vrnic against ob1 + tcp.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import pair, veth_perftest, vrnic_perftest  # noqa: E402

FINAL = re.compile(r"^Final:\s+\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)"
                   r"\s+([\d.]+)\s+([\d.]+)", re.M)
PINGPONG = re.compile(r"^pingpong (\d+) B: ([\d.]+) us, ([\d.]+) MB/s", re.M)
COLLECTIVE = re.compile(r"^(allreduce|alltoall) (\d+) B: ([\d.]+) us", re.M)
PUT_FLUSH = re.compile(r"^put-flush (\d+) B: ([\d.]+) us", re.M)
# (name, ucx_perftest test, size, iterations, metric)
UCX_TESTS = [("am_lat", "am_lat", 8, 20000, "lat_us"),
             ("put_bw", "put_bw", 65536, 5000, "bw_MBps"),
             ("tag_lat", "tag_lat", 8, 20000, "lat_us"),
             ("tag_bw", "tag_bw", 65536, 5000, "bw_MBps"),
             ("get_bw", "get", 65536, 5000, "bw_MBps")]  # UCT's get test, zero-copy: its bandwidth
# perftest's default TX depth (ib_write_bw, ib_read_bw: "TX depth: 128"), the outstanding
# operations given to UCT's put_bw and get so that they and their perftest peers run the same
# workload.
PERFTEST_TX_DEPTH = 128
# The targets against vrnic's own perftest figures on the same path, same run:
# (middleware row, perftest tool, size, iterations, ratio goal).
OWN = [("UCX tag_bw 65536 B", "ib_write_bw", 65536, 5000, 0.9),
       ("UCX put_bw 65536 B", "ib_write_bw", 65536, 5000, 0.9),
       ("UCX get_bw 65536 B", "ib_read_bw", 65536, 5000, 0.9),
       ("MPI ping-pong 1048576 B", "ib_write_bw", 1048576, 500, 0.9)]


def ucx(bindir, test, size, iters, over, veth=None):
    """One ucx_perftest pair; `over` is "vrnic" (rc_verbs on vrnic0, both under `vrnic run`)
    or "tcp" (UCX's TCP transport), on loopback or, with `veth` (a veth_wire.VethPair),
    between its namespaces (server in b, client in a). Returns (typical latency us,
    bandwidth MB/s)."""
    uct = test in ("am_lat", "put_bw", "get")
    host = veth.addr[1] if veth else "127.0.0.1"

    def side(i):  # i = 1: the server's namespace, 0: the client's
        ns = veth.exec(i) if veth else []
        if over == "vrnic":
            ip = ["--ip", veth.addr[i]] if veth else []
            return [*ns, "env", "UCX_TLS=rc_verbs,ud_verbs,self",
                    os.path.join(bindir, "vrnic"), "run", *ip, "--", "ucx_perftest",
                    *(["-d", "vrnic0:1", "-x", "rc_verbs"] if uct else [])]
        dev = veth.dev[i] if veth else "lo"
        return [*ns, "env", "UCX_TLS=tcp", f"UCX_NET_DEVICES={dev}", "ucx_perftest",
                *(["-d", dev, "-x", "tcp"] if uct else [])]

    # UCT's put_bw and get keep one operation outstanding unless told (ucx_perftest's window
    # for them is 1): a round trip per 64 KiB. Their peers, ib_write_bw and ib_read_bw, keep
    # perftest's TX depth of 128 posted, so these run with the same depth.
    layout = ["-D", "zcopy", "-O", str(PERFTEST_TX_DEPTH)] if test in ("put_bw", "get") else []
    client = [*side(0), host, "-t", test, "-s", str(size), "-n", str(iters), *layout]
    out, _ = pair(side(1), client, settle=1.5)
    m = FINAL.search(out or "")
    return (float(m.group(1)), float(m.group(5))) if m else (None, None)


def ucx_rows(bindir, runs, veth=None):
    """The UCX rows, vrnic and TCP in alternating pairs: (figure, metric, vrnic's runs, TCP's
    runs)."""
    rows = []
    where = f", veth MTU {veth.mtu}" if veth else ""
    for name, test, size, iters, metric in UCX_TESTS:
        idx = 0 if metric == "lat_us" else 1
        v, t = [], []
        for _ in range(runs):
            v.append(ucx(bindir, test, size, iters, "vrnic", veth)[idx])
            # No TCP peer for UCX's zero-copy get (its TCP transport "does not support operation
            # get zcopy") nor, between the namespaces, for any UCT test: ucx_perftest sends the
            # client's device name to the server, and the two veth ends have names of their own.
            no_peer = test == "get" or (veth and test in ("am_lat", "put_bw"))
            t.append(None if no_peer else ucx(bindir, test, size, iters, "tcp", veth)[idx])
        rows.append((f"UCX {name} {size} B{where}", metric, v, t))
    return rows


RSTREAM = re.compile(r"^custom\s+\S+\s+\S+\s+\S+\s+\S+\s+[\d.]+s\s+([\d.]+)\s+([\d.]+)", re.M)
# (name, size, transfers per iteration, iterations, metric): rstream's latency (one transfer
# each way per iteration) and bandwidth (transfers one way, then one back).
RSTREAM_TESTS = [("lat", 64, 1, 20000, "lat_us"), ("bw", 65536, 2000, 1, "bw_MBps")]


def rstream(bindir, size, xfers, iters, over):
    """One rstream pair (rdma-core's rsocket benchmark, its default nonblocking calls) on
    loopback: over vrnic's rsockets (both under `vrnic run`) or kernel TCP (`-T s`). Returns
    (us per transfer, MB/s)."""
    opts = ["-S", str(size), "-C", str(xfers), "-I", str(iters)]
    if over == "vrnic":
        run = [os.path.join(bindir, "vrnic"), "run", "--", "rstream"]
    else:
        run, opts = ["rstream"], [*opts, "-T", "s"]
    out, _ = pair([*run, "-b", "127.0.0.1", *opts], [*run, "-s", "127.0.0.1", *opts])
    m = RSTREAM.search(out or "")
    return (float(m.group(2)), float(m.group(1)) * 1000 / 8) if m else (None, None)


def rsocket_rows(bindir, runs):
    """rsockets (rstream) over vrnic against rstream over kernel TCP, alternating pairs."""
    rows = []
    for name, size, xfers, iters, metric in RSTREAM_TESTS:
        idx = 0 if metric == "lat_us" else 1
        v, t = [], []
        for _ in range(runs):
            v.append(rstream(bindir, size, xfers, iters, "vrnic")[idx])
            t.append(rstream(bindir, size, xfers, iters, "tcp")[idx])
        rows.append((f"rsockets rstream {name} {size} B", metric, v, t))
    return rows


def mpi(bindir, over, ranks=2):
    """mpi_check --pingpong (ranks in pairs, each pair bouncing; 4 ranks oversubscribe a 2-core
    machine): {size: (half round trip us of ranks 0 and 1, MB/s)}."""
    out = mpirun(bindir, over, ranks, "--pingpong")
    return {int(s): (float(lat), float(bw)) for s, lat, bw in PINGPONG.findall(out)}


def collectives(bindir, over, ranks):
    """mpi_check --collectives: {(name, size): us per call}; more ranks than cores are
    oversubscribed."""
    out = mpirun(bindir, over, ranks, "--collectives")
    return {(n, int(s)): float(us) for n, s, us in COLLECTIVE.findall(out)}


def put_flush(bindir, over):
    """mpi_check --put-flush (2 ranks, each puts and flushes at once): {size: us per put +
    flush}."""
    out = mpirun(bindir, over, 2, "--put-flush")
    return {int(s): float(us) for s, us in PUT_FLUSH.findall(out)}


def mpirun(bindir, over, ranks, mode):
    """mpi_check `mode` with `ranks` ranks, over vrnic (UCX PML and osc) or TCP (ob1 + tcp
    BTL; the pt2pt osc, since the shared-memory one would take a window of one host): its
    standard output."""
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    root += ["--oversubscribe"] if ranks > (os.cpu_count() or 1) else []
    if over == "vrnic":
        opts = ["--mca", "pml", "ucx", "--mca", "osc", "ucx", "--mca", "btl", "self",
                "-x", "UCX_TLS=rc_verbs,ud_verbs,self", os.path.join(bindir, "vrnic"), "run", "--"]
    else:
        # The TCP BTL leaves out loopback unless told: here both ranks meet on lo.
        opts = ["--mca", "pml", "ob1", "--mca", "osc", "pt2pt", "--mca", "btl", "tcp,self",
                "--mca", "btl_tcp_if_include", "lo"]
    p = subprocess.run(["mpirun", *root, "-np", str(ranks), *opts,
                        os.path.join(bindir, "mpi_check"), mode],
                       capture_output=True, text=True, timeout=300)
    return p.stdout


def mpi_rows(bindir, runs):
    """The MPI rows (ping-pong, 2 ranks; collectives, 2 and 4 ranks), vrnic and TCP in
    alternating pairs."""
    rows = []
    pp = [(mpi(bindir, "vrnic"), mpi(bindir, "tcp")) for _ in range(runs)]
    for size, idx, metric in ((8, 0, "lat_us"), (1048576, 1, "bw_MBps")):
        v, t = ([r[o].get(size, (None, None))[idx] for r in pp] for o in (0, 1))
        rows.append((f"MPI ping-pong {size} B", metric, v, t))
    pp4 = [(mpi(bindir, "vrnic", 4), mpi(bindir, "tcp", 4)) for _ in range(runs)]
    for size, idx, metric in ((8, 0, "lat_us"), (1048576, 1, "bw_MBps")):
        v, t = ([r[o].get(size, (None, None))[idx] for r in pp4] for o in (0, 1))
        rows.append((f"MPI ping-pong {size} B, 4 ranks in 2 pairs", metric, v, t))
    for ranks in (2, 4):
        cs = [(collectives(bindir, "vrnic", ranks), collectives(bindir, "tcp", ranks))
              for _ in range(runs)]
        for name in ("allreduce", "alltoall"):
            for size in (8, 65536, 1048576):
                v, t = ([r[o].get((name, size)) for r in cs] for o in (0, 1))
                rows.append((f"MPI_{name.capitalize()} {size} B, {ranks} ranks", "us", v, t))
    pf = [(put_flush(bindir, "vrnic"), put_flush(bindir, "tcp")) for _ in range(runs)]
    for size in (8, 65536):
        v, t = ([r[o].get(size) for r in pf] for o in (0, 1))
        rows.append((f"MPI_Put + MPI_Win_flush {size} B, 2 ranks", "us", v, t))
    return rows


def own_figures(runs, perftest):
    """vrnic's own perftest figures the OWN targets compare with, {(tool, size): median
    bytes/s}; perftest(tool, size, iterations) gives one run's result (or None)."""
    figs = {}
    for _, tool, size, iters, _ in OWN:
        if (tool, size) not in figs:
            figs[(tool, size)] = median([(perftest(tool, size, iters) or {}).get("bw_Bps")
                                         for _ in range(runs)])
    return figs


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--bin", default=os.path.join(here, "../build/release/bin"))
    ap.add_argument("--out", default=os.path.join(here, "out"))
    ap.add_argument("--runs", type=int, default=3, help="runs per figure (the median is kept)")
    ap.add_argument("--veth", action="store_true",
                    help="also the UCX rows between two network namespaces joined by a veth, "
                         "MTU 1500 and 9000 (root)")
    ap.add_argument("--no-mpi", action="store_true", help="the UCX rows only")
    ap.add_argument("--veth-only", action="store_true",
                    help="with --veth: only the rows between the namespaces")
    a = ap.parse_args()
    bindir = os.path.abspath(a.bin)
    rows, owns = [], {}  # owns: where ("" or ", veth MTU n") -> own_figures
    if not (a.veth and a.veth_only):
        rows += ucx_rows(bindir, a.runs)
        rows += rsocket_rows(bindir, a.runs)
        rows += [] if a.no_mpi else mpi_rows(bindir, a.runs)
        owns[""] = own_figures(a.runs, lambda t, s, n: vrnic_perftest(bindir, t, s, n))
    if a.veth:
        sys.path.insert(0, os.path.join(here, "../tests/veth"))
        import mpi_veth
        import veth_wire
        for mtu in (1500, 9000):
            try:
                with veth_wire.VethPair(mtu) as v, tempfile.TemporaryDirectory() as tmp:
                    rows += ucx_rows(bindir, a.runs, v)
                    if not a.no_mpi:
                        rows += mpi_veth.mpi_rows(bindir, v, tmp, a.runs)
                    owns[f", veth MTU {mtu}"] = own_figures(
                        a.runs, lambda t, s, n: veth_perftest(
                            bindir, v, [t, "-s", str(s), "-n", str(n)], t))
            except veth_wire.Skipped as e:
                print(f"veth MTU {mtu}: skipped ({e})")
    fmt = lambda x: "n/a" if x is None else f"{x:.4g}"
    span = lambda xs: "-".join(fmt(f(x for x in xs if x is not None)) for f in (min, max)) \
        if any(x is not None for x in xs) else "n/a"
    print("\n| figure | metric | vrnic | over TCP | vrnic / TCP | vrnic runs | TCP runs |\n"
          "|---|---|---|---|---|---|---|")
    out = []
    for name, metric, vs, ts in rows:
        v, t = median(vs), median(ts)
        ratio = v / t if v and t else None
        out.append({"figure": name, "metric": metric, "vrnic": v, "tcp": t, "ratio": ratio,
                    "vrnic_runs": vs, "tcp_runs": ts})
        print(f"| {name} | {metric} | {fmt(v)} | {fmt(t)} | {fmt(ratio)} | {span(vs)} | "
              f"{span(ts)} |")
    print("\n| target | middleware | vrnic's own | ratio | goal |\n|---|---|---|---|---|")
    for where, figs in owns.items():
        for row, tool, size, _, goal in OWN:
            mw = next((r["vrnic"] for r in out if r["figure"] == row + where), None)
            own = figs.get((tool, size))
            # In the row's unit: ucx_perftest's MB/s are MiB/s, mpi_check's 10^6 B/s.
            own = own / (1e6 if row.startswith("MPI") else 1048576) if own else None
            ratio = mw / own if mw and own else None
            print(f"| {row}{where} / {tool} {size} B | {fmt(mw)} | {fmt(own)} | {fmt(ratio)} | "
                  f">= {goal} |")
            out.append({"figure": f"{row}{where} / {tool} {size} B", "metric": "ratio",
                        "vrnic": mw, "own": own, "ratio": ratio})
    for row, goal in (("UCX am_lat 8 B", 1.0), ("UCX tag_lat 8 B", 1.0),
                      ("MPI ping-pong 8 B", 1.0), ("MPI ping-pong 8 B, 4 ranks in 2 pairs", 1.5)):
        r = next((r for r in out if r["figure"] == row), None)
        if r:
            met = "met" if r["ratio"] and r["ratio"] <= goal else "missed"
            print(f"target {row} vrnic / TCP <= {goal}: {fmt(r['ratio'])} ({met})")
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "middleware.json"), "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
