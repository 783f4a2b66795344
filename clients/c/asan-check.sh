#!/usr/bin/env bash
# make test-asan: the C client (libframesrv + tools/framesrv-consume.c) built with AddressSanitizer and UBSan (-fno-sanitize-recover,
# so the first finding ends the process) against real producers, as CrossLanguageTests runs
# it: lossless with --verify-pattern, several pixel formats, pool epochs (size changes),
# --count, a slow producer, and a producer killed under it. Any sanitizer report fails.
#
#   clients/c/asan-check.sh [path/to/framesrv]     (default: .build/debug/framesrv)
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=$(realpath "${1:-.build/debug/framesrv}")
WORK=$(mktemp -d /dev/shm/framesrv-asan.XXXXXX)
export FRAMESRV_DIR=$WORK/run
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null; rm -rf "$WORK"' EXIT
# libframesrv and build-asan/framesrv-consume with -fsanitize=address,undefined (make sanitize).
make -s -C clients/c sanitize > /dev/null
CLIENT=$(realpath clients/c/build-asan/framesrv-consume)
# exitcode 86: a sanitizer finding, never confused with the client's own 1 (corrupt) or 2 (error).
export ASAN_OPTIONS=detect_leaks=1:exitcode=86:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=86
failures=0

# One run: NAME, EXPECTED-FRAMES (or - for "whatever was published"), producer options...
run() {
    local name=$1 expect=$2; shift 2
    local log=$WORK/$name
    "$CLIENT" --in "$name" ${LIVE:-} --verify-pattern --seq-log "$log.seq" --wait 30 > "$log.out" 2> "$log.err" &
    local client=$!
    # --wait-for counts lossless consumers only: a live client gets a paced stream instead.
    local wait_for=(--wait-for 1)
    [[ -z ${LIVE:-} ]] || { wait_for=(); sleep 0.5; }
    "$BIN" produce --pattern --out "$name" "${wait_for[@]}" --quiet "$@" > /dev/null 2> "$log.producer" || true
    local status=0
    wait $client || status=$?
    local summary; summary=$(grep "^c: received" "$log.out" || true)
    if [[ $status -ne 0 ]] || grep -qE "AddressSanitizer|runtime error|LeakSanitizer" "$log.err" \
        || [[ $expect != - && $summary != "c: received $expect frames"* ]] || [[ $summary != *"corrupt 0"* ]]; then
        echo "asan: $name: FAILED (status $status): ${summary:-no summary}"
        sed 's/^/    /' "$log.err" | head -40
        failures=$((failures + 1))
    else
        echo "asan: $name: $summary"
    fi
}

run lossless 300 --size 320x240 --rate max --frames 300
for fmt in gray nv12 yuv420p10le rgb24 bgra p010le yuv444p10le gray16le gbrp; do
    run "fmt-$fmt" 40 --pix-fmt "$fmt" --size 96x54 --rate max --frames 40 --slots 2
done
run epochs 120 --size 64x64 --rate max --frames 120 --size-change-at 30:128x72,60:32x32,90:640x360
run one-slot 50 --size 64x64 --rate max --frames 50 --slots 1
run paced 20 --size 64x64 --rate 100 --frames 20

# A live consumer of a paced stream (started first): whatever it kept up with, every frame intact.
LIVE=--live run live - --size 160x120 --rate 200 --frames 200

# --count: the client stops after N frames of a longer stream and detaches cleanly.
"$BIN" produce --pattern --out counted --rate 200 --frames 400 --wait-for 1 --quiet > /dev/null 2>&1 &
producer=$!
status=0
"$CLIENT" --in counted --verify-pattern --count 25 --wait 30 > "$WORK/counted.out" 2> "$WORK/counted.err" || status=$?
kill $producer 2>/dev/null || true; wait $producer 2>/dev/null || true
if [[ $status -ne 0 ]] || grep -qE "AddressSanitizer|runtime error|LeakSanitizer" "$WORK/counted.err"; then
    echo "asan: counted: FAILED (status $status)"; sed 's/^/    /' "$WORK/counted.err" | head -40; failures=$((failures + 1))
else
    echo "asan: counted: $(grep '^c: received' "$WORK/counted.out")"
fi

# The producer dies under the client (SIGKILL): the client must notice and exit, not fault.
"$BIN" produce --pattern --out killed --rate 100 --frames 100000 --wait-for 1 --quiet > /dev/null 2>&1 &
producer=$!
"$CLIENT" --in killed --verify-pattern --wait 30 > "$WORK/killed.out" 2> "$WORK/killed.err" &
client=$!
sleep 1.5
kill -KILL $producer; wait $producer 2>/dev/null || true
status=0
for _ in $(seq 100); do kill -0 $client 2>/dev/null || break; sleep 0.1; done
if kill -0 $client 2>/dev/null; then kill -TERM $client; fi
wait $client || status=$?
if [[ $status -eq 86 ]] || grep -qE "AddressSanitizer|runtime error|LeakSanitizer" "$WORK/killed.err"; then
    echo "asan: killed: FAILED (status $status)"; sed 's/^/    /' "$WORK/killed.err" | head -40; failures=$((failures + 1))
else
    echo "asan: killed: status $status, $(grep '^c: received' "$WORK/killed.out" || echo 'no summary')"
fi

[[ $failures -eq 0 ]] || { echo "asan: $failures run(s) failed" >&2; exit 1; }
echo "asan: all runs clean"
