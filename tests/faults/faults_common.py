"""What faults.py and its case modules share: reading a process's log and the counters it
printed at exit (`vrnic run --stats`)."""
import os
import re
import subprocess

COUNTER_LINE = re.compile(r"^([a-z_0-9]+) (\d+)$", re.M)
STATS_HEAD = re.compile(r"vrnic: \S+ \S+ \(.*pid \d+\) counters:")


def read_log(path):
    """A process's stdout followed by its stderr."""
    err = path + ".err"
    return open(path).read() + (open(err).read() if os.path.exists(err) else "")


def counters(out):
    """Sums of the counters a process printed at exit (`--stats`), by name."""
    total = {}
    for block in STATS_HEAD.split(out)[1:]:
        for name, value in COUNTER_LINE.findall(block):
            total[name] = total.get(name, 0) + int(value)
    return total


def live_counters(vrnic, pid):
    """The counters of a running vrnic program (`vrnic stats PID`), by name."""
    out = subprocess.run([vrnic, "stats", str(pid)], capture_output=True,
                         text=True).stdout
    return {k: int(v) for k, v in COUNTER_LINE.findall(out)}
