#!/usr/bin/env bash
# Extra CI: ASan+UBSan unit tests, a TSan build of the live/abi/engine/cm unit tests, and the
# four libFuzzer harnesses (60 s each, seeded from the wire vectors). Exit non-zero on failure.
#   scripts/ci_extra.sh [asan] [tsan] [fuzz]      (default: all three)
# Env: JOBS (default 2), FUZZ_SECONDS (default 60), VECTORS_DIR (default ../shared/vectors), TSAN_STRICT=1 to fail on TSan reports
# (by default they are printed and counted but do not fail the run).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
JOBS=${JOBS:-2}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
TSAN_STRICT=${TSAN_STRICT:-0}
export VECTORS_DIR=${VECTORS_DIR:-$ROOT/../shared/vectors}   # as src/wire/CMakeLists.txt
STEPS=("$@")
[ ${#STEPS[@]} -eq 0 ] && STEPS=(asan tsan fuzz)
declare -A RESULT
FAILED=0
T_ALL=$(date +%s)

header() { printf '\n==================== %s ====================\n' "$*"; }
result() {  # step status seconds
  RESULT[$1]="$2 ($3 s)"
  printf -- '---- %s: %s (%s s)\n' "$1" "$2" "$3"
  [ "$2" = FAIL ] && FAILED=1
  return 0
}

step_asan() {
  header "ASan+UBSan: configure, build, ctest --preset asan -LE 'interop|faults|veth|soak|sweep|long|package'"
  local t=$(date +%s)
  # interop, faults, veth and soak run Debian's programs between processes: the release build's job;
  # sweep and long (the 320-host simulations) take minutes even uninstrumented; package
  # builds and installs the release package.
  # abi.symbols_load, abi.devinfo and vrnic.sysfs_view(_user) run Debian's uninstrumented
  # ibv_devices / ibv_devinfo
  # on the instrumented libibverbs.so.1: the ASan runtime must then be preloaded (ASan
  # refuses to start otherwise); leaks of those foreign programs are not ours to judge.
  # vrnic.sim_sweep_2ranks runs under Debian's mpirun and links Open MPI, whose own
  # allocations outlive MPI_Finalize: its errors are checked, its leaks not.
  local preload foreign='^(abi\.(symbols_load|devinfo)|vrnic\.(sysfs_view(_user)?|sim_sweep_2ranks))$'
  preload=$(${CXX:-c++} -print-file-name=libasan.so)
  if cmake --preset asan -G Ninja >/dev/null &&
     cmake --build --preset asan -j "$JOBS" &&
     ctest --preset asan -j "$JOBS" -LE 'interop|faults|veth|soak|sweep|long|package' -E "$foreign" &&
     LD_PRELOAD=$preload ASAN_OPTIONS=detect_leaks=0 \
       ctest --preset asan -LE 'interop|faults|veth|soak|sweep|long|package' -R "$foreign"; then
    result asan PASS $(( $(date +%s) - t ))
  else
    result asan FAIL $(( $(date +%s) - t ))
  fi
}

step_tsan() {
  header "TSan: build/ci-tsan, live/abi/engine/cm unit tests"
  local t=$(date +%s) dir=build/ci-tsan status=PASS races=0 crashed=0
  local tests=(live_support_test live_nic_test host_memory_test abi_convert_test abi_verbs_test
               memory_table_test ack_queue_test icrc_peers_test device_test transfer_test
               access_test reliability_test responder_test direct_hold_test
               direct_window_test abi_direct_test cm_manager_test cm_engine_loop_test)
  if ! cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVRNIC_TSAN=ON >/dev/null ||
     ! cmake --build "$dir" -j "$JOBS" --target "${tests[@]}" vrnic_verbs; then
    result tsan FAIL $(( $(date +%s) - t ))
    return
  fi
  for exe in "${tests[@]}"; do
    local path
    path=$(find "$dir/src" -type f -name "$exe" -perm -u+x | head -1)
    [ -z "$path" ] && { echo "tsan: $exe not built (skipped)"; continue; }
    local log="$dir/$exe.tsan.log"
    # halt_on_error=0: every race is reported; exitcode 66 marks "ran, but TSan reported".
    TSAN_OPTIONS="halt_on_error=0 exitcode=66 second_deadlock_stack=1" "$path" --gtest_brief=1 >"$log" 2>&1
    local rc=$? n
    n=$(grep -c '^WARNING: ThreadSanitizer' "$log")
    printf 'tsan: %-20s exit %3d, %d ThreadSanitizer report(s)\n' "$exe" "$rc" "$n"
    if [ "$n" -gt 0 ]; then
      races=$((races + n))
      grep -A14 '^WARNING: ThreadSanitizer' "$log" | head -60
    fi
    # A test failure (not a TSan report) always fails the step.
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 66 ]; then crashed=1; tail -20 "$log"; fi
    if [ "$rc" -eq 66 ] && [ "$n" -eq 0 ]; then crashed=1; tail -20 "$log"; fi
  done
  if [ "$crashed" -ne 0 ]; then status=FAIL
  elif [ "$races" -gt 0 ]; then
    echo "tsan: $races ThreadSanitizer report(s) (logs in $dir/*.tsan.log)"
    if [ "$TSAN_STRICT" = 1 ]; then status=FAIL; else status="PASS-WITH-REPORTS($races)"; fi
  fi
  result tsan "$status" $(( $(date +%s) - t ))
}

# out_dir: wire/ (whole frames and BTH-onward packets), responder/ (records), cm_mad/ (the
# MADs of rocev2_cm.pcap), manager/ (empty: manager_fuzz inputs are programs, not packets)
make_corpora() {
  python3 - "$1" <<'EOF'
import json, os, struct, sys
out = sys.argv[1]
vec = json.load(open(os.path.join(os.environ["VECTORS_DIR"], "rocev2.json")))
for d in ("wire", "responder", "cm_mad", "manager"):
    os.makedirs(os.path.join(out, d), exist_ok=True)
records = []
for v in vec:
    f = bytes.fromhex(v["frame_hex"])
    l3 = 40 if v.get("ipv6") else 20
    pkt = f[14 + l3 + 8:]  # BTH onward, ICRC included
    open(os.path.join(out, "wire", f"frame_{v['index']}"), "wb").write(f)
    open(os.path.join(out, "wire", f"packet_{v['index']}"), "wb").write(pkt)
    if len(pkt) <= 255:
        rec = bytes([len(pkt)]) + pkt
        records.append(rec)
        open(os.path.join(out, "responder", f"packet_{v['index']}"), "wb").write(rec)
open(os.path.join(out, "responder", "all"), "wb").write(b"".join(records))
# rocev2_cm.pcap (classic pcap, Ethernet): each frame's MAD, the 256 bytes after BTH + DETH.
pcap = open(os.path.join(os.environ["VECTORS_DIR"], "rocev2_cm.pcap"), "rb").read()
endian = "<" if pcap[:4] == bytes.fromhex("d4c3b2a1") else ">"
at, n = 24, 0
while at + 16 <= len(pcap):
    incl = struct.unpack(endian + "I", pcap[at + 8:at + 12])[0]
    f = pcap[at + 16:at + 16 + incl]
    at += 16 + incl
    l3 = 40 if f[12:14] == b"\x86\xdd" else (f[14] & 0x0f) * 4
    mad = f[14 + l3 + 8 + 12 + 8:][:256]
    if len(mad) == 256:
        open(os.path.join(out, "cm_mad", f"mad_{n}"), "wb").write(mad)
        n += 1
print(f"corpus: {len(vec)} vectors -> {len(os.listdir(os.path.join(out, 'wire')))} wire seeds, "
      f"{len(os.listdir(os.path.join(out, 'responder')))} responder seeds, {n} cm_mad seeds")
EOF
}

step_fuzz() {
  header "libFuzzer: headers_fuzz, responder_fuzz, cm_mad_fuzz and manager_fuzz, ${FUZZ_SECONDS} s each"
  local t=$(date +%s) dir=build/ci-fuzz status=PASS
  local harnesses=(headers_fuzz:wire responder_fuzz:responder cm_mad_fuzz:cm_mad
                   manager_fuzz:manager)  # executable:corpus
  if ! command -v clang++ >/dev/null; then
    echo "fuzz: clang++ not installed"; result fuzz FAIL 0; return
  fi
  if ! CC=clang CXX=clang++ cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
         -DVRNIC_FUZZ=ON >/dev/null ||
     ! cmake --build "$dir" -j "$JOBS" --target "${harnesses[@]%%:*}"; then
    result fuzz FAIL $(( $(date +%s) - t )); return
  fi
  local seeds="$dir/seeds"
  rm -rf "$seeds"
  make_corpora "$seeds" || { result fuzz FAIL $(( $(date +%s) - t )); return; }
  for h in "${harnesses[@]}"; do
    local exe=${h%%:*} corpus=${h##*:} path
    path=$(find "$dir/src" -type f -name "$exe" -perm -u+x | head -1)
    mkdir -p "$dir/corpus/$corpus" "$dir/artifacts/$exe"
    echo "fuzz: $exe for ${FUZZ_SECONDS} s (corpus $dir/corpus/$corpus, seeds $seeds/$corpus)"
    "$path" -max_total_time="$FUZZ_SECONDS" -print_final_stats=1 -rss_limit_mb=2048 \
        -artifact_prefix="$dir/artifacts/$exe/" "$dir/corpus/$corpus" "$seeds/$corpus" \
        >"$dir/$exe.log" 2>&1
    local rc=$?
    grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb)' "$dir/$exe.log"
    if [ "$rc" -ne 0 ]; then
      status=FAIL
      echo "fuzz: $exe exit $rc, artifacts in $dir/artifacts/$exe/"
      grep -m1 -A30 -E 'ERROR: (AddressSanitizer|libFuzzer|UndefinedBehavior)|runtime error' "$dir/$exe.log"
    else
      echo "fuzz: $exe found nothing"
    fi
  done
  result fuzz "$status" $(( $(date +%s) - t ))
}

for s in "${STEPS[@]}"; do
  case $s in
    asan) step_asan ;;
    tsan) step_tsan ;;
    fuzz) step_fuzz ;;
    *) echo "unknown step $s (asan, tsan, fuzz)"; exit 2 ;;
  esac
done

header "summary"
for s in "${STEPS[@]}"; do printf '%-6s %s\n' "$s" "${RESULT[$s]}"; done
echo "total $(( $(date +%s) - T_ALL )) s"
exit $FAILED
