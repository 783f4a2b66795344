#!/usr/bin/env bash
# every-stage.sh: every kind of stage in one pipeline as processes, one stage each, chained through
# framesrv streams in shared memory (every stage lossless: nothing is dropped):
#
#   decode (a file, a camera, or a generated test source)
#     -> Gaussian blur -> YUV to RGB (with the stream's own matrix) -> blend an image at 40%
#     -> a Python stage (examples/python/numpy_overlay.py: numpy draws a box and text)
#     -> sepia -> H.264 recording                                    (OUT/chain.mp4)
#   decode -> grayscale -> lossless FFV1 recording (the gray branch)  (OUT/gray.mkv)
#
# Run it from anywhere, after `swift build` in the repository (the Python stage needs the
# framesrv package: scripts/python-env, or `pip install ./clients/python`):
#   examples/pipelines/every-stage.sh                          # 150 frames of testsrc2 into ./every-stage-out
#   examples/pipelines/every-stage.sh --input movie.mkv --out /tmp/chain
#   examples/pipelines/every-stage.sh --input /dev/video0 --frames 300
# It prints every command it starts; `framesrv top` shows the stages while it runs. Ctrl-C
# (or SIGTERM) stops the decoder, and the stages after it end when they have passed on every
# frame decoded: the recordings are complete. Exit status 0 when every stage exited 0.
set -u -o pipefail

usage() {
    cat <<EOF
usage: every-stage.sh [--input FILE|/dev/videoN] [--frames N] [--out DIR] [--python PY | --no-python]
  --input FILE|DEV  decode a file, or capture a V4L2 camera (/dev/video*); default: ffmpeg's
                    testsrc2 at 640x360, 30 fps (lavfi)
  --frames N        stop after N decoded frames (default 150; a file: all of it)
  --out DIR         where chain.mp4, gray.mkv and the blend image go (default ./every-stage-out)
  --python PY       the Python that runs the Python stage (default: <repo>/.build/python-venv
                    when scripts/python-env made it, else python3)
  --no-python       leave the Python stage out (blend -> sepia directly)
Environment: FRAMESRV (the framesrv binary; default <repo>/.build/{release,debug}/framesrv),
FRAMESRV_DIR (the runtime directory the streams live in).
EOF
}

die() { echo "every-stage: $*" >&2; exit 2; }

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
input="" frames="" out="./every-stage-out" python="" use_python=1
while [ $# -gt 0 ]; do
    case "$1" in
        --input) [ $# -ge 2 ] || die "--input needs a file or device"; input=$2; shift 2 ;;
        --frames) [ $# -ge 2 ] || die "--frames needs a count"; frames=$2; shift 2
                  [[ "$frames" =~ ^[1-9][0-9]*$ ]] || die "--frames takes a positive count, not '$frames'" ;;
        --out) [ $# -ge 2 ] || die "--out needs a directory"; out=$2; shift 2 ;;
        --python) [ $# -ge 2 ] || die "--python needs an interpreter"; python=$2; shift 2 ;;
        --no-python) use_python=0; shift ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown option '$1'" ;;
    esac
done

framesrv=${FRAMESRV:-}
if [ -z "$framesrv" ]; then
    for f in "$repo/.build/release/framesrv" "$repo/.build/debug/framesrv" "$(command -v framesrv)"; do
        if [ -n "$f" ] && [ -x "$f" ]; then framesrv=$f; break; fi
    done
fi
[ -n "$framesrv" ] && [ -x "$framesrv" ] || die "no framesrv binary: run 'swift build' in $repo, or set FRAMESRV"
command -v ffmpeg >/dev/null || die "ffmpeg is needed to make the blend image"
if [ "$use_python" = 1 ]; then
    if [ -z "$python" ]; then
        python=python3
        [ -x "$repo/.build/python-venv/bin/python" ] && python="$repo/.build/python-venv/bin/python"
    fi
    overlay_script="$repo/examples/python/numpy_overlay.py"
    [ -f "$overlay_script" ] || die "no $overlay_script (or run with --no-python)"
    "$python" -c "import framesrv" 2>/dev/null \
        || die "$python cannot import framesrv: run scripts/python-env, or pip install $repo/clients/python (or --no-python)"
fi
mkdir -p "$out" || die "cannot create $out"

# The source: -f v4l2 for a camera, -i for a file, lavfi's testsrc2 by default.
case "$input" in
    "") source_args=(-f lavfi -i "testsrc2=size=640x360:rate=30"); frames=${frames:-150} ;;
    /dev/video*) source_args=(-f v4l2 -i "$input"); frames=${frames:-150} ;;
    *) [ -r "$input" ] || die "cannot read '$input'"; source_args=(-i "$input") ;;
