#!/usr/bin/python3
"""Soak: a mixed load on vrnic for N minutes, every byte and atomic result checked, every
process's resident memory, open descriptors and threads sampled every 5 s.

  bench/soak.py --minutes N [--bin build/release/bin] [--json FILE]

The load, each a loop of unmodified programs through `vrnic run`, each loop on addresses of
its own (127.0.3.x):
  rc      vrnic_integrity: one server for the whole run (a session per client: QPs and
          regions made and freed each time), clients in turn in data mode (WRITE,
          WRITE_WITH_IMM, SEND, READ of 1 B .. 16 MiB, every byte compared) and atomic mode
          (two clients x 2 threads x 500 Fetch-and-Add on one counter: the server checks the
          exact sum and that every original value came back once, when it is stopped)
  ud      udaddy, 4 UD connections each round
  cm      rping with a persistent server (-P, a connection per client) and clients of 20
          verified pings each; and ucmatose rounds of 4 RC connections: the RDMA CM's
          connect / disconnect over and over
  rsocket rstream -T v (64 KiB x 2000, every byte verified), a connection per round
  mpi     `mpirun -np 4 vrnic run -- mpi_check --seconds 60`, rank r on 127.0.3.(40 + r) (Open MPI, UCX on vrnic's
          verbs: ring, allreduce, alltoall, put/get, every value checked)

Fails (exit 1) on any round that does not end as it must, on growth over ten minutes or more
(the mean of a long-lived process's samples in the ten minutes after its first minute
against its last ten: RSS by more than 10 % + 8 MiB, descriptors or threads by more than
0.6; for programs that come and go, the mean of their samples in the first ten minutes of
the run against the last ten: RSS as above, descriptors by 2, threads by 1), or on counters
files left by exited programs. Samples every 5 s (--sample), prints a table
per minute (--interval) and a summary; --json writes the samples.
"""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

BASE = "127.0.3."


