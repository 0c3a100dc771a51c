#!/usr/bin/python3
"""The RDMA CM between two hosts: two network namespaces joined by a veth pair (tests/veth).

  cm_veth.py --bin BUILD/bin cm_utils|cm_disconnect|cm_resolve

cm_utils: Debian's rdmacm-utils across the link, server in namespace b, client in a: rping
(200 verified pings), ucmatose and udaddy (4 connections each), rdma_server/rdma_client,
cmtime (20 connections timed), riostream (rsockets, every byte checked).
cm_disconnect: vrnic_cm_disconnect's plans across the link: both sides get DISCONNECTED
(status 0), the QP in ERR, a peer that exits unclean or stops (-ETIMEDOUT) still ends it.
cm_resolve: rdma_resolve_addr from namespace a (10.97.0.1/24 and fd97::1/64, no default
route) as the kernel CMA answers: the peer ADDR_RESOLVED; an address with no route
ENETUNREACH at once; an IPv6 address (routable, but no RDMA device has a source for it)
ADDR_ERROR -ENODEV.
Every program runs as a plain user (nobody, through setpriv), as users run them.
Exit status: 0 pass, 1 fail, 77 skipped (not root, no `ip netns`, a program missing).
"""
import argparse
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from veth_wire import run_case  # noqa: E402

UTILS = [  # name, server argv, client argv, server lines, client lines, server persists
    ("rping", ["rping", "-s", "-a", "{b}", "-C", "200", "-V", "-S", "4096"],
     ["rping", "-c", "-a", "{b}", "-C", "200", "-V", "-S", "4096", "-v"],
     [], [r"ping data: rdma-ping-199: "], False),
    ("ucmatose", ["ucmatose", "-c", "4"], ["ucmatose", "-s", "{b}", "-c", "4"],
     [r"return status 0"], [r"data transfers complete", r"return status 0"], False),
    ("udaddy", ["udaddy", "-c", "4"], ["udaddy", "-s", "{b}", "-c", "4"],
     [r"return status 0"], [r"data transfers complete", r"return status 0"], False),
    ("rdma_server", ["rdma_server", "-s", "{b}"], ["rdma_client", "-s", "{b}"],
     [r"rdma_server: end 0"], [r"rdma_client: end 0"], False),
    ("cmtime", ["cmtime", "-b", "{b}"], ["cmtime", "-s", "{b}", "-c", "20"],
     [], [r"connect\s*:\s*[\d.]+", r"disconnect\s*:\s*[\d.]+"], True),
    ("riostream", ["riostream", "-b", "{b}", "-T", "v", "-S", "65536", "-C", "1000"],
     ["riostream", "-s", "{b}", "-T", "v", "-S", "65536", "-C", "1000"],
     [r"(?m)^custom\s+64k\s+1k\s"], [r"(?m)^custom\s+64k\s+1k\s"], False),
]

DISCONNECT = [("answer", "first"), ("first", "answer"), ("first", "first"),
              ("leave", "first"), ("exit", "answer"), ("answer", "sync"),
              ("stop", "unanswered")]


# A plain user's view: no capabilities, no privileged ports, /dev/shm and sockets as anyone.
PLAIN_USER = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]


def pair(veth, vrnic, tmp, tag, server, client, persists=False, env=None):
    """server in namespace b, client in a, each under `vrnic run --ip`; the logs' text once
    the client exits (a persisting server is stopped then) and the problems seen."""
    logs = [os.path.join(tmp, f"{tag}.{side}.log") for side in ("server", "client")]
    envs = dict(os.environ, **(env or {}))
    run = lambda i, argv, log: subprocess.Popen(
        [*veth.exec(i), *PLAIN_USER, vrnic, "run", "--ip", veth.addr[i], "--", *argv],
        stdout=open(log, "w"), stderr=subprocess.STDOUT, env=envs, start_new_session=True)
    s = run(1, server, logs[0])
    time.sleep(1.5)
    t0 = time.time()
    c = run(0, client, logs[1])
    problems = []
    for name, p in (("client", c), ("server", s)):
        if name == "server" and persists:
            time.sleep(0.5)
            os.killpg(p.pid, 9)
            p.wait()
            continue
        try:
            rc = p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            rc = "timeout"
        if rc != 0:
            problems.append(f"{tag} {name}: exit {rc}")
    texts = [open(x).read() for x in logs]
    print(f"----- {tag} ({time.time() - t0:.1f} s) -----")
    for side, text in zip(("server", "client"), texts):
        print("\n".join(f"{side}: {line[:200]}" for line in text.splitlines()
                        if "ping data" not in line or "rdma-ping-199" in line))
    return problems, texts


def expect(tag, texts, server_lines, client_lines):
    problems = []
    for side, text, lines in zip(("server", "client"), texts, (server_lines, client_lines)):
        problems += [f"{tag} {side}: missing /{r}/" for r in lines if not re.search(r, text)]
    return problems


def case_utils(veth, vrnic, tmp):
    problems = []
    for name, server, client, s_lines, c_lines, persists in UTILS:
        fill = lambda argv: [a.replace("{b}", veth.addr[1]) for a in argv]
        p, texts = pair(veth, vrnic, tmp, name, fill(server), fill(client), persists)
        problems += p + expect(name, texts, s_lines, c_lines)
    return problems


def case_disconnect(veth, vrnic, tmp):
    prog = os.path.join(os.path.dirname(vrnic), "vrnic_cm_disconnect")
    problems = []
    for i, (server, client) in enumerate(DISCONNECT):
        port = str(7480 + i)
        tag = f"{server}-{client}"
        p, texts = pair(veth, vrnic, tmp, tag, [prog, "server", veth.addr[1], port, server],
                        [prog, "client", veth.addr[1], port, client], persists=server == "stop",
                        env={"VRNIC_CM_RESPONSE_TIMEOUT": "12"} if server == "stop" else None)
        problems += p + expect(tag, texts, [rf"server {server}: (PASS|exiting|stopping)"],
                               [rf"client {client}: PASS"])
    return problems


def case_resolve(veth, vrnic, tmp):
    veth.run("ip", "-n", veth.ns[0], "addr", "add", "fd97::1/64", "dev", veth.dev[0],
             "nodad")
    prog = os.path.join(os.path.dirname(vrnic), "vrnic_cm_resolve")
    want = {veth.addr[1]: "ADDR_RESOLVED", "192.0.2.1": "errno ENETUNREACH",
            "fd97::2": "ADDR_ERROR status -19", "2001:db8::1": "errno ENETUNREACH"}
    out = subprocess.run([*veth.exec(0), *PLAIN_USER, vrnic, "run", "--ip", veth.addr[0], "--",
                          prog, *want], capture_output=True, text=True, timeout=60)
    print(out.stdout + out.stderr)
    return [f"resolve {a}: want {w}" for a, w in want.items()
            if f"resolve {a}: {w}" not in out.stdout]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("case", choices=["cm_utils", "cm_disconnect", "cm_resolve"])
    a = ap.parse_args()
    vrnic = os.path.join(os.path.abspath(a.bin), "vrnic")
    body = {"cm_utils": case_utils, "cm_disconnect": case_disconnect,
            "cm_resolve": case_resolve}[a.case]
    tools = ("ip", "setpriv", "rping", "ucmatose", "cmtime") if a.case == "cm_utils" else \
        ("ip", "setpriv")
    return run_case(a.case, 1500, tools, lambda veth, tmp: body(veth, vrnic, tmp))


if __name__ == "__main__":
    sys.exit(main())
