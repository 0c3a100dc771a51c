#!/usr/bin/env python3
"""vrnic sim compare: FCT slowdowns of fat-tree runs beside published reference values.

Reads each RUN directory's summary.json (scenario, scheme; a scenario named on after its load,
as fat-tree-websearch-30-hpccsim, is a series of its own) and fct.csv (`vrnic sim run
--out`, or a sweep with "outputs": true), bins the completed flows around the reference's
flow sizes (bin edges at the geometric means of neighbouring sizes), and writes into OUT:
compare.md (a table per load: p50 / p95 / p99 per size, each scheme beside the reference's
columns) and compare-<load>-<percentile>.png (slowdown against flow size per scheme, the
reference points overlaid). The load of a run is its traffic's, from the scenario name's
number after a dash (fat-tree-websearch-30, fat-tree-websearch-30-hpccsim: 0.3) unless the directory name says load<L>.

Usage: sim-compare.py REFERENCE.csv OUT RUN... (REFERENCE.csv: load, percentile,
size_bytes, then one column per reference series). Exits 2 without matplotlib.
"""
import csv
import json
import math
import os
import re
import sys
from collections import defaultdict

QS = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))
COLOURS = {"dcqcn": "C0", "dcqcn+w": "C1", "hpcc": "C2"}
# A reference series drawn in the colour of the scheme it stands beside.
REF_SCHEME = {"dcqcn_w": "dcqcn+w", "hpcc_pint": "hpcc"}


def percentile(v, q):  # nearest rank, as the simulator's summary
    v = sorted(v)
    return v[min(len(v) - 1, max(0, math.ceil(q * len(v)) - 1))] if v else None


def run_load(run_dir, summary):
    m = re.search(r"load([0-9.]+)", os.path.basename(run_dir.rstrip("/")))
    if m:
        return float(m.group(1))
    m = re.search(r"-(\d+)(?=-|$)", summary["scenario"])
    return int(m.group(1)) / 100 if m else None


def bins_of(sizes):
    edges = [0] + [math.sqrt(a * b) for a, b in zip(sizes, sizes[1:])] + [float("inf")]
    return list(zip(sizes, edges, edges[1:]))


def measure(run_dir, bins):
    out = {}
    with open(os.path.join(run_dir, "fct.csv"), newline="") as f:
        flows = [(int(r["bytes"]), float(r["slowdown"])) for r in csv.DictReader(f) if r["slowdown"]]
    for size, lo, hi in bins:
        v = [s for b, s in flows if lo <= b < hi]
        out[size] = {q: percentile(v, x) for q, x in QS}
        out[size]["n"] = len(v)
    return out


def fmt_size(b):
    return f"{b / 1e6:g} MB" if b >= 1e6 else f"{b / 1e3:g} KB"


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 1
    ref_path, out = sys.argv[1], sys.argv[2]
    with open(ref_path, newline="") as f:
        ref_rows = list(csv.DictReader(f))
    series = [k for k in ref_rows[0] if k not in ("load", "percentile", "size_bytes")]
    ref = defaultdict(dict)  # (load, q) -> size -> {series: value}
    for r in ref_rows:
        ref[(float(r["load"]), r["percentile"])][int(r["size_bytes"])] = {s: float(r[s]) for s in series}
    sizes = sorted({int(r["size_bytes"]) for r in ref_rows})
    bins = bins_of(sizes)
    runs = defaultdict(dict)  # load -> scheme -> measured
    for d in sys.argv[3:]:
        path = os.path.join(d, "summary.json")
        if os.path.exists(path):
            with open(path) as f:
                s = json.load(f)
        else:  # a sweep cell still running elsewhere: its name says what it is
            m = re.match(r"(.*?)-(dcqcn\+w|dcqcn|hpcc)(-seed\d+)?$", os.path.basename(d.rstrip("/")))
            s = {"scenario": m.group(1), "scheme": m.group(2)}
        # A variant of the scenario (a name going on after the load) is a series of its own.
        m = re.search(r"-\d+-(.+)$", s["scenario"])
        label = s.get("scheme", "dcqcn") + (f" ({m.group(1)})" if m else "")
        runs[run_load(d, s)][label] = measure(d, bins)
    os.makedirs(out, exist_ok=True)
    lines = []
    for load in sorted(runs):
        schemes = sorted(runs[load])
        lines.append(f"\n**{load:.0%} load** (flows per size bin: "
                     + ", ".join(f"{fmt_size(s)} {runs[load][schemes[0]][s]['n']}" for s in sizes) + ")\n")
        lines.append("| percentile | size | " + " | ".join(schemes) + " | " + " | ".join(f"ref. {s}" for s in series) + " |")
        lines.append("|---" * (2 + len(schemes) + len(series)) + "|")
        for q, _ in QS:
            for size in sizes:
                got = [runs[load][sc][size][q] for sc in schemes]
                want = ref.get((load, q), {}).get(size, {})
                lines.append(f"| {q} | {fmt_size(size)} | "
                             + " | ".join(f"{g:.2f}" if g is not None else "-" for g in got) + " | "
                             + " | ".join(f"{want[s]:.2f}" if s in want else "-" for s in series) + " |")
    with open(os.path.join(out, "compare.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no plots: python3-matplotlib is not installed", file=sys.stderr)
        return 2
    for load in sorted(runs):
        for q, _ in QS:
            fig, ax = plt.subplots(figsize=(6.5, 4))
            others = 3  # a series of its own (a variant's scenario) takes C3, C4, ...
            for sc in sorted(runs[load]):
                ys = [runs[load][sc][s][q] for s in sizes]
                colour = COLOURS.get(sc)
                if colour is None:
                    colour, others = f"C{others}", others + 1
                ax.plot(sizes, ys, "o-", color=colour, label=f"vrnic {sc}")
            for k, s in enumerate(series):
                pts = ref.get((load, q), {})
                ax.plot([x for x in sizes if x in pts], [pts[x][s] for x in sizes if x in pts],
                        "s--" if k == 0 else "^--", mfc="none", ms=8,
                        color=COLOURS.get(REF_SCHEME.get(s, ""), "k"), label=f"reference {s}")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("flow size (bytes)")
            ax.set_ylabel(f"FCT slowdown, {q}")
            ax.set_title(f"WebSearch, {load:.0%} load, {q}")
            ax.legend(fontsize=8)
            fig.tight_layout()
            fig.savefig(os.path.join(out, f"compare-{int(load * 100)}-{q}.png"), dpi=100)
            plt.close(fig)
    return 0


if __name__ == "__main__":
    sys.exit(main())
