"""Process trees of the live test harnesses: a program's descendants found through /proc
(fio's job processes start sessions of their own, out of reach of a process-group kill),
killed together, and the harness as the subreaper of every orphan it leaves."""
import ctypes
import os
import signal
import time

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper():
    """Orphans of the harness's programs are reparented to the harness, not to init, so
    kill_leftovers finds them after their parent has died."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _parents():
    """pid -> (parent pid, command name) of every process."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        table[int(entry)] = (int(stat[stat.rindex(")") + 2:].split()[1]), comm)
    return table


def descendants(pid):
    """Every process below `pid`, whatever its session or process group."""
    children = {}
    for child, (parent, _) in _parents().items():
        children.setdefault(parent, []).append(child)
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _kill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def kill_tree(pid):
    """SIGKILL to `pid`, its process group and every descendant (found before any dies)."""
    below = descendants(pid)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for p in [pid, *below]:
        _kill(p)


def _orphans():
    """The harness's children that no Popen waits for any more: orphans it inherited, and
    reaps once they have exited."""
    me = os.getpid()
    left = []
    for p, (parent, comm) in _parents().items():
        if parent != me:
            continue
        try:
            if os.waitpid(p, os.WNOHANG)[0]:
                continue  # had exited: reaped
        except ChildProcessError:
            continue
        left.append((p, comm))
    return left


def kill_leftovers(grace=2.0):
    """What the harness's programs left running once every program it started has been
    waited for: given `grace` seconds to exit by itself, then killed and reaped. Returns
    their descriptions ("pid comm"), empty when nothing was left."""
    deadline = time.time() + grace
    while (left := _orphans()) and time.time() < deadline:
        time.sleep(0.05)
    for p, _ in left:
        kill_tree(p)
    for p, _ in left:
        try:
            os.waitpid(p, 0)
        except ChildProcessError:
            pass
    return [f"{p} {comm}" for p, comm in left]
