"""Fault cases of a peer killed higher up the stack, run by faults.py: one rank of a 4-rank
Open MPI job over UCX on vrnic, and one end of an rsockets stream (Debian's rstream). The
survivors must notice and end instead of hanging."""
import os
import signal
import subprocess
import sys
import time

from faults_common import counters, read_log

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "interop"))
from middleware_cases import mpi_job  # noqa: E402


def descendants(root, comm):
    """Pids of the processes below `root` whose name is `comm`."""
    parent = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = open(f"/proc/{d}/stat").read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        parent[int(d)] = (int(stat[stat.rindex(")") + 2:].split()[1]), name)
    found = []
    for pid, (ppid, name) in parent.items():
        p = ppid
        while p > 1 and p != root:
            p = parent.get(p, (0, ""))[0]
        if p == root and name == comm:
            found.append(pid)
    return sorted(found)


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie has exited; only its parent has not reaped it yet.
    try:
        return open(f"/proc/{pid}/stat").read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def case_mpi_kill(r, name, spec, port, timeout):
    """`mpirun -np 4 vrnic run -- mpi_check --seconds 300` (UCX on vrnic's verbs); once every
    rank has run 5 s, SIGKILL one: mpirun must end non-zero within 60 s and take every other
    rank with it."""
    job = mpi_job(4, "--seconds", "300")["plain"]
    argv = [os.path.join(r.bindir, a[1:]) if a.startswith("@") else a for a in job]
    path = os.path.join(r.tmp, name + ".log")
    mpirun = subprocess.Popen(argv, stdout=open(path, "w"), stderr=subprocess.STDOUT,
                              env=r.env, start_new_session=True)
    problems, ranks = [], []
    deadline = time.time() + 60
    while len(ranks) < 4 and time.time() < deadline and mpirun.poll() is None:
        time.sleep(0.5)
        ranks = descendants(mpirun.pid, "mpi_check")
    if len(ranks) < 4:
        os.killpg(mpirun.pid, signal.SIGKILL)
        mpirun.wait()
        print(read_log(path))
        return [f"{len(ranks)} ranks started, want 4"]
    time.sleep(5)  # into the checked rounds
    victim = ranks[2]
    os.kill(victim, signal.SIGKILL)
    killed = time.time()
    print(f"ranks {ranks}: SIGKILL to {victim}")
    try:
        rc = mpirun.wait(timeout=60)
        print(f"mpirun exited with {rc}, {time.time() - killed:.1f} s after the kill")
        if rc == 0:
            problems.append("mpirun: exit 0 with a rank killed")
    except subprocess.TimeoutExpired:
        problems.append("mpirun: still running 60 s after a rank was killed")
        os.killpg(mpirun.pid, signal.SIGKILL)
        mpirun.wait()
    time.sleep(2)
    left = [p for p in ranks if p != victim and alive(p)]
    if left:
        problems.append(f"ranks still running after mpirun ended: {left}")
        for p in left:
            os.kill(p, signal.SIGKILL)
    out = read_log(path)
    print("\n".join(out.splitlines()[-25:]))
    return problems


def case_rstream_kill(r, name, spec, port, timeout):
    """rstream (rsockets through vrnic's librdmacm) moving 64 KiB messages; after 2 s one end
    is SIGKILLed: the other must learn of it and end, non-zero, within 30 s. What tells it is
    the DREQ the killed process's CM guard sends (vrnic-guard, docs/live.md "A killed
    process's connections"), as a dead process's kernel CM would: the survivor's CM counts it
    (cm_rx_dreq), its rsocket reports the hang-up (rsend fails, rpoll POLLHUP). `-T a`: rstream
    polls before each call and ends on POLLHUP; in its default mode it retries a 0 from rrecv
    (end of stream) forever while errno holds an earlier EAGAIN, on any rsockets device."""
    argv = ["rstream", "-T", "a", "-S", "65536", "-C", "10000000", "-p", str(port)]
    server = r.start(f"{name}.server", argv + ["-b", "127.0.0.1"], ip="127.0.0.1")
    time.sleep(1)
    client = r.start(f"{name}.client", argv + ["-s", "127.0.0.1"], ip="127.0.0.2")
    time.sleep(2)
    victim, survivor = (server, client) if spec["kill"] == "server" else (client, server)
    problems = []
    if victim[1].poll() is not None or survivor[1].poll() is not None:
        problems.append("a side ended before the kill")
    victim[1].send_signal(signal.SIGKILL)  # `vrnic run` execs rstream: this is rstream
    victim[1].wait()
    killed = time.time()
    # The guard sends from an ephemeral port: the killed program's address is free at once
    # for the next program (a restarted server).
    victim_ip = "127.0.0.1" if spec["kill"] == "server" else "127.0.0.2"
    again = subprocess.run([r.vrnic, "run", "--ip", victim_ip, "--", "ibv_devinfo"],
                           capture_output=True, text=True, timeout=30)
    if again.returncode != 0:
        problems.append(f"a new program on {victim_ip} right after the kill: exit "
                        f"{again.returncode}: {again.stderr.strip()}")
    try:
        rc = survivor[1].wait(timeout=30)
        print(f"{survivor[0]} exited with {rc}, {time.time() - killed:.1f} s after the kill")
        if rc == 0:
            problems.append(f"{survivor[0]}: exit 0 although its peer was killed mid-stream")
    except subprocess.TimeoutExpired:
        problems.append(f"{survivor[0]}: still running 30 s after its peer was killed")
        survivor[1].kill()
        survivor[1].wait()
    dreqs = counters(read_log(survivor[2])).get("cm_rx_dreq", 0)
    print(f"{survivor[0]}: cm_rx_dreq {dreqs}")
    if dreqs == 0:
        problems.append(f"{survivor[0]}: no DREQ came for the killed process's connection")
    out = read_log(survivor[2])
    print(f"----- {survivor[0]} -----\n{out.rstrip()}")
    return problems