esac
[ -n "$frames" ] && source_args+=(--frames "$frames")

# The image blended over the video at 40%: SMPTE bars, made with ffmpeg.
image="$out/blend.png"
ffmpeg -v error -y -f lavfi -i "smptebars=size=240x135" -frames:v 1 "$image" || die "ffmpeg could not make $image"

# Each stage in a process group of its own (job control), so that Ctrl-C reaches this script
# only, which stops the decoder (on_signal below) instead of every stage at once.
set -m

# Stream names of this run (several runs can share a runtime directory).
s="chain$$"
pids=()
names=()
start() {   # start NAME COMMAND...: runs a stage in the background and says so
    local name=$1; shift
    echo "every-stage: starting $name: $*" >&2
    "$@" </dev/null &
    pids+=($!)
    names+=("$name")
}

stopping=0
alive() {   # whether a stage still runs
    local pid
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && return 0; done
    return 1
}
settle() {   # settle TENTHS: waits until no stage runs (true) or TENTHS x 0.1 s passed (false)
    local i
    for ((i = 0; i < $1; i++)); do alive || return 0; sleep 0.1; done
    ! alive
}
stop_all() {   # SIGTERM to every stage still running (framesrv stages end their streams cleanly)
    stopping=1
    local pid
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
}
on_signal() {   # stop the decoder only: its end of stream drains the chain and completes both
                # recordings with every frame decoded; what still runs 10 s later is stopped too
    stopping=1
    local n=${#pids[@]}
    if [ "$n" -gt 0 ] && [ "${names[n - 1]}" = decode ]; then kill -TERM "${pids[n - 1]}" 2>/dev/null; else stop_all; fi
    settle 100 || stop_all
}
on_exit() {   # an early exit (set -u, an error): nothing of this run is left running
    stop_all
    settle 50 || for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null; done
}
trap on_signal INT TERM
trap on_exit EXIT

# Consumers first, the source last: every stage waits (--wait-for) for the one after it, so
# no frame is published before its reader is attached.
start record "$framesrv" sink --in "$s-sepia" --record "$out/chain.mp4" --quiet
start gray-record "$framesrv" sink --in "$s-gray" --record "$out/gray.mkv" -c:v ffv1 --quiet
if [ "$use_python" = 1 ]; then
    start sepia "$framesrv" filter --in "$s-overlay" --out "$s-sepia" --preset sepia --wait-for 1 --quiet
    # The overlay waits for the sepia stage when it can (--wait-for), as framesrv's stages do.
    wait_for=()
    "$python" "$overlay_script" --help 2>/dev/null | grep -q -- --wait-for && wait_for=(--wait-for 1)
    start python "$python" "$overlay_script" --in "$s-blend" --out "$s-overlay" "${wait_for[@]}"
else
    start sepia "$framesrv" filter --in "$s-blend" --out "$s-sepia" --preset sepia --wait-for 1 --quiet
fi
start blend "$framesrv" filter --in "$s-rgb" --out "$s-blend" --preset "blend=$image:0.4" --wait-for 1 --quiet
start rgb "$framesrv" filter --in "$s-blur" --out "$s-rgb" --preset rgb --wait-for 1 --quiet
start blur "$framesrv" filter --in "$s-src" --out "$s-blur" --preset blur=4 --wait-for 1 --quiet
start gray "$framesrv" filter --in "$s-src" --out "$s-gray" --preset gray --wait-for 1 --quiet
start decode "$framesrv" produce "${source_args[@]}" --out "$s-src" --wait-for 2 --quiet

# Wait for every stage; the first one that fails stops the others.
status=0
running=("${pids[@]}")
while [ ${#running[@]} -gt 0 ]; do
    done_pid=""
    wait -n -p done_pid "${running[@]}"
    code=$?
    [ -n "${done_pid:-}" ] || continue   # a trapped signal interrupted the wait
    still=()
    for pid in "${running[@]}"; do [ "$pid" = "$done_pid" ] || still+=("$pid"); done
    running=("${still[@]}")
    if [ "$code" != 0 ]; then
        for i in "${!pids[@]}"; do [ "${pids[$i]}" = "$done_pid" ] && name=${names[$i]}; done
        echo "every-stage: stage $name exited with status $code" >&2
        status=1
        [ "$stopping" = 1 ] || stop_all
    fi
done
trap - EXIT
[ "$stopping" = 1 ] && [ "$status" = 0 ] && echo "every-stage: stopped" >&2
[ "$status" = 0 ] && echo "every-stage: wrote $out/chain.mp4 and $out/gray.mkv" >&2
exit $status
