#!/usr/bin/env python3
"""vrnic demo: unmodified Debian RDMA programs (ibverbs-utils, perftest) on vrnic.

Each server/client pair runs as two processes through `vrnic run`; every process takes its
own loopback address, and the pair meets over TCP on 127.0.0.1 for its out-of-band exchange.
Prints each tool's result lines and PASS/FAIL; exits nonzero if any case failed.
"""
import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

BW_ROW = re.compile(r"^\s*\d+\s+\d+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s*$")
LAT_ROW = re.compile(r"^\s*\d+\s+\d+(\s+[\d.]+){5,}\s*$")
PINGPONG = re.compile(r"\d+ (bytes in [\d.]+ seconds = [\d.]+ Mbit/sec|iters in [\d.]+ seconds = [\d.]+ usec/iter)")


def free_tcp_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port):
    """True once some process listens on TCP `port` (read from /proc, no connection made:
    a probe connection would be taken by the server as its client)."""
    want = f":{port:04X}"
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                for line in f.readlines()[1:]:
                    fields = line.split()
                    if fields[1].endswith(want) and fields[3] == "0A":
                        return True
        except OSError:
            pass
    return False


def cases(more=False):
    """[(name, kind, server argv builder(port) or None, client argv builder(port))]."""
    c = [("ibv_devinfo", "devinfo", None, lambda p: ["ibv_devinfo", "-v"]),
         ("ibv_rc_pingpong", "pingpong",
          lambda p: ["ibv_rc_pingpong", "-g", "0", "-p", str(p)],
          lambda p: ["ibv_rc_pingpong", "-g", "0", "-p", str(p), "127.0.0.1"])]
    tools = [(t, []) for t in ["ib_write_bw", "ib_read_bw", "ib_send_bw", "ib_write_lat", "ib_atomic_bw"]]
    if more:
        for opts in (["-e"], ["-c"], ["-s", "65536", "-n", "1000"]):
            c.append(("ibv_rc_pingpong " + " ".join(opts), "pingpong",
                      lambda p, o=opts: ["ibv_rc_pingpong", "-g", "0", *o, "-p", str(p)],
                      lambda p, o=opts: ["ibv_rc_pingpong", "-g", "0", *o, "-p", str(p), "127.0.0.1"]))
        tools += [(t, []) for t in ["ib_read_lat", "ib_send_lat", "ib_atomic_lat"]]
        tools += [("ib_atomic_bw", ["-A", "CMP_AND_SWAP"]), ("ib_write_bw", ["-q", "4"]),
                  ("ib_write_bw", ["-a"]), ("ib_send_bw", ["-m", "1024"])]
    for tool, opts in tools:
        kind = "bw" if tool.endswith("_bw") else "lat"
        c.append((" ".join([tool, *opts]), kind,
                  lambda p, t=tool, o=opts: [t, *o, "-p", str(p)],
                  lambda p, t=tool, o=opts: [t, *o, "-p", str(p), "127.0.0.1"]))
    # The same programs in same-host direct mode (`vrnic run --direct` on both sides: RDMA
    # WRITE / READ copied between the two processes instead of sent as packets).
    for tool in ["ib_write_bw", "ib_read_bw", "ib_write_lat"]:
        kind = "bw" if tool.endswith("_bw") else "lat"
        c.append((tool + " --direct", kind,
                  lambda p, t=tool: ["--direct", t, "-p", str(p)],
                  lambda p, t=tool: ["--direct", t, "-p", str(p), "127.0.0.1"]))
    return c


def summary(kind, out):
    """The lines worth showing, and whether the output holds a plausible result."""
    lines = out.splitlines()
    if kind == "devinfo":
        keep = [l.strip() for l in lines if re.search(r"hca_id|state:|link_layer|active_mtu|GID\[", l)]
        ok = (any("PORT_ACTIVE" in l for l in keep) and any("Ethernet" in l for l in keep)
              and any("RoCE v2" in l for l in keep))
        return keep, ok
    if kind == "pingpong":
        keep = [l.strip() for l in lines if PINGPONG.search(l)]
        return keep, len(keep) == 2
    row = BW_ROW if kind == "bw" else LAT_ROW
    keep = []
    for i, l in enumerate(lines):
        if row.match(l):
            header = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].lstrip().startswith("#bytes")), "")
            if header and header.strip() not in keep:
                keep.append(header.strip())
            keep.append(l.strip())
    ok = bool(keep) and all(float(l.split()[2]) > 0 for l in keep if not l.startswith("#"))
    return keep, ok


