#!/usr/bin/env bash
# cuda_stages.sh FRAMESRV TOOLS CLIP [EXPECTED [EXPECTED_NV12]]: the upload and download stages
# between framesrv's own commands, and produce's CUDA streams. `framesrv produce -i CLIP` -> `framesrv-cuda upload` -> `framesrv-cuda download`
# -> `framesrv sink --framemd5` must write what `framesrv produce -i CLIP ! sink --framemd5`
# writes (and, given, EXPECTED: ffmpeg's framemd5 of CLIP), every header field carried across
# the CUDA stream; and a Swift sink meeting the CUDA stream is refused in one line that says
# how to download it. FRAMESRV is the framesrv binary, TOOLS the folder of libframesrv's tools.
# Runs against the real driver on a GPU (scripts/test-gpu --stages) and against
# tests/fakecuda where FRAMESRV_LIBCUDA names it (test_cuda_copy). Prints one line; exit 0 or 1.
# `produce -i CLIP --memory cuda` (a CPU decode uploaded into CUDA slots) -> download -> sink must
# equal the host path too. Given EXPECTED_NV12 (ffmpeg's framemd5 of CLIP with -vf format=nv12,
# which is what `ffmpeg -hwaccel cuda -hwaccel_output_format cuda -i CLIP -vf hwdownload,format=nv12`
# writes for H.264), `produce -i CLIP --hwaccel cuda` (NVDEC) -> download -> sink must equal it.
# FFMPEG (environment), an ffmpeg that runs on this device, makes ffmpeg the oracle on the GPU
# itself: the upload chain equals its hwupload_cuda -> hwdownload, the NVDEC stream its
# -hwaccel cuda -hwaccel_output_format cuda decode, and framesrv filter scale_cuda=960:540 its
# scale_cuda=960:540 -> hwdownload. Last, framesrv web's snapshot of a CUDA stream (a download)
# equals the host stream's it was uploaded from (python3 fetches them).
set -euo pipefail
framesrv=$1 tools=$2 clip=$3 expected=${4:-} expected_nv12=${5:-}
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
oracle=""
if [[ -n ${FFMPEG:-} ]]; then   # ffmpeg's own CUDA upload and download of the same decode
    "$FFMPEG" -v error -nostdin -init_hw_device cuda=cu:0 -filter_hw_device cu -i "$clip" \
        -vf hwupload_cuda,hwdownload,format=yuv420p -f framemd5 "$work/ffmpeg-upload.md5" || fail "ffmpeg hwupload_cuda did not run"
    diff <(md5s "$work/ffmpeg-upload.md5") <(md5s "$work/chain.md5") >&2 || fail "the upload chain differs from ffmpeg's hwupload_cuda -> hwdownload"
    "$FFMPEG" -v error -nostdin -hwaccel cuda -hwaccel_output_format cuda -i "$clip" -vf hwdownload,format=nv12 \
        -f framemd5 "$work/ffmpeg-nvdec.md5" || fail "ffmpeg -hwaccel cuda did not run"
    "$FFMPEG" -v error -nostdin -hwaccel cuda -hwaccel_output_format cuda -i "$clip" -vf scale_cuda=960:540,hwdownload,format=nv12 \
        -f framemd5 "$work/ffmpeg-half.md5" || fail "ffmpeg scale_cuda did not run"
    expected_nv12=$work/ffmpeg-nvdec.md5
    oracle="; equal to ffmpeg on this GPU: hwupload_cuda, -hwaccel cuda, scale_cuda=960:540"