class Soak:
    def __init__(self, bindir, minutes):
        self.bin = bindir
        self.vrnic = os.path.join(bindir, "vrnic")
        self.end = time.time() + minutes * 60
        self.lock = threading.Lock()
        self.rounds = {}    # loop -> [ok, failed]
        self.failures = []  # (loop, what)
        self.env = dict(os.environ)
        for k in ("VRNIC_IP", "VRNIC_FAULTS", "VRNIC_AUTH", "VRNIC_DIRECT"):
            self.env.pop(k, None)
        self.stop = threading.Event()

    def run(self, ip, argv):
        """A `vrnic run` command line on `ip` (argv's @name: a program of --bin)."""
        prog = [os.path.join(self.bin, a[1:]) if a.startswith("@") else a for a in argv]
        return [self.vrnic, "run", "--ip", ip, "--", *prog]

    def result(self, loop, ok, what=""):
        with self.lock:
            r = self.rounds.setdefault(loop, [0, 0])
            r[0 if ok else 1] += 1
            if not ok:
                self.failures.append((loop, what))
                print(f"[{loop}] FAILED: {what}", flush=True)

    def pair(self, loop, server, client, want, timeout=300, server_want=()):
        """One round: a server and a client; both must exit 0 and print what is wanted."""
        s = subprocess.Popen(server, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env=self.env)
        time.sleep(1)
        try:
            c = subprocess.run(client, capture_output=True, text=True, timeout=timeout,
                               env=self.env)
            sout, _ = s.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            s.kill()
            s.communicate()
            return self.result(loop, False, f"timed out: {' '.join(client[-6:])}")
        out = c.stdout + c.stderr
        missing = [w for w in want if not re.search(w, out)]
        missing += [f"server: {w}" for w in server_want if not re.search(w, sout)]
        ok = c.returncode == 0 and s.returncode == 0 and not missing
        self.result(loop, ok, f"client {c.returncode}, server {s.returncode}, missing {missing}: "
                              f"{out[-400:]} | server: {sout[-300:]}")

    # --- the loops ----------------------------------------------------------------------
    def loop_rc(self):
        ip_s, ip_c = BASE + "1", BASE + "2"
        server = subprocess.Popen(self.run(ip_s, ["@vrnic_integrity", "server", "18950", "0", "0"]),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  env=self.env)
        time.sleep(1)
        n = 0
        while time.time() < self.end and not self.stop.is_set():
            n += 1
            if n % 2:
                c = subprocess.run(self.run(ip_c, ["@vrnic_integrity", "client", ip_s, "18950",
                                                   "data"]), capture_output=True, text=True,
                                   env=self.env, timeout=600)
                self.result("rc", c.returncode == 0 and "client data: PASS" in c.stdout,
                            f"data: {c.stdout[-300:]}{c.stderr[-300:]}")
            else:  # two processes' Fetch-and-Add on the one counter at once
                cs = [subprocess.Popen(self.run(BASE + str(2 + k),
                                                ["@vrnic_integrity", "client", ip_s, "18950",
                                                 "atomic", "2", "500"]),
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       text=True, env=self.env) for k in (1, 2)]
                for c in cs:
                    out, _ = c.communicate(timeout=600)
                    self.result("rc", c.returncode == 0 and "client atomic: PASS" in out,
                                f"atomic: {out[-400:]}")
        subprocess.run([os.path.join(self.bin, "vrnic_integrity"), "client", ip_s, "18950", "stop"])
        out, _ = server.communicate(timeout=120)
        self.result("rc", server.returncode == 0 and "server: PASS" in out,
                    f"server at the end: {out[-600:]}")
        print("[rc] " + " ".join(l for l in out.splitlines() if "atomic sessions" in l
                                 or "sessions" in l)[:300], flush=True)

    def loop_cm(self):
        ip_s, ip_c = BASE + "5", BASE + "6"
        # The server's buffers as large as the clients' (-S): rping reads what the client
        # advertises into its own buffer, and a larger read is a local protection error.
        server = subprocess.Popen(self.run(ip_s, ["rping", "-s", "-P", "-a", ip_s, "-p", "19950",
                                                  "-S", "1024"]),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                                  env=self.env, start_new_session=True)
        time.sleep(1)
        n = 0
        while time.time() < self.end and not self.stop.is_set():
            n += 1
            c = subprocess.run(self.run(ip_c, ["rping", "-c", "-a", ip_s, "-p", "19950", "-C",
                                               "20", "-V", "-v", "-S", "1024"]),
                               capture_output=True, text=True, env=self.env, timeout=120)
            self.result("cm", c.returncode == 0 and "ping data: rdma-ping-19: " in c.stdout,
                        f"rping: {c.returncode} {c.stdout[-200:]}{c.stderr[-300:]}")
            if n % 3 == 0:
                self.pair("cm", self.run(BASE + "7", ["ucmatose", "-b", BASE + "7", "-c", "4",
                                                      "-p", "19951"]),
                          self.run(BASE + "8", ["ucmatose", "-s", BASE + "7", "-c", "4",
                                                "-p", "19951"]),
                          [r"data transfers complete", r"return status 0"], timeout=120)
        server.send_signal(signal.SIGTERM)
        server.wait()

    def loop_ud(self):
        while time.time() < self.end and not self.stop.is_set():
            # udaddy's -p is the port space, not a port: it listens on its fixed port.
            self.pair("ud", self.run(BASE + "9", ["udaddy", "-b", BASE + "9", "-c", "4"]),
                      self.run(BASE + "10", ["udaddy", "-s", BASE + "9", "-c", "4"]),
                      [r"data transfers complete", r"return status 0"], timeout=120)
            time.sleep(2)

    def loop_rsocket(self):
        opts = ["-T", "v", "-S", "65536", "-C", "2000", "-p", "19953"]
        row = r"(?m)^custom\s+64k\s+2k\s"
        while time.time() < self.end and not self.stop.is_set():
            self.pair("rsocket", self.run(BASE + "11", ["rstream", "-b", BASE + "11", *opts]),
                      self.run(BASE + "12", ["rstream", "-s", BASE + "11", *opts]),
                      [row], timeout=300, server_want=[row])

    def loop_mpi(self):
        root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
        while time.time() + 30 < self.end and not self.stop.is_set():
            secs = max(10, min(60, int(self.end - time.time()) - 20))
            # Each rank on an address of its own, as the other loops (127.0.3.40 + rank):
            # with no --ip, `vrnic run` takes the first free 127.0.0.x, which other programs
            # on the host expect to find free.
            rank_ip = f'exec "$0" run --ip {BASE}$((40 + OMPI_COMM_WORLD_RANK)) -- "$@"'
            argv = ["mpirun", *root, "-np", "4", "--oversubscribe", "--mca", "pml", "ucx",
                    "--mca", "osc", "ucx", "--mca", "btl", "self",
                    "-x", "UCX_TLS=rc_verbs,ud_verbs,self", "sh", "-c", rank_ip, self.vrnic,
                    os.path.join(self.bin, "mpi_check"), "--seconds", str(secs)]
            try:
                c = subprocess.run(argv, capture_output=True, text=True, env=self.env,
                                   timeout=secs + 240)
                out = c.stdout + c.stderr
                ok = c.returncode == 0 and re.search(r"4 ranks, 0 failures", out)
            except subprocess.TimeoutExpired as e:
                out, ok = str(e), False
            self.result("mpi", bool(ok), f"mpirun: {out[-600:]}")


