#!/bin/bash
# vrnic sim sweep under mpirun with 2 ranks: small scenarios x three schemes; each rank ran
# cells, rank 0 gathered every summary into sweep.csv, and every cell's summary equals that
# of a plain `vrnic sim run` of the same cell (same scenario, scheme, seed), wall time aside.
# vrnic itself does not link MPI. Usage: sim_sweep_test.sh PATH/TO/vrnic
set -euo pipefail
vrnic=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

if ldd "$vrnic" | grep -q libmpi; then fail "vrnic links MPI: $(ldd "$vrnic" | grep libmpi)"; fi

cat > "$dir/spec.json" <<'JSON'
{"scenarios": ["incast-pfc", "dcqcn-fairness"], "schemes": ["dcqcn", "dcqcn+w", "hpcc"],
 "seeds": [3]}
JSON
root=()
[ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
mpirun "${root[@]}" --oversubscribe -np 2 "$vrnic" sim sweep "$dir/spec.json" --out "$dir/out" \
  > "$dir/log" 2>&1 || { cat "$dir/log"; fail "mpirun exited $?"; }
cat "$dir/log"
grep -q "^sweep: 6 cells, 0 failed to run" "$dir/log" || fail "no closing line"
[ "$(wc -l < "$dir/out/sweep.csv")" = 7 ] || fail "sweep.csv: want a header and 6 rows"

for scenario in incast-pfc dcqcn-fairness; do
  for scheme in dcqcn dcqcn+w hpcc; do
    cell=$scenario-$scheme-seed3
    "$vrnic" sim run "$scenario" --scheme "$scheme" --seed 3 --out "$dir/single/$cell" \
      > /dev/null 2>&1 || fail "vrnic sim run $cell"
  done
done

python3 - "$dir" <<'PY'
import csv, json, sys
d = sys.argv[1]
rows = list(csv.DictReader(open(f"{d}/out/sweep.csv")))
ranks = {r["rank"] for r in rows}
assert ranks == {"0", "1"}, f"cells ran on ranks {ranks}, want both"
def strip(p):
    j = json.load(open(p))
    j.pop("wall_s"); j.pop("events_per_s")
    return j
for r in rows:
    a = strip(f"{d}/out/{r['name']}/summary.json")
    b = strip(f"{d}/single/{r['name']}/summary.json")
    assert a == b, f"{r['name']}: the sweep's summary differs from a single run's"
    assert r["scheme"] == a["scheme"] and int(r["events"]) == a["events"], r["name"]
    assert int(r["flows_failed"]) == 0, r["name"]
print(f"{len(rows)} cells on ranks {sorted(ranks)}: each summary equals its single run's")
PY
echo "1 passed, 0 failed"