fi
# produce's own CUDA stream: --memory cuda (and --hwaccel cuda where NVDEC is), through download.
through_cuda() {   # NAME [--vf GRAPH] produce-options... : writes $work/NAME.md5 (GRAPH: framesrv filter on the CUDA stream)
    local name=$1 cuda=$1; shift
    if [[ ${1:-} == --vf ]]; then
        cuda=$name-filtered
        "$framesrv" filter --in "$name" --out "$cuda" --vf "$2" --wait-for 1 --wait 30 > "$work/$name.filter" 2>&1 & pids+=($!)
        shift 2
    fi
    "$framesrv" produce -i "$clip" --out "$name" --wait-for 1 "$@" > "$work/$name.produce" 2>&1 & pids+=($!)
    local p=$!
    "$tools/framesrv-cuda" download --in "$cuda" --out "$name-back" --wait-for 1 --wait 30 > /dev/null 2> "$work/$name.download" & pids+=($!)
    "$framesrv" sink --in "$name-back" --framemd5 "$work/$name.md5" --wait 30 > /dev/null 2> "$work/$name.sink" ||
        fail "$name: sink: $(cat "$work/$name.sink" "$work/$name.download")"
    wait "$p" || fail "$name: produce $*: $(cat "$work/$name.produce")"
}
through_cuda uploaded --memory cuda
diff <(md5s "$work/direct.md5") <(md5s "$work/uploaded.md5") >&2 || fail "produce --memory cuda: the framemd5 differs from the host path's"
grep -q "uploaded from host memory" "$work/uploaded.produce" || fail "produce --memory cuda said: $(cat "$work/uploaded.produce")"
nvdec=""
if [[ -n $expected_nv12 ]]; then
    through_cuda nvdec --hwaccel cuda
    diff <(md5s "$expected_nv12") <(md5s "$work/nvdec.md5") >&2 || fail "produce --hwaccel cuda: the framemd5 differs from ffmpeg's nv12"
    grep -q " 0 uploaded" "$work/nvdec.produce" || fail "produce --hwaccel cuda did not decode on the GPU: $(cat "$work/nvdec.produce")"
    nvdec="; NVDEC: $(grep -vc '^#' "$work/nvdec.md5") frames equal to ffmpeg's nv12 ($(sed 's/.*(\(h264[^)]*\)).*/\1/' "$work/nvdec.produce"))"
    # framesrv filter with FFmpeg's CUDA filters, CUDA stream to CUDA stream: scale_cuda at the
    # same size passes frames through (its default), so the chain still equals ffmpeg's nv12;
    # at half size every frame is 960x540 nv12, the same in two runs.
    through_cuda same --vf scale_cuda=1920:1080 --hwaccel cuda
    diff <(md5s "$expected_nv12") <(md5s "$work/same.md5") >&2 || fail "filter scale_cuda (same size): differs from ffmpeg's nv12: $(cat "$work/same.filter")"
    through_cuda half1 --vf scale_cuda=960:540 --hwaccel cuda
    through_cuda half2 --vf scale_cuda=960:540 --hwaccel cuda
    [[ $(grep -vc '^#' "$work/half1.md5") -eq $(grep -vc '^#' "$expected_nv12") ]] && grep -q "960x540" "$work/half1.md5" ||
        fail "filter scale_cuda=960:540: $(head -c 600 "$work/half1.md5") $(cat "$work/half1.filter")"
    diff <(md5s "$work/half1.md5") <(md5s "$work/half2.md5") >&2 || fail "filter scale_cuda=960:540 differs between two runs"
    if [[ -n ${FFMPEG:-} ]]; then
        diff <(md5s "$work/ffmpeg-half.md5") <(md5s "$work/half1.md5") >&2 || fail "filter scale_cuda=960:540 differs from ffmpeg's scale_cuda"
    fi
    nvdec+="; filter scale_cuda (CUDA to CUDA): $(tail -n 1 "$work/half1.filter")"
fi

