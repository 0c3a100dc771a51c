#!/usr/bin/python3
"""Open MPI between two hosts: one rank in each of two network namespaces joined by a veth,
started by one mpirun as on a cluster (its rsh launcher starts the other host's daemon
through an agent that enters that host's namespace), the ranks on vrnic through UCX.

  mpi_veth.py --bin BUILD/bin mpi_mtu1500|mpi_mtu9000

mpirun runs in namespace a (10.97.0.1); the hostfile names 10.97.0.1 and 10.97.0.2, one slot
each; the agent (netns_agent.sh) runs the daemon for 10.97.0.2 in namespace b with
VRNIC_IP=10.97.0.2, so each rank's `vrnic run` takes its own host's address. UCX may use
rc_verbs and ud_verbs only (no TCP), so every message crosses the veth as RoCEv2.
The case runs tests/mpi/mpi_check's checked exchanges (ring, allreduce, alltoall, put, get:
every value compared) and its ping-pong (10,000 x 8 B and 200 x 1 MiB each way): both must
end with "2 ranks, 0 failures" and the veth must have carried the ping-pong's 400 MiB.
mpi_rows() gives bench/middleware.py --veth the same job beside Open MPI over TCP.
Exit status: 0 pass, 1 fail, 77 skipped (not root, no `ip netns`, no mpirun).
"""
import argparse
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from veth_wire import run_case  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PINGPONG = re.compile(r"^pingpong (\d+) B: ([\d.]+) us, ([\d.]+) MB/s", re.M)
PINGPONG_BYTES = 2 * 200 * (1 << 20)  # mpi_check --pingpong's 1 MiB rounds, both ways


def mpirun(bindir, veth, tmp, over, mode):
    """mpi_check `mode` with one rank in each namespace, over vrnic (UCX PML on rc_verbs) or
    over TCP (ob1 + the tcp BTL on the veth): (exit status, output). One-sided calls go
    through UCX too (osc ucx)."""
    hosts = os.path.join(tmp, "hosts")
    with open(hosts, "w") as f:
        f.write("".join(f"{a} slots=1\n" for a in veth.addr))
    net = veth.addr[0].rsplit(".", 1)[0] + ".0/24"
    env = dict(os.environ, VRNIC_NETNS_MAP=",".join(
        f"{a}={ns}" for a, ns in zip(veth.addr, veth.ns)), VRNIC_IP=veth.addr[0])
    # Each host has one slot: Open MPI would bind both ranks to core 0, the same core here.
    cmd = [*veth.exec(0), "mpirun", "--allow-run-as-root", "--bind-to", "none", "-np", "2",
           "--hostfile", hosts, "--mca", "plm_rsh_agent", os.path.join(HERE, "netns_agent.sh"),
           "--mca", "oob_tcp_if_include", net]
    if over == "vrnic":
        cmd += ["--mca", "pml", "ucx", "--mca", "osc", "ucx", "--mca", "btl", "self",
                "-x", "UCX_TLS=rc_verbs,ud_verbs,self", os.path.join(bindir, "vrnic"), "run",
                "--"]
    else:
        cmd += ["--mca", "pml", "ob1", "--mca", "btl", "tcp,self",
                "--mca", "btl_tcp_if_include", net]
    cmd += [os.path.join(bindir, "mpi_check"), *([mode] if mode else [])]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    return p.returncode, p.stdout + p.stderr


def veth_bytes(veth):
    """(rx, tx) bytes of namespace a's end of the veth."""
    out = subprocess.run([*veth.exec(0), "ip", "-s", "-j", "link", "show", veth.dev[0]],
                         capture_output=True, text=True, check=True).stdout
    st = json.loads(out)[0]["stats64"]
    return st["rx"]["bytes"], st["tx"]["bytes"]


def pingpong(out):
    """{size: (half round trip us, MB/s)} of mpi_check --pingpong's output."""
    return {int(s): (float(lat), float(bw)) for s, lat, bw in PINGPONG.findall(out)}


def mpi_rows(bindir, veth, tmp, runs):
    """bench/middleware.py's MPI ping-pong rows across the veth, vrnic and TCP alternating:
    [(figure, metric, vrnic's runs, TCP's runs)]."""
    pp = [tuple(pingpong(mpirun(bindir, veth, tmp, over, "--pingpong")[1])
                for over in ("vrnic", "tcp")) for _ in range(runs)]
    rows = []
    for size, idx, metric in ((8, 0, "lat_us"), (1048576, 1, "bw_MBps")):
        v, t = ([r[o].get(size, (None, None))[idx] for r in pp] for o in (0, 1))
        rows.append((f"MPI ping-pong {size} B, veth MTU {veth.mtu}", metric, v, t))
    return rows


def case(bindir):
    def body(veth, tmp):
        problems = []
        rc, out = mpirun(bindir, veth, tmp, "vrnic", None)
        print(out.strip().splitlines()[-1] if out.strip() else "(no output)")
        if rc != 0 or "mpi_check ring allreduce alltoall put get: 2 ranks, 0 failures" not in out:
            problems.append(f"checked exchanges: exit {rc}\n{out[-2000:]}")
        before = veth_bytes(veth)
        rc, out = mpirun(bindir, veth, tmp, "vrnic", "--pingpong")
        moved = [b - a for a, b in zip(before, veth_bytes(veth))]
        print("\n".join(out.strip().splitlines()[-3:]))
        print(f"veth in namespace a: {moved[0]} B received, {moved[1]} B sent")
        if rc != 0 or "mpi_check pingpong: 2 ranks, 0 failures" not in out:
            problems.append(f"ping-pong: exit {rc}\n{out[-2000:]}")
        if sorted(pingpong(out)) != [8, 1048576]:
            problems.append("ping-pong: no figures for 8 B and 1 MiB")
        if min(moved) < PINGPONG_BYTES // 2:
            problems.append(f"the veth carried {moved} B, not the ping-pong's "
                            f"{PINGPONG_BYTES // 2} each way")
        return problems
    return body


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("case", choices=["mpi_mtu1500", "mpi_mtu9000"])
    a = ap.parse_args()
    mtu = int(a.case.removeprefix("mpi_mtu"))
    return run_case(a.case, mtu, ["mpirun"], case(os.path.abspath(a.bin)))


if __name__ == "__main__":
    sys.exit(main())
