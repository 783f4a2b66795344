#!/usr/bin/env bash
# Regenerates the seed corpora in Fuzz/corpus/ (seed-* files; crash-* regression inputs are kept):
#   announcement  every message of protocol/vectors/announcements.json
#   control       NAME.ctl of real streams (1, 4 and 64 slots; with a live and a lossless sink attached)
#   header        the first slot's 256-byte header (+ the slot's size, u32) of a pattern stream per pixel format
#   arguments, options   command lines from the commands' --help, arguments separated by NUL
# Needs a debug build (swift build); run from anywhere.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${FRAMESRV:-.build/debug/framesrv}
C=Fuzz/corpus
mkdir -p $C/{announcement,control,header,arguments,options}
rm -f $C/*/seed-*
export FRAMESRV_DIR=$(mktemp -d /dev/shm/fuzz-seeds.XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait; rm -rf "$FRAMESRV_DIR"' EXIT

python3 - "$C/announcement" <<'PY'
import json, sys
for v in json.load(open("protocol/vectors/announcements.json")):
    open(f"{sys.argv[1]}/seed-{v['name']}", "wb").write(bytes.fromhex(v["hex"]))
PY

# Waits for $1 to exist.
await() { for _ in $(seq 200); do [[ -e $1 ]] && return; sleep 0.05; done; echo "seeds: no $1" >&2; exit 1; }
# A running stream: produce --pattern at 5 fps so the files stay put while we copy them.
stream() { # name, extra produce options...
    local name=$1; shift
    "$BIN" produce --pattern --out "$name" --rate 5 --frames 100000 --quiet "$@" & pids+=($!)
    await "$FRAMESRV_DIR/$name.ctl"; await "$FRAMESRV_DIR/$name.pool.1"; sleep 0.5
}
for fmt in gray nv12 yuv420p yuv422p yuv444p yuv420p10le rgb24 bgra rgba p010le yuv422p10le yuv444p10le gray16le bgr24 gbrp; do
    stream "h-$fmt" --pix-fmt "$fmt" --size 64x36 --slots 2
    python3 - "$FRAMESRV_DIR/h-$fmt" "$C/header/seed-$fmt" <<'PY'
import struct, sys, os
ctl = open(sys.argv[1] + ".ctl", "rb").read()
pool = sys.argv[1] + ".pool.1"
slots = struct.unpack_from("<I", ctl, 12)[0]
slot_bytes = os.path.getsize(pool) // slots
head = open(pool, "rb").read(256)
open(sys.argv[2], "wb").write(head + struct.pack("<I", slot_bytes))
PY
done
for slots in 1 4 64; do
    stream "c$slots" --slots "$slots" --size 32x32
    cp "$FRAMESRV_DIR/c$slots.ctl" "$C/control/seed-slots-$slots"
done
stream consumed --slots 4 --size 32x32
"$BIN" sink --in consumed --null --live --quiet & pids+=($!)
"$BIN" sink --in consumed --null --lossless --quiet & pids+=($!)
sleep 1.5
cp "$FRAMESRV_DIR/consumed.ctl" "$C/control/seed-two-sinks"

n=0
while IFS= read -r line; do
    [[ -z $line || $line == \#* ]] && continue
    n=$((n + 1))
    printf '%s' "$line" | tr ' ' '\0' > "$C/options/seed-$n"
    printf '%s' "${line#* }" | tr ' ' '\0' > "$C/arguments/seed-$n"
done <<'LINES'
produce --pattern --out cam --size 640x360 --pix-fmt yuv420p --rate 30 --frames 100 --slots 8
produce -i in.mp4 -o cam -ss 00:00:01.5 -t 2 --loop -1 -re --threads 2 --strict -f mp4
produce --pattern --out cam --rate=max --fill once --wait-for 2 --sndhwm 10 --size-change-at 5:32x32,9:64x48 --live-source -q
produce -i - -o x --readrate 2.5 --copy --pix-fmt=rgba --size 1280x720
sink --in cam --null --live --wait 5 --frames 10 --verify --hold-us 0-2000 --stats-json --name s --rcvhwm 100
sink -i cam --record out.mp4 -f mp4 -c:v libx264 -b:v 2M --crf 23 -g 50 --preset fast --lossless
sink --in cam --framemd5 - --y4m out.y4m --raw out.raw --seq-log log --no-reattach --quiet --hold-us 500
filter --in cam --out gray --preset gray --live --slots 4 --wait 2 --wait-for 1 --threads 2
filter -i cam -o blur --vf gblur=sigma=4 --lossless --live-source -q
filter --in cam --out b --preset blend:logo.png
demo -i in.mp4 -o out.mp4 --frames 300 --sigma 4
ls --json
inspect cam other --json --snapshot shot.png --wait 1.5
top -d 0.5 -n 3 -b --json
bench transport --quick --frames 1000
bench decode -i in.mp4 --threads 4
clean
LINES
echo "seeds: $(find $C -name 'seed-*' | wc -l) seed inputs in $C"
