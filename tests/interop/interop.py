#!/usr/bin/env python3
"""Runs unmodified Debian RDMA programs on vrnic (server + client processes through
`vrnic run`) and checks their exit codes and their printed results.

  interop.py --bin BUILD/bin CASE     run one case (ctest runs each case on its own)
  interop.py --list                   list the cases
"""
import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cm_cases import cm_cases  # noqa: E402
from middleware_cases import mpi_cases, ucx_cases  # noqa: E402
import proctree  # noqa: E402

BW_LINE = re.compile(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$", re.M)
LAT_LINE = re.compile(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", re.M)
PINGPONG = [re.compile(r"\d+ bytes in [\d.]+ seconds = [\d.]+ Mbit/sec"),
            re.compile(r"\d+ iters in [\d.]+ seconds = [\d.]+ usec/iter")]
# perftest times with the CPU's cycle counter, whose rate it first measures against the
# clock; when the samples scatter (a loaded machine) it prints this and no result, whatever
# the device did. The case then runs once more (clock_failed, CLOCK_RERUN).
PERFTEST_CLOCK = re.compile(r"Correlation coefficient r\^2: [\d.]+ < 0\.9")
CLOCK_RERUN = "perftest could not measure its CPU clock"


def clock_failed(problems):
    return any(CLOCK_RERUN in p for p in problems)


def perftest(tool, opts=()):
    kind = "bw" if tool.endswith("_bw") else "lat"
    return {"server": [tool, *opts], "clients": [[tool, *opts, "127.0.0.1"]], "kind": kind}


def pingpong(opts=(), prog="ibv_rc_pingpong"):
    return {"server": [prog, "-g", "0", *opts],
            "clients": [[prog, "-g", "0", *opts, "127.0.0.1"]], "kind": "pingpong"}


def integrity(port, mode, clients=1, extra=()):
    atomic = clients * int(extra[0]) if mode == "atomic" else 0
    return {"server": ["@vrnic_integrity", "server", str(port),
                       str(clients * (int(extra[0]) if mode == "atomic" else 1)), str(atomic)],
            "clients": [["@vrnic_integrity", "client", "127.0.0.1", str(port), mode, *extra]
                        for _ in range(clients)],
            "kind": "integrity", "timeout": 300}


def cases():
    c = {"devinfo": {"single": ["ibv_devinfo", "-v"], "kind": "devinfo"},
         "rc_pingpong": pingpong(),
         "rc_pingpong_64k": pingpong(["-s", "65536", "-n", "1000"]),
         "rc_pingpong_check": pingpong(["-c"]),
         "rc_pingpong_events": pingpong(["-e"]),
         "integrity_data": integrity(18600, "data"),
         "integrity_atomic": integrity(18601, "atomic", clients=2, extra=["4", "2000"]),
         "integrity_access": integrity(18602, "access")}
    for tool in ["ib_write_bw", "ib_read_bw", "ib_send_bw", "ib_write_lat", "ib_read_lat",
                 "ib_send_lat", "ib_atomic_bw", "ib_atomic_lat"]:
        variants = {"": [], "_m1024": ["-m", "1024"], "_m4096": ["-m", "4096"]}
        if "atomic" not in tool:
            variants["_all"] = ["-a"]
        if tool.endswith("_bw"):
            variants["_q4"] = ["-q", "4"]
        for suffix, opts in variants.items():
            c[tool + suffix] = perftest(tool, opts)
            if suffix == "_all":  # every size from 2 B to 8 MiB at the default iterations
                c[tool + suffix]["timeout"] = 900
    for tool in ["ib_write_bw", "ib_read_bw", "ib_atomic_bw"]:
        c["pcap_" + tool] = dict(perftest(tool, ["-n", "200"]), pcap=True)
    c["ib_atomic_bw_cas"] = perftest("ib_atomic_bw", ["-A", "CMP_AND_SWAP"])
    c["ib_atomic_lat_cas"] = perftest("ib_atomic_lat", ["-A", "CMP_AND_SWAP"])
    # 256 QPs between two processes, 200 x 64 KiB each (the device window at work).
    c["ib_write_bw_q256"] = perftest("ib_write_bw", ["-q", "256", "-n", "200"])
    ext_cases(c)
    srq_mw_odp_cases(c)
    ud_uc_cases(c)
    direct_cases(c)
    cm_cases(c, perftest)
    ucx_cases(c)
    mpi_cases(c)
    return c


def ext_cases(c):
    """Extended verbs: the ibv_wr_* post-send API (-N), ibv_create_cq_ex with completion
    timestamps (-t), and perftest's selective signalling (--cq-mod). perftest 4.5 uses its
    ibv_wr_* path only on devices it recognises as mlx5 / EFA, so it has no case here."""
    c["rc_pingpong_new_send"] = pingpong(["-N"])
    c["rc_pingpong_ts"] = pingpong(["-t"])
    c["rc_pingpong_new_send_ts"] = pingpong(["-N", "-t"])
    # 64 B fits max_inline_data: rc_pingpong then puts IBV_SEND_INLINE in wr_flags.
    c["rc_pingpong_new_send_64"] = pingpong(["-N", "-s", "64"])
    c["ib_send_bw_cq_mod16"] = perftest("ib_send_bw", ["--cq-mod=16"])
    # Completion events instead of polling (-e): ibv_req_notify_cq and ibv_get_cq_event on a
    # blocking channel, the waiting thread moving the packets itself for a while. (perftest
    # refuses -e for the WRITE tests: "Events feature not available on WRITE verb".)
    for tool in ("ib_send_lat", "ib_read_lat", "ib_send_bw", "ib_read_bw"):
        c[tool + "_events"] = perftest(tool, ["-e"])


def srq_mw_odp_cases(c):
    """Shared receive queues and on-demand paging."""
    c["srq_pingpong"] = pingpong(prog="ibv_srq_pingpong")
    c["ib_send_bw_srq"] = perftest("ib_send_bw", ["--use-srq"])
    c["rc_pingpong_odp"] = pingpong(["-o"])
    c["rc_pingpong_odp_implicit"] = pingpong(["-O"])
    c["rc_pingpong_odp_prefetch"] = dict(pingpong(["-o", "-P"]), forbid=["Couldn't prefetch"])
    c["ib_write_bw_odp"] = perftest("ib_write_bw", ["--odp"])
    c["ib_send_bw_odp"] = perftest("ib_send_bw", ["--odp"])
    c["srq_pingpong_events"] = pingpong(["-e"], prog="ibv_srq_pingpong")
    c["ib_send_lat_srq"] = perftest("ib_send_lat", ["--use-srq"])
    c["ib_read_bw_odp"] = perftest("ib_read_bw", ["--odp"])


def ud_uc_cases(c):
    """Datagram (UD), unreliable connected (UC) and XRC QPs."""
    c["ud_pingpong"] = pingpong(prog="ibv_ud_pingpong")
    c["uc_pingpong"] = pingpong(prog="ibv_uc_pingpong")
    c["ib_send_bw_ud"] = perftest("ib_send_bw", ["-c", "UD"])
    c["ib_send_lat_ud"] = perftest("ib_send_lat", ["-c", "UD"])
    c["ib_send_bw_uc"] = perftest("ib_send_bw", ["-c", "UC"])
    c["ib_write_bw_uc"] = perftest("ib_write_bw", ["-c", "UC"])
    # XRC: each side opens an XRC domain through a file, makes XRC SRQs, initiator and
    # target QPs; every operation goes initiator -> target with the peer's SRQ number.
    for tool in ["ib_send_bw", "ib_write_bw", "ib_read_bw", "ib_atomic_bw", "ib_send_lat"]:
        c[tool + "_xrc"] = perftest(tool, ["-c", "XRC"])
    # Captured: every XRC frame's ICRC checked, and tshark decodes them without error.
    c["pcap_ib_write_bw_xrc"] = dict(perftest("ib_write_bw", ["-c", "XRC", "-n", "200"]),
                                     pcap=True)


def direct(spec, *checks):
    """The same programs with both processes under `vrnic run --direct --stats`. Each check,
    "WHO COUNTER OP VALUE" (WHO: client or server, OP: > == >=), is made on the counters the
    process prints at exit; a counter it does not print is zero."""
    return dict(spec, direct=True, counters=list(checks))


def direct_cases(c):
    """Same-host direct mode: RDMA WRITE / READ as process_vm_writev/readv copies, the rest on
    the wire. perftest exchanges its setup over TCP, never over RDMA, so a client's tx_write
    or tx_read_request at exit counts every WRITE / READ that went on the wire."""
    writes = ("client direct_writes > 0", "client tx_write == 0", "client direct_fallbacks == 0",
              "server rx_write == 0")
    reads = ("client direct_reads > 0", "client tx_read_request == 0",
             "client direct_fallbacks == 0", "server rx_read_request == 0")
    for tool, checks in [("ib_write_bw", writes), ("ib_read_bw", reads)]:
        for suffix, opts in {"": [], "_s65536": ["-s", "65536", "-n", "20000"],
                             "_s64": ["-s", "64", "-n", "20000"]}.items():
            c["direct_" + tool + suffix] = direct(perftest(tool, opts), *checks)
    c["direct_ib_write_bw_q4"] = direct(perftest("ib_write_bw", ["-q", "4"]), *writes)
    # Latency: ib_write_lat's server writes back (ping-pong); ib_read_lat's does nothing.
    c["direct_ib_write_lat"] = direct(perftest("ib_write_lat"), *writes,
                                      "server direct_writes > 0", "server tx_write == 0")
    c["direct_ib_read_lat"] = direct(perftest("ib_read_lat"), *reads)
    # SEND and atomics have no direct path: on the wire as without direct mode.
    c["direct_ib_send_bw"] = direct(perftest("ib_send_bw"), "client tx_send > 0",
                                    "server rx_send > 0", "client direct_writes == 0",
                                    "client direct_fallbacks == 0")
    c["direct_ib_atomic_bw"] = direct(perftest("ib_atomic_bw"), "client tx_atomic > 0",
                                      "server rx_atomic > 0", "client direct_writes == 0",
                                      "client direct_reads == 0")
    # vrnic_integrity: plain WRITEs and READs go direct (every READ: none on the wire); WRITE
    # with immediate and SEND go on the wire.
    c["direct_integrity_data"] = direct(integrity(18603, "data"), "client direct_writes > 0",
                                        "client direct_reads > 0", "client tx_read_request == 0",
                                        "client direct_fallbacks == 0", "client tx_send > 0")
    # Every refused access (8 of them: WRITE, READ, FAA) is offered to direct mode, refused by
    # the table, and NAKed by the responder on the wire; nothing is copied. The WRITE after
    # each of the 3 recoveries of the QPs in place goes direct again.
    c["direct_integrity_access"] = direct(integrity(18604, "access"),
                                          "client direct_fallbacks > 0",
                                          "client rx_nak_rem_access == 8",
                                          "server tx_nak_rem_access == 8",
                                          "client direct_writes == 3", "client direct_reads == 0")


STATS = re.compile(r"vrnic: \S+ \S+ \([^)]*, pid \d+\) counters:\n((?:(?:[a-z0-9_]+ \d+|\(all zero\))\n)*)")


def split_stats(out):
    """The counter blocks `--stats` prints at exit (to stderr: possibly in the middle of a
    line the program had not finished on stdout), and the output without them. Returns
    ([{counter: value}] per block, output)."""
    blocks = [{k: int(v) for k, v in re.findall(r"^([a-z0-9_]+) (\d+)$", m.group(1), re.M)}
              for m in STATS.finditer(out)]
    return blocks, STATS.sub("", out)


def check_counters(tag, blocks, checks):
    who = "client" if tag.startswith("client") else tag
    checks = [c for c in checks if c.split()[0] == who]
    if not checks:
        return []
    if len(blocks) != 1:
        return [f"{len(blocks)} counter blocks printed at exit, want 1"]
    problems = []
    for check in checks:
        w, name, op, value = check.split()
        if w != who:
            continue
        got = blocks[0].get(name, 0)
        ok = {">": got > int(value), "==": got == int(value), ">=": got >= int(value)}[op]
        print(f"counter check {tag}: {name} = {got}, want {op} {value}: {'ok' if ok else 'NO'}")
        if not ok:
            problems.append(f"counter {name} = {got}, want {op} {value}")
    return problems


def resolve(argv, bindir, tmp=""):
    return [os.path.join(bindir, a[1:]) if a.startswith("@") else a.replace("{tmp}", tmp)
            for a in argv]


def launch(vrnic, argv, bindir, log, env, pcap=None, direct=False, stats=False, tmp=""):
    opts = ["--pcap", pcap] if pcap else []
    if direct:
        opts += ["--direct", "--stats"]
    elif stats:
        opts += ["--stats"]
    # A session of its own: a kill reaches the processes it forked too (fio's job processes),
    # which would otherwise hold their vrnic address into the next case.
    return subprocess.Popen([vrnic, "run", *opts, "--", *resolve(argv, bindir, tmp)], stdout=log,
                            stderr=subprocess.STDOUT, env=env, start_new_session=True)


def kill_tree(p):
    proctree.kill_tree(p.pid)


def check_captures(bindir, files):
    """Every frame of every capture: our ICRC/BTH check, and tshark decodes it with no
    malformed frame. Returns a list of problems."""
    problems = []
    chk = subprocess.run([os.path.join(bindir, "vrnic_pcap_check"), *files],
                         capture_output=True, text=True)
    print(chk.stdout + chk.stderr)
    if chk.returncode != 0:
        problems.append("vrnic_pcap_check found bad frames")
    for f in files:
        total = subprocess.run(["tshark", "-r", f], capture_output=True, text=True)
        ib = subprocess.run(["tshark", "-r", f, "-Y", "infiniband"], capture_output=True, text=True)
        bad = subprocess.run(["tshark", "-r", f, "-Y", "_ws.malformed || _ws.expert.severity >= error"],
                             capture_output=True, text=True)
        n_total = len(total.stdout.splitlines())
        n_ib = len(ib.stdout.splitlines())
        n_bad = len(bad.stdout.splitlines())
        print(f"tshark {os.path.basename(f)}: {n_total} frames, {n_ib} decoded as InfiniBand, "
              f"{n_bad} malformed")
        if total.returncode != 0 or n_total == 0 or n_ib != n_total or n_bad != 0:
            problems.append(f"tshark: {os.path.basename(f)}: {n_total} frames, {n_ib} InfiniBand, "
                            f"{n_bad} malformed")
            print(bad.stdout[:2000])
    return problems


def tshark_fields(path, display_filter, *fields):
    """Rows of the given fields of the frames matching the filter."""
    args = ["tshark", "-r", path, "-Y", display_filter, "-T", "fields"]
    for f in fields:
        args += ["-e", f]
    out = subprocess.run(args, capture_output=True, text=True).stdout
    return [line.split("\t") for line in out.splitlines() if line.strip()]


def check_cm_capture(server_pcap):
    """The server's capture of an rping: the five CM messages in order, the REQ for port 7174
    from 127.0.0.2 to 127.0.0.1, its QPN and starting PSN those of the client's RC packets, and
    the REP's QPN the one the client's packets go to."""
    problems = []
    names = [r[0] for r in tshark_fields(server_pcap, "infiniband.mad", "_ws.col.Info")]
    want = ["ConnectRequest", "ConnectReply", "ReadyToUse", "DisconnectRequest",
            "DisconnectReply"]
    got = [w for w in want if any(w in n for n in names)]
    print(f"CM messages in the server's capture: {names}")
    if got != want:
        problems.append(f"CM messages {names}, want {want}")
    req = tshark_fields(server_pcap, "infiniband.cm.req", "infiniband.cm.req.serviceid.dport",
                        "infiniband.cm.req.ip_cm.sip4", "infiniband.cm.req.ip_cm.dip4",
                        "infiniband.cm.req.localqpn", "infiniband.cm.req.startpsn")
    rep = tshark_fields(server_pcap, "infiniband.cm.rep", "infiniband.cm.rep.localqpn",
                        "infiniband.cm.rep.startpsn")
    rc = "infiniband.bth.opcode < 32"  # RC packets (the CM's are UD SEND_ONLY, 100)
    from_client = tshark_fields(server_pcap, rc + " && ip.src == 127.0.0.2",
                                "infiniband.bth.destqp", "infiniband.bth.psn")
    to_client = tshark_fields(server_pcap, rc + " && ip.src == 127.0.0.1", "infiniband.bth.destqp")
    if len(req) != 1 or len(rep) != 1 or not from_client or not to_client:
        return problems + [f"REQ {req}, REP {rep}, {len(from_client)} RC packets from the "
                           f"client, {len(to_client)} to it"]
    port, sip, dip, req_qpn, req_psn = req[0]
    print(f"REQ: port {port}, {sip} -> {dip}, QPN {req_qpn}, PSN {req_psn}; REP: QPN {rep[0][0]}; "
          f"client's first RC packet: dest QP {from_client[0][0]}, PSN {from_client[0][1]}")
    if int(port, 0) != 7174 or sip != "127.0.0.2" or dip != "127.0.0.1":
        problems.append(f"REQ for port {port} from {sip} to {dip}")
    if int(req_psn, 0) != int(from_client[0][1], 0):
        problems.append(f"REQ starting PSN {req_psn}, client's first PSN {from_client[0][1]}")
    if any(int(q, 0) != int(req_qpn, 0) for (q,) in to_client):
        problems.append(f"server's packets not all to the REQ's QPN {req_qpn}")
    if any(int(q, 0) != int(rep[0][0], 0) for q, _ in from_client):
        problems.append(f"client's packets not all to the REP's QPN {rep[0][0]}")
    return problems


def check_output(kind, out):
    """Returns a list of problems with one process's output (empty = good)."""
    if kind == "devinfo":
        need = [r"state:\s+PORT_ACTIVE", r"link_layer:\s+Ethernet", r"GID\[\s*0\]:.*RoCE v2",
                r"vendor_id:\s+0x0?27672", r"node_guid:\s+(?!0000:0000:0000:0000)[0-9a-f:]{19}"]
        return [f"missing /{n}/" for n in need if not re.search(n, out)]
    if kind == "pingpong":
        return [f"missing /{p.pattern}/" for p in PINGPONG if not p.search(out)]
    if kind == "bw":
        rows = BW_LINE.findall(out)
        if not rows:
            return ["no bandwidth result line"]
        return [f"implausible row {r}" for r in rows if float(r[3]) <= 0 or int(r[1]) <= 0]
    if kind == "lat":
        rows = LAT_LINE.findall(out)
        if not rows:
            return ["no latency result line"]
        return [f"implausible row {r}" for r in rows if float(r[2]) <= 0]
    if kind == "integrity":
        return [] if re.search(r": PASS", out) else ["no PASS line"]
    return [f"unknown kind {kind}"]


def check_cm_output(spec, tag, out):
    return [f"missing /{r}/" for r in spec["expect"].get(tag, []) if not re.search(r, out)]


def with_port(spec, port):
    """Gives a pair its own TCP port (-p), so cases never meet a listener or TIME_WAIT of
    another run."""
    if "server" not in spec or spec["kind"] == "integrity" or spec.get("noport"):
        return spec
    spec = dict(spec)
    spec["server"] = spec["server"][:1] + ["-p", str(port)] + spec["server"][1:]
    spec["clients"] = [c[:1] + ["-p", str(port)] + c[1:] for c in spec["clients"]]
    return spec


def retry_unheard_client(procs, spec, start_server, start_client, logs):
    """A CM client that came before the server listened is rejected at once with reason 8
    (invalid service ID; UD: SIDR status 1), as with any RDMA CM. perftest -R's client meets it
    for its
    second connection when the server is slow to listen again after the first (and then
    frees the nodes it retries with: perftest 4.5's retry crashes), leaving the server
    half-connected. Either way the pair is started again, server first, at most twice."""
    for _ in range(2):
        tag, p = procs[1]
        try:
            rc = p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return
        path = dict(logs)[tag]
        out = open(path).read()
        # TCP port space: REJ reason 8 (invalid service ID); UD: SIDR_REP status 1.
        if rc == 0 or not re.search(r"REJECTED[;,] error:? 8\b|UNREACHABLE; error: 1\b", out):
            return
        print(f"{tag}: rejected, the server not listening (yet); starting the pair again")
        kill_tree(procs[0][1])
        procs[0][1].wait()
        procs[0] = ("server", start_server())
        time.sleep(spec.get("start_delay", 0.5))
        procs[1] = (tag, start_client())


def address_held():
    """Cases run one at a time (RUN_SERIAL) and expect their server at 127.0.0.1, the first
    free address: if (127.0.0.1, 4791) cannot be bound, a process an earlier run left holds it
    and would answer this case's client. Returns a problem naming the holder, else None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.bind(("127.0.0.1", 4791))
            return None
        except OSError:
            pass
    holder = subprocess.run(["ss", "-Huanp", "sport = :4791 and src 127.0.0.1"],
                            capture_output=True, text=True).stdout.strip()
    return f"127.0.0.1 port 4791 is held before the case starts: {holder or 'by an unknown process'}"


def run_case(name, spec, vrnic, bindir, timeout):
    held = address_held()
    if held:
        return [held]
    env = dict(os.environ)
    env.pop("VRNIC_IP", None)  # every process takes its own loopback address
    env.update(spec.get("env", {}))
    timeout = spec.get("timeout", timeout)
    problems, logs = [], []
    with tempfile.TemporaryDirectory(prefix="vrnic-interop-") as tmp:
        flags = {"direct": spec.get("direct", False), "stats": spec.get("stats", False), "tmp": tmp}
        def logfile(tag):
            path = os.path.join(tmp, tag + ".log")
            logs.append((tag, path))
            return open(path, "w")

        procs = []
        if "single" in spec:
            procs.append(("program", launch(vrnic, spec["single"], bindir, logfile("program"), env)))
        elif "plain" in spec:  # a launcher that starts `vrnic run` itself (mpirun)
            procs.append(("program", subprocess.Popen(
                resolve(spec["plain"], bindir, tmp), stdout=logfile("program"),
                stderr=subprocess.STDOUT, env=env, start_new_session=True)))
        else:
            cap = (lambda tag: os.path.join(tmp, tag + ".pcap")) if spec.get("pcap") else (lambda tag: None)
            if spec.get("setup"):
                spec["setup"](tmp)
            procs.append(("server", launch(vrnic, spec["server"], bindir, logfile("server"), env,
                                           cap("server"), **flags)))
            time.sleep(spec.get("start_delay", 0.5))  # let the server reach its accept / listen
            for i, argv in enumerate(spec["clients"]):
                procs.append((f"client{i}", launch(vrnic, argv, bindir, logfile(f"client{i}"), env,
                                                   cap(f"client{i}"), **flags)))
        deadline = time.time() + timeout
        if spec.get("start_delay") and len(procs) > 1:
            retry_unheard_client(
                procs, spec,
                lambda: launch(vrnic, spec["server"], bindir, open(dict(logs)["server"], "w"),
                               env, cap("server"), **flags),
                lambda: launch(vrnic, spec["clients"][0], bindir,
                               open(dict(logs)["client0"], "w"), env, cap("client0"), **flags),
                logs)
        for tag, p in procs:
            if tag == "server" and spec.get("server_persists"):
                continue  # stopped once the clients are done
            try:
                rc = p.wait(timeout=max(1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                for _, q in procs:
                    kill_tree(q)
                p.wait()
                problems.append(f"{tag}: timed out after {timeout}s")
                continue
            if rc != 0:
                problems.append(f"{tag}: exit status {rc}")
        if spec.get("server_persists"):
            server = procs[0][1]
            if server.poll() is not None:
                problems.append(f"server: exited early with status {server.returncode}")
            kill_tree(server)
            server.wait()
        for tag, path in logs:
            out = open(path).read()
            shown = "\n".join(line[:300] for line in out.rstrip().splitlines())
            print(f"----- {name} {tag} -----\n{shown}")
            if spec.get("direct") or spec.get("stats"):
                blocks, out = split_stats(out)
                problems += [f"{tag}: {p}" for p in check_counters(tag, blocks, spec["counters"])]
            # A bw server prints the table too; a lat server may not (perftest prints it on
            # the client only for some tests): require results from the client side always.
            if spec["kind"] == "cm":
                problems += [f"{tag}: {p}" for p in check_cm_output(spec, tag, out)]
            elif tag.startswith("client") or tag == "program" or spec["kind"] in ("bw", "pingpong"):
                problems += [f"{tag}: {p}" for p in check_output(spec["kind"], out)]
            elif spec["kind"] == "integrity":
                problems += [f"{tag}: {p}" for p in check_output("integrity", out)]
            if spec.get("check"):
                problems += [f"{tag}: {p}" for p in spec["check"](out)]
            if PERFTEST_CLOCK.search(out):
                problems.append(f"{tag}: {CLOCK_RERUN} (its r^2 check failed)")
            # Messages a program prints but survives (e.g. "Couldn't prefetch MR").
            problems += [f"{tag}: printed {m!r}" for m in spec.get("forbid", ()) if m in out]
        if spec.get("pcap") and not problems:
            problems += check_captures(bindir, sorted(os.path.join(tmp, f) for f in os.listdir(tmp)
                                                      if f.endswith(".pcap")))
        if spec.get("cm_capture") and not problems:
            problems += check_cm_capture(os.path.join(tmp, "server.pcap"))
        if spec.get("post"):
            problems += spec["post"](tmp)
    left = proctree.kill_leftovers()
    if left:
        problems.append(f"left running after the case (killed): {', '.join(left)}")
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "../../build/release/bin"))
    ap.add_argument("--timeout", type=int, default=180)
    ap.add_argument("--list", action="store_true")
    ap.add_argument("case", nargs="*")
    a = ap.parse_args()
    all_cases = cases()
    if a.list:
        print("\n".join(all_cases))
        return 0
    bindir = os.path.abspath(a.bin)
    vrnic = os.path.join(bindir, "vrnic")
    proctree.become_subreaper()
    failed = 0
    names = list(all_cases)
    for name in a.case or names:
        t0 = time.time()
        # VRNIC_INTEROP_PORT_BASE keeps concurrent runs from different trees apart.
        base = int(os.environ.get("VRNIC_INTEROP_PORT_BASE", "21000"))
        spec = with_port(all_cases[name], base + 7 * names.index(name))
        problems = run_case(name, spec, vrnic, bindir, a.timeout)
        if clock_failed(problems):
            print(f"== {name}: {CLOCK_RERUN}: running the case once more")
            problems = run_case(name, spec, vrnic, bindir, a.timeout)
        status = "PASS" if not problems else "FAIL"
        print(f"== {name}: {status} ({time.time() - t0:.1f}s)")
        for p in problems:
            print(f"   {p}")
        failed += bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