def run_case(vrnic, name, kind, server, client, timeout, logdir, verbose):
    port = free_tcp_port()
    safe = re.sub(r"[^\w.-]+", "_", name)
    procs = []

    def start(tag, argv):
        log = open(os.path.join(logdir, f"{safe}.{tag}.log"), "w")
        flags = [argv.pop(0)] if argv[0] == "--direct" else []  # a `vrnic run` option
        p = subprocess.Popen([vrnic, "run", *flags, "--", *argv], stdout=log,
                             stderr=subprocess.STDOUT)
        procs.append((tag, p, log))

    t0 = time.time()
    problems = []
    if server:
        start("server", server(port))
        deadline = time.time() + 10
        while not listening(port) and time.time() < deadline and procs[0][1].poll() is None:
            time.sleep(0.05)
        if not listening(port):
            problems.append("server never listened on its TCP port")
    if not problems:
        start("client", client(port))
    end = t0 + timeout
    for tag, p, log in procs:
        try:
            rc = p.wait(timeout=max(0.1, end - time.time()))
            if rc != 0:
                problems.append(f"{tag} exit status {rc}")
        except subprocess.TimeoutExpired:
            problems.append(f"{tag} timed out after {timeout}s")
            for _, q, _ in procs:
                q.kill()
            p.wait()
        log.close()
    outputs = {}
    for tag, _, _ in procs:
        with open(os.path.join(logdir, f"{safe}.{tag}.log")) as f:
            outputs[tag] = f.read()
    shown, ok = summary(kind, outputs.get("client", ""))
    if not ok:
        problems.append("no plausible result in the client's output")
    if kind == "pingpong":
        s_shown, s_ok = summary(kind, outputs.get("server", ""))
        if not s_ok:
            problems.append("no result in the server's output")
    status = "PASS" if not problems else "FAIL"
    print(f"== {name}: {status} ({time.time() - t0:.1f}s)")
    for l in shown:
        print(f"   {l}")
    for p in problems:
        print(f"   ! {p}")
    if problems or verbose:
        for tag, out in outputs.items():
            tail = out.splitlines()[-15 if not verbose else 0:]
            print(f"   --- {tag} output ---")
            for l in tail:
                print(f"   | {l}")
    return not problems


def main():
    ap = argparse.ArgumentParser(prog="vrnic demo", description=__doc__.splitlines()[0])
    ap.add_argument("--vrnic", default=shutil.which("vrnic") or "vrnic", help=argparse.SUPPRESS)
    ap.add_argument("--timeout", type=float, default=60, help="seconds per case (default 60)")
    ap.add_argument("--only", action="append", help="run only this case (repeatable)")
    ap.add_argument("--more", action="store_true",
                    help="also pingpong -e/-c/64k, read/send/atomic latency, CAS, -q 4, -a")
    ap.add_argument("--logs", help="keep every program's output in this directory")
    ap.add_argument("-v", "--verbose", action="store_true", help="show whole outputs")
    a = ap.parse_args()
    env_ip = os.environ.pop("VRNIC_IP", None)  # each process takes its own address
    if env_ip:
        print(f"(ignoring VRNIC_IP={env_ip}: the demo's processes each take a loopback address)")
    missing = [t for t in ("ibv_devinfo", "ibv_rc_pingpong", "ib_write_bw") if not shutil.which(t)]
    if missing:
        print(f"vrnic demo: missing {', '.join(missing)}: apt-get install ibverbs-utils perftest")
        return 2
    logdir = a.logs or tempfile.mkdtemp(prefix="vrnic-demo-")
    os.makedirs(logdir, exist_ok=True)
    selected = [c for c in cases(a.more) if not a.only or c[0] in a.only]
    failed = [c[0] for c in selected if not run_case(a.vrnic, *c, a.timeout, logdir, a.verbose)]
    print(f"\n{len(selected) - len(failed)}/{len(selected)} passed" +
          (f"; failed: {', '.join(failed)}" if failed else ""))
    if a.logs:
        print(f"logs in {logdir}")
    else:
        shutil.rmtree(logdir, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