# --- sampling ---------------------------------------------------------------------------------

def proc_table(root):
    """Every process below `root`: pid -> (name, start ticks, rss KiB, fds, threads)."""
    parent, info = {}, {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = open(f"/proc/{d}/stat").read()
            status = open(f"/proc/{d}/status").read()
        except OSError:
            continue
        rest = stat[stat.rindex(")") + 2:].split()
        parent[int(d)] = int(rest[1])
        rss = re.search(r"VmRSS:\s+(\d+)", status)
        thr = re.search(r"Threads:\s+(\d+)", status)
        info[int(d)] = (stat[stat.index("(") + 1:stat.rindex(")")], int(rest[19]),
                        int(rss.group(1)) if rss else 0, int(thr.group(1)) if thr else 0)
    out = {}
    for pid, (name, start, rss, threads) in info.items():
        p = parent.get(pid, 0)
        while p > 1 and p != root:
            p = parent.get(p, 0)
        if p != root or rss == 0 or name in ("python3", "soak.py"):
            continue
        try:
            fds = len(os.listdir(f"/proc/{pid}/fd"))
        except OSError:
            continue
        out[pid] = (name, start, rss, fds, threads)
    return out


def sampler(soak, samples, interval, every):
    """A sample of every process each `every` seconds, a table of it each `interval`."""
    t0 = time.time()
    next_at, print_at = t0 + min(every, 20), t0 + min(interval, 20)
    while not soak.stop.wait(max(0.0, next_at - time.time())):
        rows = proc_table(os.getpid())
        samples.append({"t": round(time.time() - t0), "procs": {
            str(pid): {"name": n, "start": s, "rss_kb": r, "fds": f, "threads": th}
            for pid, (n, s, r, f, th) in rows.items()}})
        if time.time() >= print_at:
            print_minute(samples[-1], soak)
            print_at += interval
        next_at += every
        if time.time() >= soak.end:
            return


def print_minute(sample, soak):
    kinds = {}
    for p in sample["procs"].values():
        k = kinds.setdefault(p["name"], [0, 0, 0, 0])
        k[0] += 1
        k[1] = max(k[1], p["rss_kb"])
        k[2] = max(k[2], p["fds"])
        k[3] = max(k[3], p["threads"])
    with soak.lock:
        rounds = " ".join(f"{k}={v[0]}/{v[0] + v[1]}" for k, v in sorted(soak.rounds.items()))
    print(f"\n--- t={sample['t']:>5} s  rounds ok/all: {rounds}")
    print(f"    {'program':<18}{'procs':>6}{'max RSS MiB':>13}{'max fds':>9}{'max threads':>13}")
    for name, (n, rss, fds, thr) in sorted(kinds.items()):
        print(f"    {name:<18}{n:>6}{rss / 1024:>13.1f}{fds:>9}{thr:>13}")
    sys.stdout.flush()


# Growth is judged between windows of samples this long, at the start and at the end of a
# run at least twice as long: a count taken while sessions come and go (a server's
# per-session descriptors and threads) is noise, their mean over a window is not. A shorter
# run (CI's three minutes) prints the table, checks every round and the litter, and judges
# no growth.
GROWTH_SPAN_S = 600
KEYS = ("rss_kb", "fds", "threads")


def means(ps):
    return {k: round(statistics.fmean(p[k] for p in ps), 2) for k in KEYS}


def grew(a, b, fds, threads):
    """Growth from window means a to b: RSS by 10 % + 8 MiB, descriptors or threads by more
    than the given slack."""
    return b["rss_kb"] > a["rss_kb"] * 1.10 + 8192 or b["fds"] > a["fds"] + fds \
        or b["threads"] > a["threads"] + threads


def growth(samples):
    """Processes and programs whose memory, descriptors or threads grew; and a summary."""
    problems, table = [], []
    series = {}
    for s in samples:
        for pid, p in s["procs"].items():
            series.setdefault((pid, p["start"]), []).append((s["t"], p))
    # Long-lived processes: their samples in the GROWTH_SPAN_S after their first minute
    # against those in their last GROWTH_SPAN_S, means. A server's counts move with its
    # sessions (the integrity server 24-29 descriptors and 2-6 threads over an hour, its
    # means 26.26 and 26.27 in the first and last ten minutes, 26.13-26.43 in any ten), so
    # single samples compare phases; a descriptor or thread kept from some point on moves a
    # window's mean by 1, past the 0.6 allowed.
    for (pid, _), pts in series.items():
        t0, t1 = pts[0][0] + 60, pts[-1][0]
        first = [p for t, p in pts if t0 <= t < t0 + GROWTH_SPAN_S]
        last = [p for t, p in pts if t > t1 - GROWTH_SPAN_S]
        if not first or t1 - t0 < 60:
            continue
        a, b = means(first), means(last)
        table.append((f"{pts[0][1]['name']} (pid {pid}, mean)", t0, t1, a, b))
        if t1 - t0 >= 2 * GROWTH_SPAN_S and grew(a, b, 0.6, 0.6):
            problems.append(f"{pts[0][1]['name']} pid {pid}: mean of {len(first)} / "
                            f"{len(last)} samples {a} -> {b}")
    # Programs that come and go: their samples in the first GROWTH_SPAN_S of the run against
    # those in the last, means. A sample catches each short-lived process at some point of
    # its life (connecting, moving data, closing: an rping client has 4 or 5 threads, a data
    # client 8 to 48 MiB), so one window's counts are a mix of phases; over a window's ~120
    # samples (one each 5 s) its mean is steady, where a median of such a mix can jump from
    # one phase's value to another's (a run sampled once a minute had the integrity clients'
    # median at 27.3 MiB in its first ten minutes and 40.8 in its last, their range 8-48 in
    # both). What grows from process to process (state that outlives them) moves the mean.
    # The long-lived ones (sampled over a minute or more, judged above) are left out: their
    # first sample, before their first client, would stand for the whole first window.
    long_lived = {k for k, pts in series.items() if pts[-1][0] - pts[0][0] >= 60}
    by_name = {}
    for s in samples:
        for pid, p in s["procs"].items():
            if (pid, p["start"]) not in long_lived:
                by_name.setdefault(p["name"], []).append((s["t"], p))
    end = max((s["t"] for s in samples), default=0)
    for name, pts in by_name.items():
        first = [p for t, p in pts if t < pts[0][0] + GROWTH_SPAN_S]
        last = [p for t, p in pts if t > end - GROWTH_SPAN_S]
        if not first or not last:
            continue
        a, b = means(first), means(last)
        table.append((f"{name} (all, mean)", pts[0][0], pts[-1][0], a, b))
        if end - pts[0][0] >= 2 * GROWTH_SPAN_S and grew(a, b, 2, 1):
            problems.append(f"{name}: mean of {len(first)} / {len(last)} samples {a} -> {b}")
    return problems, table


def stale_counters_files(before=()):
    """Counters files in /dev/shm, not there at the start, whose program has exited (a
    device opening removes them)."""
    stale = []
    for f in os.listdir("/dev/shm"):
        m = re.match(r"vrnic\.(\d+)\.", f)
        if m and f not in before and not os.path.exists(f"/proc/{m.group(1)}"):
            stale.append(f)
    return stale


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--bin", default=os.path.join(here, "../build/release/bin"))
    ap.add_argument("--minutes", type=float, default=3)
    ap.add_argument("--interval", type=float, default=60, help="seconds between tables")
    ap.add_argument("--sample", type=float, default=5, help="seconds between samples")
    ap.add_argument("--json", help="write the samples and results here")
    a = ap.parse_args()
    soak = Soak(os.path.abspath(a.bin), a.minutes)
    before = set(os.listdir("/dev/shm"))
    signal.signal(signal.SIGTERM, lambda *_: soak.stop.set())
    samples = []
    t0 = time.time()
    loops = [threading.Thread(target=getattr(soak, f"loop_{n}"), name=n, daemon=True)
             for n in ("rc", "cm", "ud", "rsocket", "mpi")]
    for t in loops:
        t.start()
    sampler(soak, samples, a.interval, a.sample)
    for t in loops:
        t.join(timeout=600)
    soak.stop.set()
    elapsed = time.time() - t0
    # A device opening removes what exited programs left (the rping server was stopped).
    subprocess.run([soak.vrnic, "run", "--", "ibv_devinfo"], capture_output=True, env=soak.env)
    problems, table = growth(samples)
    stale = stale_counters_files(before)
    print(f"\n=== soak: {elapsed / 60:.1f} min, load average {os.getloadavg()}")
    print(f"{'process':<34}{'from s':>7}{'to s':>7}{'RSS MiB':>16}{'fds':>10}{'threads':>10}")
    for name, t0_, t1, x, y in table:
        print(f"{name:<34}{t0_:>7}{t1:>7}{x['rss_kb'] / 1024:>7.1f} ->{y['rss_kb'] / 1024:>6.1f}"
              f"{x['fds']:>6.1f} ->{y['fds']:>5.1f}{x['threads']:>5.1f} ->{y['threads']:>4.1f}")
    for loop, (ok, bad) in sorted(soak.rounds.items()):
        print(f"rounds {loop:<8} {ok:>5} passed {bad:>3} failed")
    print(f"counters files of exited programs left in /dev/shm: {len(stale)}")
    bad = [f"{l}: {w[:300]}" for l, w in soak.failures] + problems
    bad += [f"stale counters files: {stale[:5]}"] if stale else []
    if any(v[0] == 0 for v in soak.rounds.values()) or len(soak.rounds) < 5:
        bad.append(f"a loop never completed a round: {soak.rounds}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"minutes": elapsed / 60, "rounds": soak.rounds, "problems": bad,
                       "samples": samples}, f)
    print("soak: " + ("PASS" if not bad else "FAIL\n  " + "\n  ".join(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
