#!/usr/bin/env bash
# Runs the README's quick tour (the ```sh block under "## A quick tour") top to bottom as
# one bash script, as a user pasting it would, then checks what it wrote. It runs from the
# repository root with a scratch HOME (so `make install PREFIX=~/.local` and the Python
# package land there), TMPDIR and FRAMESRV_DIR, all removed at the end.
#
#   scripts/tour.sh                                  # make install builds a release binary
#   FRAMESRV_BIN=.build/debug/framesrv scripts/tour.sh   # installs that binary instead
#
# Fails when a line fails, when an output is missing, when the runtime directory is not
# empty at the end (a .lock or stream file left behind), or after TOUR_TIMEOUT seconds (400).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
block=$(awk '/^## A quick tour/ { t = 1 } t && /^```sh/ { on = 1; next } on && /^```/ { exit } on { print }' "$ROOT/README.md")
[ -n "$block" ] || { echo "tour: no tour block under '## A quick tour' in README.md" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/framesrv-tour.XXXXXX")
tour=""
# The tour runs in its own session (setsid): every process it started, background stages
# included, is stopped with its process group, whatever way this script ends.
cleanup() {
    [ -z "$tour" ] || kill -KILL -- "-$tour" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$work/home" "$work/tmp" "$work/run"
# pyenv finds its versions through HOME unless PYENV_ROOT says where.
if [ -z "${PYENV_ROOT:-}" ] && [ -d "$HOME/.pyenv" ]; then export PYENV_ROOT=$HOME/.pyenv; fi
export HOME=$work/home TMPDIR=$work/tmp FRAMESRV_DIR=$work/run
[ -z "${FRAMESRV_BIN:-}" ] || export FRAMESRV_BIN=$(cd "$ROOT" && realpath "$FRAMESRV_BIN")

cd "$ROOT"
checks='
for f in film.md5 run.md5 gray.mp4 film.nut replay.md5 soft.mp4 soft.mkv edges.mp4 now.png framesrv-demo.mp4; do
    [ -s "$f" ] || { echo "tour: $f was not written" >&2; exit 1; }
done
left=$(ls -A "$FRAMESRV_DIR")
[ -z "$left" ] || { echo "tour: left in the runtime directory: $left" >&2; exit 1; }
man -w ~/.local/share/man/man1/framesrv.1 >/dev/null 2>&1 || [ -s ~/.local/share/man/man1/framesrv.1 ] \
    || { echo "tour: no man page installed" >&2; exit 1; }
echo "tour: passed"
'
setsid bash -euo pipefail -c "$block
$checks" &
tour=$!
# A line that never ends fails the tour after TOUR_TIMEOUT seconds instead of hanging it.
limit=${TOUR_TIMEOUT:-400}
( for ((n = 0; n < limit; n++)); do sleep 1; kill -0 "$tour" 2>/dev/null || exit 0; done
  echo "tour: still running after $limit s: stopped" >&2; kill -KILL -- "-$tour" ) &
watchdog=$!
status=0
wait "$tour" || status=$?
kill "$watchdog" 2>/dev/null || true
wait "$watchdog" 2>/dev/null || true
exit "$status"
