#!/usr/bin/env python3
"""Runs vrnic pairs on an impaired network and checks that Reliable Connection still holds:
perftest pairs and the integrity test under the seeded injector (`vrnic run --faults`), under
kernel netem and under nftables rules (plus an HTB class for reordering) between two network
namespaces, and the loss of the peer mid-transfer.

  faults.py --bin BUILD/bin CASE     run one case (ctest runs each case on its own)
  faults.py --list                   list the cases

Exit status: 0 pass, 1 fail, 77 skipped (netem/nft cases without root, `ip netns`, sch_netem
or nftables; the reason is printed on a line starting with SKIPPED).
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "interop"))
import interop  # noqa: E402  (its output checks and the integrity case spec)
import proctree  # noqa: E402
from attack_cases import case_auth_refused, case_auth_rping, case_forged  # noqa: E402
from cm_faults import case_cm_nft, case_cm_peer_death, case_cm_rping  # noqa: E402
from kill_cases import case_mpi_kill, case_rstream_kill  # noqa: E402
from last_byte_case import case_last_byte  # noqa: E402
from faults_common import counters, read_log  # noqa: E402
from netns import Nft, Skipped, netem_or_nft  # noqa: E402

SKIP = 77

# Impairment profiles. The injector spec is given to `vrnic run --faults` (each process its
# own seed); the netem arguments go on the root qdisc of each end of the veth pair; the nft
# entries are rates in 1/10000 of the RoCEv2 datagrams (UDP dport 4791) each namespace gets
# (loss, dup, corrupt) or sends (reorder), see Nft.
PROFILES = {
    "loss1": {"inject": "loss=0.01", "netem": ["loss", "1%"], "nft": {"loss": 100}},
    "loss5": {"inject": "loss=0.05", "netem": ["loss", "5%"], "nft": {"loss": 500}},
    "none": {"inject": "", "netem": None, "nft": None},
    "mix": {"inject": "loss=0.01,dup=0.01,reorder=0.02,corrupt=0.01",
            "netem": ["delay", "1ms", "reorder", "2%", "loss", "1%", "duplicate", "1%",
                      "corrupt", "1%"],
            "nft": {"loss": 100, "dup": 100, "corrupt": 100, "reorder": 200}},
    # Only nft_reorder_write_bw: the HTB reordering alone, no packet lost.
    "reorder": {"inject": "reorder=0.02", "netem": ["delay", "1ms", "reorder", "2%"],
                "nft": {"reorder": 200}},
}

# Few iterations: Go-Back-N at 5 % loss resends whole windows, so the default 5000 64 KiB
# messages would take minutes.
PERFTESTS = {"write_bw": ["ib_write_bw", "-n", "300"], "read_bw": ["ib_read_bw", "-n", "300"],
             "send_bw": ["ib_send_bw", "-n", "300"], "atomic_bw": ["ib_atomic_bw", "-n", "2000"]}


def pair_cases():
    c = {}
    for where in ("inject", "netem", "nft"):
        for prof in ("loss1", "loss5", "mix"):
            for name, argv in PERFTESTS.items():
                c[f"{where}_{prof}_{name}"] = {"where": where, "profile": prof, "kind": "bw",
                                               "server": argv, "clients": [argv + ["@HOST"]]}
            c[f"{where}_{prof}_integrity_data"] = dict(interop.integrity(18700, "data"),
                                                       where=where, profile=prof)
            # Two processes' concurrent Fetch-and-Add: the server checks the exact sum.
            c[f"{where}_{prof}_integrity_atomic"] = dict(
                interop.integrity(18701, "atomic", clients=2, extra=["2", "500"]),
                where=where, profile=prof)
    return c


def cases():
    c = pair_cases()
    # The namespace plumbing alone (veth, --ip, perftest across namespaces), no qdisc: shows
    # the netem cases' setup works even where the kernel lacks netem.
    c["netns_plain_write_bw"] = {"where": "netem", "profile": "none", "kind": "bw",
                                 "server": PERFTESTS["write_bw"],
                                 "clients": [PERFTESTS["write_bw"] + ["@HOST"]]}
    # The nft reordering alone: with nothing lost, an out-of-sequence packet can only come
    # from a packet held in the HTB class.
    c["nft_reorder_write_bw"] = dict(c["netns_plain_write_bw"], where="nft", profile="reorder")
    for op in ("write", "read", "atomic"):
        c[f"peer_loss_{op}"] = {"special": "peer_loss", "op": op}
    c["peer_kill_write_bw"] = {"special": "peer_kill"}
    c["cm_rping_loss20"] = {"special": "cm_rping", "faults": "loss=0.2,dup=0.05", "rounds": 20}
    # The same loss on a real link: nftables drops 20 % and duplicates 5 % of the CM's MADs.
    c["cm_nft_rping_loss20"] = {"special": "cm_nft", "program": "rping", "rounds": 10}
    c["cm_nft_ucmatose_loss20"] = {"special": "cm_nft", "program": "ucmatose"}
    # Killed peers above the verbs: an MPI rank, an end of an rsockets stream.
    c["peer_kill_mpi_rank"] = {"special": "mpi_kill"}
    for end in ("server", "client"):
        c[f"peer_kill_rstream_{end}"] = {"special": "rstream_kill", "kill": end}
    # Forged packets at a connected QP, and the authenticated mode (attack_cases.py).
    c["forged_packets"] = {"special": "forged"}
    c["forged_packets_auth"] = {"special": "forged", "auth": True}
    c["auth_rping"] = {"special": "auth_rping"}
    for side in ("client", "server"):
        c[f"auth_refused_{side}_only"] = {"special": "auth_refused", "auth_side": side}
    c["cm_peer_death"] = {"special": "cm_peer_death"}
    c["last_byte_corrupt"] = {"special": "last_byte", "rounds": 300,
                              "faults": "corrupt=0.02,loss=0.01,dup=0.01"}
    c["inject_throughput"] = {"special": "throughput", "where": "inject"}
    c["netem_throughput"] = {"special": "throughput", "where": "netem"}
    return c


def on_sigterm(signum, frame):
    raise SystemExit(f"signal {signum}")


def expected_counters(where, profile, name):
    """(description, predicate over the pair's summed counters) that the impairment must show."""
    def more(counter):
        return (f"{counter} > 0", lambda c: c.get(counter, 0) > 0)
    if profile == "none":
        return []
    want = [more("retransmitted_packets")]
    if where == "nft":
        if profile == "reorder":
            want.append(more("rx_out_of_sequence"))
        if profile == "mix":
            # The copies from `dup to` and the flipped bytes must reach vrnic: its duplicate
            # detection and its ICRC check catch them.
            want += [more("rx_duplicate"), more("rx_icrc_errors")]
        if "atomic" in name:
            want.append(more("duplicate_atomics_replayed"))  # responses are lost, too
    if where == "inject":
        want.append(more("udp_rx_fault_dropped"))  # the injector itself counts what it drops
        if profile == "mix":
            want += [more("rx_duplicate"), more("rx_icrc_errors")]  # dup=, corrupt=
        if "atomic" in name:
            # A lost atomic ACK makes the requester resend; the responder must answer from
            # the ACK queue, not execute again (the exact sum is checked by the programs).
            want.append(more("duplicate_atomics_replayed"))
    return want


class Runner:
    def __init__(self, bindir, tmp):
        self.bindir = bindir
        self.vrnic = os.path.join(bindir, "vrnic")
        self.tmp = tmp
        self.env = dict(os.environ)
        self.env.pop("VRNIC_IP", None)
        self.env.pop("VRNIC_FAULTS", None)

    def start(self, tag, argv, faults=None, ip=None, prefix=(), opts=()):
        opts = ["--stats", *opts]
        if faults:
            opts += ["--faults", faults]
        if ip:
            opts += ["--ip", ip]
        # stdout and stderr apart: the counters go to stderr at exit, which would otherwise
        # land in the middle of perftest's buffered result line.
        path = os.path.join(self.tmp, tag + ".log")
        argv = interop.resolve(argv, self.bindir)
        p = subprocess.Popen([*prefix, self.vrnic, "run", *opts, "--", *argv],
                             stdout=open(path, "w"), stderr=open(path + ".err", "w"), env=self.env)
        return tag, p, path

    @staticmethod
    def wait_all(procs, timeout):
        problems, rcs = [], {}
        deadline = time.time() + timeout
        for tag, p, _ in procs:
            try:
                rcs[tag] = p.wait(timeout=max(1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                for _, q, _ in procs:
                    interop.kill_tree(q)
                p.wait()
                problems.append(f"{tag}: timed out after {timeout}s")
                rcs[tag] = None
                continue
            if rcs[tag] != 0:
                problems.append(f"{tag}: exit status {rcs[tag]}")
        return problems, rcs


def run_pair(r, name, spec, port, timeout, netem=None, seed_base=1):
    """One server + its clients; returns (problems, summed counters, outputs). Run once more
    when perftest could not measure its clock (interop.PERFTEST_CLOCK)."""
    result = run_pair_once(r, name, spec, port, timeout, netem, seed_base)
    if interop.clock_failed(result[0]):
        print(f"== {name}: {interop.CLOCK_RERUN}: running the pair once more")
        result = run_pair_once(r, name, spec, port, timeout, netem, seed_base)
    return result


def run_pair_once(r, name, spec, port, timeout, netem, seed_base):
    prof = PROFILES[spec["profile"]]
    host = netem.addr[0] if netem else "127.0.0.1"
    server = list(spec["server"])
    clients = [[host if a in ("@HOST", "127.0.0.1") else a for a in c] for c in spec["clients"]]
    if spec["kind"] != "integrity":
        server = server[:1] + ["-p", str(port)] + server[1:]
        clients = [c[:1] + ["-p", str(port)] + c[1:] for c in clients]

    def args(i):
        if netem:
            return {"ip": netem.addr[i], "prefix": netem.prefix(min(i, 1))}
        return {"faults": f"{prof['inject']},seed={seed_base + i}"}

    procs = [r.start(f"{name}.server", server, **args(0))]
    time.sleep(0.5)  # let the server reach its TCP accept
    for i, c in enumerate(clients):
        procs.append(r.start(f"{name}.client{i}", c, **args(1 + i)))
    problems, _ = r.wait_all(procs, spec.get("timeout", timeout))
    total, outs = {}, {}
    for tag, _, path in procs:
        out = read_log(path)
        outs[tag] = out
        print(f"----- {tag} -----\n{out.rstrip()}")
        problems += [f"{tag}: {p}" for p in interop.check_output(spec["kind"], out)]
        if interop.PERFTEST_CLOCK.search(out):
            problems.append(f"{tag}: {interop.CLOCK_RERUN} (its r^2 check failed)")
        for k, v in counters(out).items():
            total[k] = total.get(k, 0) + v
    return problems, total, outs


def check_counters(where, profile, name, total):
    shown = " ".join(f"{k}={v}" for k, v in sorted(total.items())
                     if k.startswith(("retrans", "rx_dup", "ack_time", "rx_nak", "tx_nak",
                                      "implicit", "rx_icrc", "rx_out", "udp_rx_fault",
                                      "duplicate_", "rx_malformed")))
    print(f"counters (both sides): {shown}")
    return [f"counters: want {d}" for d, ok in expected_counters(where, profile, name)
            if not ok(total)]


def nft_problems(n, profile):
    """What the kernel did under an Nft impairment (printed), and what says it did not act."""
    kernel = n.stats()
    print("kernel (both namespaces): " + " ".join(f"{k}={v}" for k, v in kernel.items()))
    # Each rule must have acted, or the case did not test what it says.
    problems = [f"kernel: no packet hit the nft {k} rule" for k in n.rates
                if kernel.get(f"nft_{k}", 0) == 0]
    if profile == "reorder":
        # Out of sequence must not come from a loss: none in the class, none at the socket.
        problems += [f"kernel: {k}={kernel.get(k, 0)}, want 0 (a loss, not a reorder)"
                     for k in ("htb_dropped", "udp_RcvbufErrors") if kernel.get(k, 0)]
    return problems


def case_pair(r, name, spec, port, timeout):
    where, prof = spec["where"], PROFILES[spec["profile"]]
    if where in ("netem", "nft"):
        # A netem case runs its profile through nftables where the kernel has no netem.
        n = netem_or_nft(prof["netem"]) if where == "netem" else Nft(prof["nft"])
        with n:
            problems, total, _ = run_pair(r, name, spec, port, timeout, netem=n)
            if isinstance(n, Nft):
                problems += nft_problems(n, spec["profile"])
        where = "nft" if isinstance(n, Nft) else where  # what the counters must then show
    else:
        problems, total, _ = run_pair(r, name, spec, port, timeout)
    if not any("timed out" in p or "exit status" in p for p in problems):
        problems += check_counters(where, spec["profile"], name, total)
    return problems


def case_throughput(r, name, spec, port, timeout):
    """ib_write_bw 64 KiB at 0 %, 1 % and 5 % loss, one after the other; prints a table."""
    rows, problems = [], []
    for loss in (0.0, 0.01, 0.05):
        iters = {0.0: 5000, 0.01: 1000, 0.05: 300}[loss]
        argv = ["ib_write_bw", "-s", "65536", "-n", str(iters)]
        s = {"profile": "loss1", "kind": "bw", "server": argv, "clients": [argv + ["@HOST"]]}
        PROFILES["_t"] = {"inject": f"loss={loss}", "netem": ["loss", f"{loss * 100:g}%"]}
        s["profile"] = "_t"
        tag = f"{name}.loss{loss * 100:g}"
        if spec["where"] == "netem":
            with netem_or_nft(PROFILES["_t"]["netem"]) as n:
                p, total, outs = run_pair(r, tag, s, port, timeout, netem=n)
        else:
            p, total, outs = run_pair(r, tag, s, port, timeout)
        problems += p
        bw = interop.BW_LINE.findall(outs.get(f"{tag}.client0", ""))
        rows.append((loss, iters, float(bw[0][3]) if bw else float("nan"),
                     total.get("retransmitted_packets", 0), total.get("ack_timeouts", 0),
                     total.get("rx_nak_psn_seq", 0)))
        port += 1
    print(f"\n{spec['where']}: ib_write_bw -s 65536")
    print("loss   iters  MB/s(avg)  retransmitted_packets  ack_timeouts  rx_nak_psn_seq")
    for loss, iters, bw, rt, to, nak in rows:
        print(f"{loss * 100:4g}%  {iters:5d}  {bw:9.2f}  {rt:21d}  {to:12d}  {nak:14d}")
    return problems


def case_peer_loss(r, name, spec, port, timeout):
    """vrnic_peer_loss: the client kills its server after 1 s and checks every CQE and the
    async event itself."""
    op = spec["op"]
    procs = [r.start(f"{name}.server", ["@vrnic_peer_loss", "server", str(port)])]
    time.sleep(0.5)
    t0 = time.time()
    procs.append(r.start(f"{name}.client",
                         ["@vrnic_peer_loss", "client", "127.0.0.1", str(port), "1000", op]))
    problems, rcs = r.wait_all(procs[1:], 60)
    procs[0][1].wait(timeout=5)
    print(f"client exited after {time.time() - t0:.1f}s")
    for tag, _, path in procs:
        print(f"----- {tag} -----\n{read_log(path).rstrip()}")
    out = read_log(procs[1][2])
    if f"client peer_loss {op}: PASS" not in out:
        problems.append("client: no PASS line")
    if procs[0][1].returncode != -signal.SIGKILL:
        problems.append(f"server: exit {procs[0][1].returncode}, want killed by SIGKILL")
    return problems


def case_peer_kill(r, name, spec, port, timeout):
    """An unmodified ib_write_bw pair in duration mode; SIGKILL the server's vrnic process
    after ~1.5 s; the client must report the retry error and exit within 10 s."""
    argv = ["ib_write_bw", "-p", str(port), "-D", "30"]
    procs = [r.start("peer_kill.server", argv)]
    time.sleep(0.5)
    procs.append(r.start("peer_kill.client", argv + ["127.0.0.1"]))
    time.sleep(1.5)
    problems = []
    server = procs[0][1]
    if server.poll() is not None:
        problems.append(f"server exited early ({server.returncode})")
    else:
        server.send_signal(signal.SIGKILL)  # `vrnic run` execs the program: this is ib_write_bw
        server.wait()
    killed = time.time()
    client = procs[1][1]
    try:
        rc = client.wait(timeout=30)
        took = time.time() - killed
    except subprocess.TimeoutExpired:
        client.kill()
        client.wait()
        rc, took = None, None
        problems.append("client: still running 30 s after its peer was killed")
    out = read_log(procs[1][2])
    print(f"----- peer_kill.client -----\n{out.rstrip()}")
    if took is not None:
        print(f"client exited with {rc}, {took:.2f} s after the kill")
        if took > 10:
            problems.append(f"client took {took:.1f} s to give up, want < 10 s")
    if not re.search(r"transport retry counter exceeded|status 12\b", out):
        problems.append("client: no 'transport retry counter exceeded' / status 12")
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "../../build/release/bin"))
    ap.add_argument("--timeout", type=int, default=240)
    ap.add_argument("--list", action="store_true")
    ap.add_argument("case", nargs="*")
    a = ap.parse_args()
    all_cases = cases()
    if a.list:
        print("\n".join(all_cases))
        return 0
    signal.signal(signal.SIGTERM, on_sigterm)
    proctree.become_subreaper()
    bindir = os.path.abspath(a.bin)
    names = list(all_cases)
    failed = skipped = 0
    for name in a.case or names:
        spec = all_cases[name]
        port = 22000 + 8 * names.index(name)
        t0 = time.time()
        with tempfile.TemporaryDirectory(prefix="vrnic-faults-") as tmp:
            r = Runner(bindir, tmp)
            kind = spec.get("special", "pair")
            fn = {"pair": case_pair, "throughput": case_throughput, "peer_loss": case_peer_loss,
                  "cm_peer_death": case_cm_peer_death,
                  "peer_kill": case_peer_kill, "cm_rping": case_cm_rping,
                  "last_byte": case_last_byte, "cm_nft": case_cm_nft,
                  "mpi_kill": case_mpi_kill, "rstream_kill": case_rstream_kill,
                  "forged": case_forged, "auth_rping": case_auth_rping,
                  "auth_refused": case_auth_refused}[kind]
            try:
                problems = fn(r, name, spec, port, a.timeout)
            except Skipped as e:
                print(f"SKIPPED {name}: {e}")
                skipped += 1
                continue
        left = proctree.kill_leftovers()
        if left:
            problems.append(f"left running after the case (killed): {', '.join(left)}")
        status = "PASS" if not problems else "FAIL"
        print(f"== {name}: {status} ({time.time() - t0:.1f}s)")
        for p in problems:
            print(f"   {p}")
        failed += bool(problems)
    if failed:
        return 1
    return SKIP if skipped else 0


if __name__ == "__main__":
    sys.exit(main())
