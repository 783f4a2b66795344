#!/usr/bin/env bash
# Builds and runs every libFuzzer target (or those named) for FUZZ_SECONDS each (default 30),
# or for FUZZ_RUNS inputs each when set. Fails if any target crashes; each crashing input is
# copied to Fuzz/corpus/<target>/crash-<sha1> so it becomes a regression input (commit it).
#
#   Fuzz/run.sh                      # make fuzz
#   FUZZ_RUNS=1000000 Fuzz/run.sh    # make fuzz-long: prints the inputs each target ran
#   Fuzz/run.sh header control
#   FUZZ_KEEP_GOING=1 FUZZ_RUNS=1000000 Fuzz/run.sh control   # count past known crashes (libFuzzer
#       -fork=1 -ignore_crashes=1); crashing inputs stay in .build-fuzz/crashes/<target>/
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${FUZZ_BUILD:-$PWD/.build-fuzz}
Fuzz/build.sh "$@" || exit 1
# Swift's own crash reporter would wait for a debugger-style backtrace; libFuzzer prints its own.
export SWIFT_BACKTRACE=enable=no
ALL=(control header announcement arguments options request record)
failed=()
for t in "${@:-${ALL[@]}}"; do
    case $t in control) max_len=32768 ;; header) max_len=512 ;; record) max_len=1360 ;; *) max_len=1024 ;; esac
    work=$OUT/work/$t crashes=$OUT/crashes/$t
    mkdir -p "$work" "$crashes"
    limit=(-max_total_time="${FUZZ_SECONDS:-30}")
    [[ -n ${FUZZ_RUNS:-} ]] && limit=(-runs="$FUZZ_RUNS")
    [[ -n ${FUZZ_KEEP_GOING:-} ]] && limit+=(-fork=1 -ignore_crashes=1)
    # New inputs go to the scratch directory (first); Fuzz/corpus/<t> is read, regression inputs first.
    log=$OUT/$t.log
    "$OUT/fuzz-$t" "${limit[@]}" -max_len=$max_len -print_final_stats=1 -artifact_prefix="$crashes/" \
        "$work" "Fuzz/corpus/$t" > "$log" 2>&1
    status=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    if [[ -n ${FUZZ_KEEP_GOING:-} ]]; then
        line=$(grep -E '^#[0-9]+: ' "$log" | tail -1)
        echo "fuzz: $t: ${line%%:*} inputs (-fork=1), oom/timeout/crash ${line##*crash: }; inputs in $crashes"
        continue
    fi
    if [[ $status -eq 0 ]]; then
        echo "fuzz: $t: ${runs:-?} inputs, no crash"
        continue
    fi
    failed+=("$t")
    grep -m1 -E "Fatal error|ERROR: (AddressSanitizer|libFuzzer)|runtime error" "$log" | sed "s/^/fuzz: $t: /"
    for f in "$crashes"/crash-* "$crashes"/timeout-* "$crashes"/oom-*; do
        [[ -e $f ]] || continue
        dest=Fuzz/corpus/$t/crash-$(sha1sum "$f" | cut -c1-16)
        mv "$f" "$dest"
        echo "fuzz: $t: crashed after ${runs:-?} inputs; input saved as $dest (see $log)"
    done
    [[ $status -ne 0 ]] && ! ls "$crashes" >/dev/null 2>&1 && echo "fuzz: $t: exit status $status (see $log)"
done
[[ ${#failed[@]} -eq 0 ]] || { echo "fuzz: crashes in: ${failed[*]}" >&2; exit 1; }