# A movie with sound (FRAMESRV_CLIP_SOUND, with FRAMESRV_CLIP_SOUND_NV12 and _AUDIO: ffmpeg's
# framemd5 of its pictures as nv12 and of its sound) through NVDEC where NVDEC is: the pictures
# on the CUDA stream and the sound beside it (NAME-audio, a host stream), --wait-for 2 counting
# a consumer of either; each equal to ffmpeg's. (SOUND_DECODE=--memory cuda, with a yuv420p
# framemd5 for _NV12, runs the same on fakecuda.)
sound=""
if [[ -n ${FRAMESRV_CLIP_SOUND:-} && ( -n $expected_nv12 || -n ${SOUND_DECODE:-} ) ]]; then
    # shellcheck disable=SC2086  # SOUND_DECODE is two words
    "$framesrv" produce -i "$FRAMESRV_CLIP_SOUND" ${SOUND_DECODE:---hwaccel cuda} --out snd --wait-for 2 > "$work/snd.produce" 2>&1 & pids+=($!)
    p=$!
    "$tools/framesrv-cuda" download --in snd --out snd-back --wait-for 1 --wait 30 > /dev/null 2> "$work/snd.download" & pids+=($!)
    "$framesrv" sink --in snd-audio --framemd5 "$work/snd-audio.md5" --wait 30 > /dev/null 2> "$work/snd-audio.sink" & pids+=($!)
    a=$!
    "$framesrv" sink --in snd-back --framemd5 "$work/snd.md5" --wait 30 > /dev/null 2> "$work/snd.sink" ||
        fail "with sound: the pictures' sink: $(cat "$work/snd.sink" "$work/snd.download")"
    wait "$a" || fail "with sound: the sound's sink: $(cat "$work/snd-audio.sink")"
    wait "$p" || fail "with sound: produce: $(cat "$work/snd.produce")"
    diff <(md5s "$FRAMESRV_CLIP_SOUND_NV12") <(md5s "$work/snd.md5") >&2 || fail "with sound: the pictures differ from ffmpeg's"
    diff <(md5s "$FRAMESRV_CLIP_SOUND_AUDIO") <(md5s "$work/snd-audio.md5") >&2 || fail "with sound: the sound differs from ffmpeg's"
    sound="; a movie's pictures and sound (${SOUND_DECODE:---hwaccel cuda}): $(grep -vc '^#' "$work/snd.md5") and $(grep -vc '^#' "$work/snd-audio.md5") frames equal to ffmpeg's"
fi

# framesrv web on a CUDA stream: its snapshot (the frame downloaded, framesrv_frame_read_on) is
# the PNG the host stream it was uploaded from gives: SMPTE bars, every frame the same picture.
"$framesrv" produce -f lavfi -i smptebars=size=320x240:rate=20 -re --out bars --quiet --wait-for 1 > "$work/bars.produce" 2>&1 & pids+=($!)
"$tools/framesrv-cuda" upload --in bars --out bars-gpu --wait 30 > /dev/null 2> "$work/bars.upload" & pids+=($!)
"$framesrv" web --listen 127.0.0.1:0 > "$work/web.out" 2>&1 & pids+=($!)
python3 - "$work" <<'PY' || fail "web: $(cat "$work/web.out" "$work/bars.upload")"
import sys, time, urllib.request, urllib.error
work = sys.argv[1]
def get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r: return r.status, r.read()
    except urllib.error.HTTPError as e: return e.code, e.read()
deadline = time.time() + 30
while time.time() < deadline:
    words = open(work + "/web.out").read().split()
    url = next((w for w in words if w.startswith("http://")), None)
    if url and get(url.rstrip("/") + "/api/streams/bars-gpu/snapshot.png")[0] == 200: break
    time.sleep(0.3)
host = get(url.rstrip("/") + "/api/streams/bars/snapshot.png")
gpu = get(url.rstrip("/") + "/api/streams/bars-gpu/snapshot.png")
ok = host[0] == 200 and gpu[0] == 200 and host[1][:4] == b"\x89PNG" and host[1] == gpu[1]
print("web snapshot of the CUDA stream: %d, %d bytes, %s the host stream's" % (gpu[0], len(gpu[1]), "equal to" if ok else "NOT equal to"), file=sys.stderr)
sys.exit(0 if ok else 1)
PY
web="; framesrv web's snapshot of a CUDA stream equals its host stream's"
frames=$(grep -vc '^#' "$work/chain.md5")
[[ $frames -gt 0 ]] || fail "no frame went through"
echo "cuda_stages: $frames frames through upload and download, framemd5 identical to the host path${expected:+ and to ffmpeg}, and through produce --memory cuda; $(tail -n 1 "$work/upload.out" | sed 's/^framesrv-cuda: //')$nvdec$sound$web$oracle"
