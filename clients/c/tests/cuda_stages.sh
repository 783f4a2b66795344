#!/usr/bin/env bash
# cuda_stages.sh FRAMESRV TOOLS CLIP [EXPECTED]: the upload and download stages between framesrv's
# own commands. `framesrv produce -i CLIP` -> `framesrv-cuda upload` -> `framesrv-cuda download`
# -> `framesrv sink --framemd5` must write what `framesrv produce -i CLIP ! sink --framemd5`
# writes (and, given, EXPECTED: ffmpeg's framemd5 of CLIP), every header field carried across
# the CUDA stream; and a Swift sink meeting the CUDA stream is refused in one line that says
# how to download it. FRAMESRV is the framesrv binary, TOOLS the folder of libframesrv's tools.
# Runs against the real driver on a GPU (scripts/test-gpu --stages) and against
# tests/fakecuda where FRAMESRV_LIBCUDA names it (test_cuda_copy). Prints one line; exit 0 or 1.
set -euo pipefail
framesrv=$1 tools=$2 clip=$3 expected=${4:-}
work=$(mktemp -d /dev/shm/framesrv-stages.XXXXXX)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
export FRAMESRV_DIR=$work/run
mkdir -p "$FRAMESRV_DIR"
fail() { echo "cuda_stages: FAILED: $*" >&2; exit 1; }
md5s() { grep -v '^#software' "$1"; }

# The host path alone: what the chain must equal.
"$framesrv" produce -i "$clip" --out direct --wait-for 1 > /dev/null 2> "$work/direct.err" & pids+=($!)
"$framesrv" sink --in direct --framemd5 "$work/direct.md5" --wait 30 > /dev/null 2>> "$work/direct.err" || fail "produce ! sink: $(tail -n 3 "$work/direct.err")"

# Through a CUDA stream: each stage waits for its consumer, so no frame is published before
# the next stage is attached.
"$framesrv" produce -i "$clip" --out film --wait-for 1 > /dev/null 2> "$work/produce.err" & pids+=($!)
"$tools/framesrv-cuda" upload --in film --out film-gpu --wait-for 1 --wait 30 > "$work/upload.out" 2>&1 & pids+=($!)
up=$!
"$tools/framesrv-cuda" download --in film-gpu --out film-back --wait-for 1 --wait 30 > "$work/download.out" 2>&1 & pids+=($!)
down=$!
# A Swift sink on the CUDA stream (the download's first consumer) is refused in one line.
sleep 0.5
if "$framesrv" sink --in film-gpu --framemd5 /dev/null --wait 30 2> "$work/refused.err"; then fail "a Swift sink read CUDA stream film-gpu"; fi
[[ $(wc -l < "$work/refused.err") -eq 1 ]] && grep -q "framesrv-cuda download --in film-gpu" "$work/refused.err" ||
    fail "the Swift sink's refusal: $(cat "$work/refused.err")"
"$framesrv" sink --in film-back --framemd5 "$work/chain.md5" --wait 30 > /dev/null 2> "$work/sink.err" & pids+=($!)
sink=$!
wait "$sink" || fail "sink of the chain: $(tail -n 3 "$work/sink.err")"
wait "$up" || fail "upload: $(cat "$work/upload.out")"
wait "$down" || fail "download: $(cat "$work/download.out")"
diff <(md5s "$work/direct.md5") <(md5s "$work/chain.md5") >&2 || fail "the chain's framemd5 differs from the host path's"
if [[ -n $expected ]]; then diff <(md5s "$expected") <(md5s "$work/chain.md5") >&2 || fail "the chain's framemd5 differs from ffmpeg's"; fi
frames=$(grep -vc '^#' "$work/chain.md5")
[[ $frames -gt 0 ]] || fail "no frame went through"
echo "cuda_stages: $frames frames through upload and download, framemd5 identical to the host path${expected:+ and to ffmpeg}; $(tail -n 1 "$work/upload.out" | sed 's/^framesrv-cuda: //')"
