#!/usr/bin/env bash
# Builds the libFuzzer targets into $FUZZ_BUILD (default .build-fuzz) with swiftc directly:
# FrameServer, FrameControl, FrameMedia, ... as static libraries compiled with -enable-testing (so a target
# can `@testable import` them and reach internal validators), every Swift and C file with
# coverage (-sanitize=fuzzer) and AddressSanitizer. SwiftPM's --sanitize=fuzzer would link
# libFuzzer's main() into the framesrv executable and the test bundle too; this keeps the
# package untouched.
#
#   Fuzz/build.sh            # all targets
#   Fuzz/build.sh header     # one target
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/opt/swift/usr/bin:$PATH
ROOT=$PWD
OUT=${FUZZ_BUILD:-$ROOT/.build-fuzz}
SAN=(-sanitize=fuzzer,address -use-ld=lld)
SWIFTC=(swiftc -O -g -parse-as-library -package-name framesrv "${SAN[@]}")
mkdir -p "$OUT/include/CFrameServer" "$OUT/include/CFrameServerClient"

# CFrameServer: SwiftPM generates this module map from the include/ directory; so do we.
cat > "$OUT/include/CFrameServer/module.modulemap" <<MAP
module CFrameServer {
    header "$ROOT/Sources/CFrameServer/include/CFrameServer.h"
    header "$ROOT/Sources/CFrameServer/include/CFrameServerCUDA.h"
    export *
}
MAP
# CFrameServerClient: libframesrv (clients/c), which FrameMedia's CUDA streams use.
cat > "$OUT/include/CFrameServerClient/module.modulemap" <<MAP
module CFrameServerClient {
    header "$ROOT/clients/c/include/framesrv.h"
    export *
}
MAP
FFMPEG_CFLAGS=$(pkg-config --cflags libavcodec libavformat libavdevice libavutil libswscale libavfilter)
FFMPEG_LIBS=$(pkg-config --libs libavcodec libavformat libavdevice libavutil libswscale libavfilter)
INCLUDES=(-I "$OUT" -I "$OUT/include/CFrameServer" -I "$OUT/include/CFrameServerClient" -I Sources/CZMQ -I Sources/CFFmpeg -I Sources/CMicroHTTPD)
for f in $FFMPEG_CFLAGS; do INCLUDES+=(-Xcc "$f"); done

# Rebuilds $1 only when one of the other arguments is newer.
stale() { local out=$1; shift; [[ ! -e $out ]] || [[ -n $(find "$@" -newer "$out" -print -quit) ]]; }

# A library is rebuilt when its sources changed, or when a library built before it in this run
# (they come in dependency order) is newer: its module interface may have changed (a library
# compiled against an older FrameRecording left an undefined symbol at the options target's link).
BUILT=()
library() { # name, sources...
    local name=$1; shift
    if stale "$OUT/lib$name.a" "$@" "${BUILT[@]}" Fuzz/build.sh; then
        echo "fuzz: compiling $name"
        "${SWIFTC[@]}" -enable-testing -module-name "$name" -emit-module -emit-module-path "$OUT/$name.swiftmodule" \
            -emit-library -static -o "$OUT/lib$name.a" "${INCLUDES[@]}" "$@"
    fi
    BUILT+=("$OUT/lib$name.a")
}

# shim.o: CFrameServer's C (shim.c, the CUDA loader) and libframesrv's (clients/c/src but its own
# copy of the loader), as SwiftPM links them into framesrv.
if stale "$OUT/shim.o" Sources/CFrameServer clients/c/src clients/c/include Fuzz/build.sh; then
    clang -g -O2 -fsanitize=fuzzer-no-link,address -I Sources/CFrameServer/include \
        -c Sources/CFrameServer/shim.c -o "$OUT/shim-only.o"
    clang -g -O2 -fsanitize=fuzzer-no-link,address -I Sources/CFrameServer/include \
        -c Sources/CFrameServer/cuda.c -o "$OUT/cuda.o"
    client=()
    for c in clients/c/src/*.c; do
        [[ $c == */cuda_loader.c ]] && continue
        clang -g -O2 -fsanitize=fuzzer-no-link,address -fvisibility=hidden -I clients/c/include -I clients/c/src \
            -I Sources/CFrameServer/include -c "$c" -o "$OUT/client-$(basename "$c" .c).o"
        client+=("$OUT/client-$(basename "$c" .c).o")
    done
    ld -r "$OUT/shim-only.o" "$OUT/cuda.o" "${client[@]}" -o "$OUT/shim.o"
