"""Fault cases of RDMA's known attacks (ReDMArk, USENIX Security 2021), run by faults.py:
forged packets at a live connected QP (vrnic_inject, this directory) without and with the
authenticated mode, and the authenticated mode between two processes: rping with
`vrnic run --auth` on both sides, and refused against a side without it."""
import time

from faults_common import counters, live_counters, read_log

ADDR, STRANGER = "127.0.0.1", "127.0.0.9"


def case_forged(r, name, spec, port, timeout):
    """vrnic_inject: every forged packet leaves the target's memory as it was, is named by
    a counter, and the connection still carries a WRITE and a READ (the program checks)."""
    opts = ["--auth"] if spec.get("auth") else []
    tag, p, path = r.start(name, ["@vrnic_inject", ADDR, str(port), STRANGER, r.vrnic,
                                  *(["auth"] if spec.get("auth") else [])], ip=ADDR, opts=opts)
    problems, _ = r.wait_all([(tag, p, path)], 120)
    out = read_log(path)
    print(f"----- {tag} -----\n{out.rstrip()}")
    if "inject: PASS" not in out:
        problems.append("no 'inject: PASS' line")
    return problems


def rping_pair(r, name, port, server_opts, client_opts, rounds=10):
    server = r.start(f"{name}.server", ["rping", "-s", "-a", ADDR, "-C", str(rounds), "-V",
                                        "-p", str(port)], ip=ADDR, opts=server_opts)
    time.sleep(1)
    client = r.start(f"{name}.client", ["rping", "-c", "-a", ADDR, "-C", str(rounds), "-V", "-v",
                                        "-p", str(port)], ip="127.0.0.2", opts=client_opts)
    return server, client


def case_auth_rping(r, name, spec, port, timeout):
    """rping with `vrnic run --auth` on both sides: every ping verified, and each side took
    its peer's packets by their tags (rx_auth_ok > 0), none refused."""
    server, client = rping_pair(r, name, port, ["--auth"], ["--auth"])
    problems, _ = r.wait_all([server, client], 60)
    for tag, _, path in (server, client):
        out = read_log(path)
        c = counters(out)
        print(f"{tag}: rx_auth_ok={c.get('rx_auth_ok', 0)} rx_auth_failed="
              f"{c.get('rx_auth_failed', 0)} rx_auth_replayed={c.get('rx_auth_replayed', 0)} "
              f"rx_packets={c.get('rx_packets', 0)}")
        if c.get("rx_auth_ok", 0) == 0:
            problems.append(f"{tag}: no packet taken by its tag")
        if c.get("rx_auth_failed", 0) or c.get("rx_auth_replayed", 0):
            problems.append(f"{tag}: packets refused between two authenticated sides")
    if "ping data: rdma-ping-9: " not in read_log(client[2]):
        problems.append("client: the 10th ping is missing")
    return problems


def case_auth_refused(r, name, spec, port, timeout):
    """One side with `--auth`, the other without: the connection is refused (REJ, consumer
    reject: the program sees RDMA_CM_EVENT_REJECTED) and no ping is exchanged; the client
    gives up at once instead of hanging."""
    auth_side = spec["auth_side"]
    server, client = rping_pair(r, name, port, ["--auth"] if auth_side == "server" else [],
                                ["--auth"] if auth_side == "client" else [])
    t0 = time.time()
    try:
        rc = client[1].wait(timeout=30)
    except Exception:  # noqa: BLE001  (a hang is the failure looked for)
        client[1].kill()
        rc = None
    took = time.time() - t0
    server_counters = live_counters(r.vrnic, server[1].pid)  # before it is stopped
    server[1].kill()
    server[1].wait()
    problems = []
    out, sout = read_log(client[2]), read_log(server[2])
    print(f"----- {client[0]} (exit {rc}, {took:.1f} s) -----\n{out.rstrip()}")
    print(f"----- {server[0]} -----\n{sout.rstrip()}")
    if rc is None:
        problems.append("client: still connecting 30 s later")
    elif rc == 0:
        problems.append("client: exit 0, want the connection refused")
    if "REJECTED" not in out:
        problems.append("client: no RDMA_CM_EVENT_REJECTED")
    if "ping data" in out:
        problems.append("client: pings went through")
    rejects = (counters(out) if auth_side == "client" else server_counters).get("cm_rejects_sent", 0)
    if rejects == 0:
        problems.append(f"the {auth_side} (with --auth) sent no REJ")
    return problems
