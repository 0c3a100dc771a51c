"""Interop cases for middleware on vrnic: UCX's UCT transports and UCP protocols
(Debian's ucx-utils, ucx_perftest) and Open MPI jobs with the UCX PML (tests/mpi)."""
import os
import re

FINAL = r"(?m)^Final:\s+{n}\s+[\d.]+\s+[\d.]+"
STATS_BLOCK = re.compile(r"vrnic: \S+ (\S+) \([^)]*, pid \d+\) counters:\n((?:[a-z0-9_]+ \d+\n)*)")
VERBS_ONLY = {"UCX_TLS": "rc_verbs,ud_verbs,self"}


def perf_pair(args, n=1000, env=None, counters=()):
    """A ucx_perftest server and client; the client must print its Final row of n iterations.
    Each process gets its own TCP port from interop.py (-p), so pairs never meet."""
    spec = {"server": ["ucx_perftest", *args[:4]] if args[:1] == ["-d"] else ["ucx_perftest"],
            "clients": [["ucx_perftest", "127.0.0.1", *args, "-n", str(n)]],
            "kind": "cm", "expect": {"client0": [FINAL.format(n=n)]},
            "start_delay": 2, "timeout": 120}
    if env:
        spec["env"] = env
    if counters:
        spec.update(stats=True, counters=list(counters))
    return spec


# (test, data layout, size) of the UCT matrix. Sizes stay under each transport's limits
# (`ucx_info -d`: rc_verbs am/put/get bcopy 8255/8256, ud_verbs am 4088).
UCT_RC = [("am_lat", "short", 8), ("am_lat", "bcopy", 8), ("am_lat", "zcopy", 8),
          ("am_bw", "short", 8), ("am_bw", "bcopy", 8192), ("am_bw", "zcopy", 8192),
          ("put_lat", "short", 8), ("put_lat", "bcopy", 8), ("put_lat", "zcopy", 8),
          ("put_bw", "short", 8), ("put_bw", "bcopy", 8192), ("put_bw", "zcopy", 65536),
          ("get", "bcopy", 8192), ("get", "zcopy", 65536),
          ("fadd", "short", 8), ("cswap", "short", 8), ("add_lat", "short", 8)]
UCT_UD = [("am_lat", "short", 8), ("am_lat", "bcopy", 8), ("am_lat", "zcopy", 8),
          ("am_bw", "short", 8), ("am_bw", "bcopy", 4000), ("am_bw", "zcopy", 4000)]
UCP = [("tag_lat", 8), ("tag_bw", 65536), ("stream_bw", 65536), ("ucp_put_bw", 65536),
       ("ucp_get", 65536), ("ucp_fadd", 8)]


def ucx_cases(c):
    """UCX on vrnic0: UCX finds the device only through the sysfs view `vrnic run` mounts
    (/dev/infiniband/uverbs_vrnic0, docs/live.md)."""
    for tl, matrix in (("rc", UCT_RC), ("ud", UCT_UD)):
        for test, layout, size in matrix:
            dev = ["-d", "vrnic0:1", "-x", tl + "_verbs"]
            c[f"ucx_{tl}_{test}_{layout}"] = perf_pair(
                [*dev, "-t", test, "-D", layout, "-s", str(size)])
    # UCP (what MPI uses) over vrnic's verbs only (no TCP, no shared memory): the client's
    # counters show the traffic went through vrnic.
    for test, size in UCP:
        c[f"ucp_{test}"] = perf_pair(["-t", test, "-s", str(size)], env=VERBS_ONLY,
                                     counters=["client tx_packets >= 1000",
                                               "client rx_packets > 0"])
    # UCX's own selection, with vrnic0 present: between two local processes it takes shared
    # memory for the bulk (tag_bw: sysv, cma and rc_verbs/vrnic0:1 lanes).
    for test, size in UCP[:4]:
        c[f"ucp_{test}_default"] = perf_pair(["-t", test, "-s", str(size)])


def check_mpi(ranks):
    """Every rank printed its counters (`vrnic run --stats`) with traffic both ways, and
    rank 0 reported no failures."""
    def check(out):
        problems = []
        if not re.search(rf"mpi_check [^:]*: {ranks} ranks, 0 failures", out):
            problems.append("no 'N ranks, 0 failures' line")
        busy = {ip for ip, body in STATS_BLOCK.findall(out)
                if re.search(r"^tx_packets [1-9]", body, re.M)
                and re.search(r"^rx_packets [1-9]", body, re.M)}
        print(f"ranks with vrnic traffic both ways: {sorted(busy)}")
        if len(busy) != ranks:
            problems.append(f"{len(busy)} ranks sent and received through vrnic, want {ranks}")
        return problems
    return check


def check_put_flush(out):
    """mpi_check --put-flush: the job's own checks, and no rank waited out held ACKs: both
    ranks put and flush at once, neither program is told of the other's WRITEs, so an ACK
    held for an answer would only make each flush wait for the hold to run out (before the
    engine learned that per QP: one expiry per put)."""
    problems = check_mpi(2)(out)
    expired = {ip: int(m.group(1)) for ip, body in STATS_BLOCK.findall(out)
               for m in [re.search(r"^ack_holds_expired (\d+)", body, re.M)] if m}
    print(f"ack_holds_expired per rank: {expired}")
    if len(expired) != 2:
        problems.append(f"ack_holds_expired printed by {len(expired)} ranks, want 2")
    problems += [f"{ip}: {n} holds ran out (2,500 puts), want at most {MAX_EXPIRED_HOLDS}"
                 for ip, n in expired.items() if n > MAX_EXPIRED_HOLDS]
    return problems


MAX_EXPIRED_HOLDS = 50  # a few while the QPs learn, at start (6 per rank seen)


def mpi_job(ranks, *args):
    """`mpirun -np N vrnic run -- mpi_check`: Open MPI with the UCX PML and osc, UCX on vrnic's
    verbs only (README "Open MPI")."""
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    return {"plain": ["mpirun", *root, "-np", str(ranks), "--oversubscribe",
                      "--mca", "pml", "ucx", "--mca", "osc", "ucx", "--mca", "btl", "self",
                      "-x", "UCX_TLS=rc_verbs,ud_verbs,self",
                      "@vrnic", "run", "--stats", "--", "@mpi_check", *args],
            "kind": "cm", "expect": {}, "check": check_mpi(ranks), "timeout": 300}


def mpi_cases(c):
    """Open MPI jobs (2 and 4 ranks; mpi_check is built with Debian's Open MPI)."""
    c["mpi_np2"] = mpi_job(2)
    c["mpi_np4"] = mpi_job(4)
    c["mpi_pingpong"] = mpi_job(2, "--pingpong")
    c["mpi_put_flush"] = {**mpi_job(2, "--put-flush"), "check": check_put_flush}