fi
mapfile -t SERVER < <(find Sources/FrameServer -name '*.swift' | sort)
mapfile -t CONTROL < <(find Sources/FrameControl -name '*.swift' | sort)
mapfile -t MEDIA < <(find Sources/FrameMedia -name '*.swift' | sort)
mapfile -t PROCESS < <(find Sources/FrameProcess -name '*.swift' | sort)
mapfile -t PIPELINE < <(find Sources/FramePipeline -name '*.swift' | sort)
mapfile -t RECORDING < <(find Sources/FrameRecording -name '*.swift' | sort)
mapfile -t MONITOR < <(find Sources/FrameMonitor -name '*.swift' | sort)
mapfile -t WEB < <(find Sources/FrameWeb -name '*.swift' | sort)
mapfile -t BRIDGE < <(find Sources/FrameBridge -name '*.swift' | sort)
mapfile -t BENCH < <(find Sources/FrameBench -name '*.swift' | sort)
mapfile -t CLI < <(find Sources/framesrv -name '*.swift' ! -name main.swift | sort)
mapfile -t ARGS < <(printf "%s\n" Sources/framesrv/CommandLine/Arguments.swift Sources/framesrv/CommandLine/ExitStatus.swift)

target() { # name (links against FrameServer)
    local name=$1 src=Fuzz/Targets/$1.swift
    if stale "$OUT/fuzz-$name" "$src" "$OUT/libFrameServer.a" Fuzz/build.sh; then
        echo "fuzz: linking fuzz-$name"
        "${SWIFTC[@]}" -module-name "fuzz_$name" "${INCLUDES[@]}" "$src" "$OUT/libFrameServer.a" "$OUT/shim.o" -lzmq \
            -o "$OUT/fuzz-$name"
    fi
}
# The options target is compiled into the framesrv module itself (internal access to the commands),
# with every library the executable links (Package.swift's framesrv target).
CLI_LIBS=(FrameBench FrameWeb FrameBridge FrameMonitor FrameRecording FramePipeline FrameProcess FrameMedia FrameControl FrameServer)
options() {
    local libs=()
    for l in "${CLI_LIBS[@]}"; do libs+=("$OUT/lib$l.a"); done
    if stale "$OUT/fuzz-options" Fuzz/Targets/options.swift "${CLI[@]}" "${libs[@]}" Fuzz/build.sh; then
        echo "fuzz: linking fuzz-options"
        "${SWIFTC[@]}" -module-name framesrv "${INCLUDES[@]}" Fuzz/Targets/options.swift "${CLI[@]}" \
            "${libs[@]}" "$OUT/shim.o" -lzmq -lmicrohttpd $FFMPEG_LIBS -o "$OUT/fuzz-options"
    fi
}
arguments() {
    if stale "$OUT/fuzz-arguments" Fuzz/Targets/arguments.swift "${ARGS[@]}" Fuzz/build.sh; then
        echo "fuzz: linking fuzz-arguments"
        "${SWIFTC[@]}" -module-name framesrv Fuzz/Targets/arguments.swift "${ARGS[@]}" -o "$OUT/fuzz-arguments"
    fi
}

# Targets that link the media libraries (FFmpeg) besides FrameServer: the clock, the recording.
media_target() { # name, libraries...
    local name=$1; shift
    local libs=()
    for l in "$@"; do libs+=("$OUT/lib$l.a"); done
    if stale "$OUT/fuzz-$name" "Fuzz/Targets/$name.swift" "${libs[@]}" Fuzz/build.sh; then
        echo "fuzz: linking fuzz-$name"
        "${SWIFTC[@]}" -module-name "fuzz_$name" "${INCLUDES[@]}" "Fuzz/Targets/$name.swift" "${libs[@]}" "$OUT/shim.o" \
            -lzmq $FFMPEG_LIBS -o "$OUT/fuzz-$name"
    fi
}

ALL=(control header announcement arguments options request record)
WANT=("${@:-${ALL[@]}}")
for t in "${WANT[@]}"; do
    case $t in
        control|header|announcement)
            library FrameServer "${SERVER[@]}"
            target "$t" ;;
        arguments) arguments ;;
        options)
            library FrameServer "${SERVER[@]}"
            library FrameControl "${CONTROL[@]}"
            library FrameMedia "${MEDIA[@]}"
            library FrameProcess "${PROCESS[@]}"
            library FramePipeline "${PIPELINE[@]}"
            library FrameRecording "${RECORDING[@]}"
            library FrameMonitor "${MONITOR[@]}"
            library FrameWeb "${WEB[@]}"
            library FrameBridge "${BRIDGE[@]}"
            library FrameBench "${BENCH[@]}"
            options ;;
        request)
            library FrameServer "${SERVER[@]}"
            library FrameControl "${CONTROL[@]}"
            library FrameMedia "${MEDIA[@]}"
            media_target request FrameMedia FrameControl FrameServer ;;
        record)
            library FrameServer "${SERVER[@]}"
            library FrameControl "${CONTROL[@]}"
            library FrameMedia "${MEDIA[@]}"
            library FrameRecording "${RECORDING[@]}"
            media_target record FrameRecording FrameMedia FrameControl FrameServer ;;
        *) echo "fuzz: unknown target '$t' (targets: ${ALL[*]})" >&2; exit 2 ;;
    esac
done
