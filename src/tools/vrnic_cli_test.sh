#!/usr/bin/env bash
# Tests of the `vrnic` command line: run's environment and exit status, devinfo, stats, sim,
# --version.
# usage: vrnic_cli_test.sh PATH/TO/vrnic VERSION
set -u
vrnic="$1"
version="$2"
fail=0
check() {  # name expected actual
  if [ "$2" != "$3" ]; then echo "FAIL $1: expected [$2] got [$3]"; fail=1; else echo "ok   $1"; fi
}
lib=$(mktemp -d)
trap 'rm -rf "$lib"' EXIT
touch "$lib/libibverbs.so.1"
export VRNIC_LIB_DIR="$lib"
unset VRNIC_IP VRNIC_PCAP VRNIC_STATS

out=$("$vrnic" run --ip 127.0.0.9 --stats --pcap /tmp/x.pcap -- sh -c 'echo "$VRNIC_IP|$VRNIC_STATS|$VRNIC_PCAP|${LD_LIBRARY_PATH%%:*}|$0|$1"; exit 3' -g --ip)
check "run: exit status is the program's" 3 $?
check "run: environment and arguments" "127.0.0.9|1|/tmp/x.pcap|$(realpath "$lib")|-g|--ip" "$out"

out=$("$vrnic" run --rx-queues 4 --faults loss=0.1 -- sh -c 'echo "$VRNIC_RX_QUEUES|$VRNIC_FAULTS"')
check "run: --rx-queues and --faults" "4|loss=0.1" "$out"

out=$("$vrnic" run sh -c 'echo "${VRNIC_IP:-none}|$0"' -x)
check "run: program without --, its options untouched" "none|-x" "$out"

out=$(LD_LIBRARY_PATH=/old "$vrnic" run -- sh -c 'echo "${LD_LIBRARY_PATH#*:}"')
check "run: LD_LIBRARY_PATH keeps what was there" "/old" "$out"

"$vrnic" run -- /nonexistent/program 2>/dev/null
check "run: missing program is 127" 127 $?

VRNIC_LIB_DIR=/nonexistent "$vrnic" run -- true 2>/dev/null
check "run: missing library is an error" 127 $?

"$vrnic" run 2>/dev/null
check "run: no program is a usage error" 2 $?

check "--version: the project's version" "vrnic $version" "$("$vrnic" --version)"

out=$("$vrnic" devinfo --ip 127.0.0.77 | grep '^GID')
check "devinfo: IPv4-mapped GID" "GID[0]:          0000:0000:0000:0000:0000:ffff:7f00:004d (RoCE v2)" "$out"

"$vrnic" devinfo --ip 300.1.1.1 >/dev/null 2>&1
check "devinfo: bad address fails" 1 $?

"$vrnic" stats 999999999 >/dev/null 2>&1
check "stats: no such program fails" 1 $?

out=$("$vrnic" sim list | cut -d' ' -f1 | tr '\n' ' ')
check "sim list: the built-in scenarios" "atomic-replay dcbx-mismatch dcqcn-fairness ets fat-tree-websearch-30 fat-tree-websearch-50 incast-nopfc incast-pfc pfc-deadlock " "$out"

simdir=$(mktemp -d)
"$vrnic" sim run incast-pfc --seed 5 --out "$simdir" --pcap 0,32 >/dev/null
check "sim run: exit status" 0 $?
out=$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["scenario"], s["seed"], s["flows_completed"], s["drops"], s["pfc_pause_frames"] > 0)' "$simdir/summary.json")
check "sim run: summary.json" "incast-pfc 5 32 0 True" "$out"
# fct.csv: a row per flow, each completed with a slowdown; queues.csv: the receiver's port
# held bytes at some sample.
out=$(python3 -c 'import csv,sys; f=list(csv.DictReader(open(sys.argv[1]))); q=list(csv.DictReader(open(sys.argv[2]))); print(len(f), all(float(r["slowdown"]) >= 1 for r in f), max(int(r["bytes"]) for r in q) > 0)' "$simdir/fct.csv" "$simdir/queues.csv")
check "sim run: fct.csv and queues.csv" "32 True True" "$out"
# pfc.csv: a row per switch port that paused its sender (32), together every PAUSE counted.
out=$(python3 -c 'import csv,json,sys; p=list(csv.DictReader(open(sys.argv[1]))); s=json.load(open(sys.argv[2])); print(len(p), {r["device"] for r in p}, sum(int(r["pause_frames"]) for r in p) == s["pfc_pause_frames"], {r["verb"] + "/" + r["transport"] for r in csv.DictReader(open(sys.argv[3]))})' "$simdir/pfc.csv" "$simdir/summary.json" "$simdir/fct.csv")
check "sim run: pfc.csv, and fct.csv's verbs" "32 {'switch'} True {'write/rc'}" "$out"
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  out=$(ls "$simdir" | grep -c '\.png$')
  check "sim run: plots" 2 "$out"
fi
# The captures: the receiver's every RoCEv2 frame with a correct ICRC (the live captures'
# checker), the first sender's PAUSE frames as Wireshark decodes them.
out=$(ls "$simdir" | grep '\.pcap$' | tr '\n' ' ')
check "sim run --pcap: one file per host asked for" "host-0.pcap host-32.pcap " "$out"
out=$("$(dirname "$vrnic")/vrnic_pcap_check" "$simdir/host-32.pcap" | head -1)
check "sim run --pcap: the receiver's frames" "frames 8352, bad 0" "$out"
if command -v tshark >/dev/null; then
  out=$(tshark -r "$simdir/host-0.pcap" 2>/dev/null | grep -c 'Class Based Flow Control')
  [ "$out" -gt 0 ] && out=yes
  check "sim run --pcap: PFC frames decoded by tshark" yes "$out"
fi
"$vrnic" sim run incast-pfc --pcap 0 >/dev/null 2>&1
check "sim run --pcap without --out: refused" 107 $?
rm -rf "$simdir"

"$vrnic" sim run /nonexistent.json 2>/dev/null
check "sim run: missing scenario fails" 1 $?

exit $fail
