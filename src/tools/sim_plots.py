#!/usr/bin/env python3
"""vrnic sim plots: PNGs from the CSVs `vrnic sim run --out DIR` writes (docs/sim.md).

  fct_slowdown.png  each flow's FCT slowdown against its size, with the p50 and p95 of each
                    size bucket
  queues.png        the switch queues over time: the five ports that held the most
  rates.png         the long flows' delivered rates over time (if the run had long flows)

With --sweep DIR (vrnic sim sweep's rank 0): DIR/sweep.csv gives sweep-<scenario>.png per
scenario and load: each size bucket's p50, p95 and p99 slowdown per scheme (mean over seeds).

Usage: sim-plots.py DIR | --sweep DIR (share/vrnic/ in the build tree and installed). Exits 2
if matplotlib is not installed.
"""
import csv
import os
import sys
from collections import defaultdict

BUCKETS = [(0, 65536, "0-64KiB"), (65536, 1 << 20, "64KiB-1MiB"),
           (1 << 20, 10 << 20, "1MiB-10MiB"), (10 << 20, float("inf"), "10MiB+")]


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def percentile(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, max(0, int(-(-q * len(v) // 1)) - 1))] if v else None


def plot_fct(plt, d):
    flows = [r for r in rows(os.path.join(d, "fct.csv")) if r["slowdown"]]
    if not flows:
        return False
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.scatter([int(r["bytes"]) for r in flows], [float(r["slowdown"]) for r in flows],
               s=4, alpha=0.35, label="flows")
    for lo, hi, name in BUCKETS:
        v = [float(r["slowdown"]) for r in flows if lo <= int(r["bytes"]) < hi]
        if not v:
            continue
        x = [max(lo, 1), min(hi, 3e7)]
        ax.plot(x, [percentile(v, 0.5)] * 2, "k-", lw=2)
        ax.plot(x, [percentile(v, 0.95)] * 2, "r--", lw=2)
    ax.plot([], [], "k-", label="p50 per bucket")
    ax.plot([], [], "r--", label="p95 per bucket")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("flow size (bytes)")
    ax.set_ylabel("FCT slowdown")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(d, "fct_slowdown.png"), dpi=110)
    return True


def plot_series(plt, d, name, key, value, label, top=5):
    series = defaultdict(list)
    for r in rows(os.path.join(d, name)):
        series[r[key]].append((int(r["t_ns"]) / 1e6, float(r[value])))
    if not series:
        return False
    keep = sorted(series, key=lambda k: -max(v for _, v in series[k]))[:top]
    fig, ax = plt.subplots(figsize=(7, 4))
    for k in keep:
        ax.plot([t for t, _ in series[k]], [v for _, v in series[k]], lw=1,
                label=f"{key} {k}")
    ax.set_xlabel("simulated time (ms)")
    ax.set_ylabel(label)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(d, name.replace(".csv", ".png")), dpi=110)
    return True


def plot_sweep(plt, d):
    groups = defaultdict(lambda: defaultdict(list))  # (scenario, load) -> scheme -> rows
    for r in rows(os.path.join(d, "sweep.csv")):
        if r.get("events"):
            groups[(r["scenario"], r["load"])][r["scheme"]].append(r)
    made = []
    for (scenario, load), by_scheme in sorted(groups.items()):
        fig, axes = plt.subplots(1, 3, figsize=(12, 3.8), sharey=True)
        for ax, q in zip(axes, ("p50", "p95", "p99")):
            for scheme, rs in sorted(by_scheme.items()):
                xs, ys = [], []
                for i, (_, _, name) in enumerate(BUCKETS):
                    v = [float(r[f"{name}_{q}"]) for r in rs if r.get(f"{name}_{q}")]
                    if v:
                        xs.append(i)
                        ys.append(sum(v) / len(v))
                ax.plot(xs, ys, "o-", label=scheme)
            ax.set_xticks(range(len(BUCKETS)), [b[2] for b in BUCKETS], fontsize=8)
            ax.set_yscale("log")
            ax.set_title(q)
        axes[0].set_ylabel("FCT slowdown")
        axes[0].legend()
        title = scenario + (f", load {load}" if load else "")
        fig.suptitle(title)
        fig.tight_layout()
        name = "sweep-" + scenario + (f"-load{load}" if load else "") + ".png"
        fig.savefig(os.path.join(d, name), dpi=100)
        plt.close(fig)
        made.append(name)
    return made


def main():
    sweep = len(sys.argv) == 3 and sys.argv[1] == "--sweep"
    if len(sys.argv) != 2 and not sweep:
        print(__doc__, file=sys.stderr)
        return 1
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("vrnic sim: plots need python3-matplotlib (apt-get install python3-matplotlib)",
              file=sys.stderr)
        return 2
    if sweep:
        made = plot_sweep(plt, sys.argv[2])
        print("plots: " + (", ".join(made) if made else "none (no cell ran)"))
        return 0
    d = sys.argv[1]
    made = [n for n, ok in (("fct_slowdown.png", plot_fct(plt, d)),
                            ("queues.png", plot_series(plt, d, "queues.csv", "port", "bytes",
                                                       "queue (bytes)")),
                            ("rates.png", plot_series(plt, d, "rates.csv", "long_flow", "gbps",
                                                      "delivered (Gb/s)")))
            if ok]
    print("plots: " + (", ".join(made) if made else "none (no completed flow, queue or long flow)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
