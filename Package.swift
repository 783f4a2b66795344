// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "framesrv",
    products: [
        .library(name: "FrameServer", targets: ["FrameServer"]),
        .library(name: "FrameControl", targets: ["FrameControl"]),
        .library(name: "FrameMedia", targets: ["FrameMedia"]),
        .executable(name: "framesrv", targets: ["framesrv"]),
    ],
    targets: [
        // The shared-memory layout (the protocol's single source of truth) and the
        // GNU-only system calls Swift's Glibc module cannot see.
        .target(name: "CFrameServer"),
        // libzmq, from Debian's libzmq3-dev. No pkgConfig: zmq.h is in /usr/include and the module
        // map links zmq, while libzmq.pc's cflags (-isystem for krb5) make SwiftPM warn on every build.
        .systemLibrary(name: "CZMQ", providers: [.apt(["libzmq3-dev"])]),
        // FFmpeg's libavdevice, libavformat, libavcodec, libavutil and libswscale, from Debian's -dev packages.
        .systemLibrary(name: "CFFmpeg", pkgConfig: "libavcodec",
                       providers: [.apt(["libavdevice-dev", "libavformat-dev", "libavcodec-dev", "libavutil-dev", "libswscale-dev"])]),
        // libframesrv (clients/c, the protocol's C implementation), linked in for CUDA streams only: the Swift
        // library implements host streams itself; a CUDA stream's producer and consumer are libframesrv's, so
        // the CUDA half of the protocol (fences, NAME.cuda, device memory) has one implementation, in C.
        // Its CUDA loader is CFrameServer's (the same cuda.c), so src/cuda_loader.c stays out.
        .target(name: "CFrameServerClient", dependencies: ["CFrameServer", "CZMQ"], path: "clients/c",
                exclude: ["src/cuda_loader.c"], sources: ["src"], publicHeadersPath: "include"),
        // The protocol: producer and consumer sides, and the one ZeroMQ wrapper (package-visible), no FFmpeg.
        .target(name: "FrameServer", dependencies: ["CFrameServer", "CZMQ"]),
        // A stream's control socket (`framesrv ctl`): requests, replies, playback and link statuses, no FFmpeg.
        .target(name: "FrameControl", dependencies: ["FrameServer", "CZMQ"]),
        // Everything that touches FFmpeg, behind a Swift API: no FFmpeg pointer leaves it; the playback clock.
        .target(name: "FrameMedia", dependencies: ["FrameServer", "FrameControl", "CFFmpeg", "CFrameServer", "CFrameServerClient"]),
        // `framesrv record` / `replay`: the recording format (docs/RECORDING.md), writer, reader, snapshot ring.
        .target(name: "FrameRecording", dependencies: ["FrameServer", "FrameControl", "FrameMedia", "CFFmpeg"]),
        // Stages as child processes (each its own process group), for framesrv's commands.
        .target(name: "FrameProcess", dependencies: ["FrameServer"]),
        // `framesrv run`'s pipelines: parser, graph, stream names, --wait-for, start order, supervision.
        .target(name: "FramePipeline", dependencies: ["FrameServer", "FrameProcess"]),
        // `framesrv bridge`: streams between hosts over ZeroMQ TCP (CURVE), credits, reconnects; FrameRecording's packet codec.
        .target(name: "FrameBridge", dependencies: ["FrameServer", "FrameControl", "FrameRecording", "CZMQ"]),
        // What `top`, `ls` and `framesrv web` sample and print as JSON: one source for the CLI and the web view, no FFmpeg.
        .target(name: "FrameMonitor", dependencies: ["FrameServer", "FrameControl"]),
        // libmicrohttpd, from Debian's libmicrohttpd-dev: framesrv web's HTTP server.
        .systemLibrary(name: "CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        // `framesrv web`: the HTTP server, its page, API, token checks and live previews.
        .target(name: "FrameWeb", dependencies: ["FrameServer", "FrameControl", "FrameMedia", "FrameMonitor", "CMicroHTTPD"]),
        // `framesrv bench`: every benchmark, each next to its peers in the same run (peers/: iceoryx2's Python pair).
        .target(name: "FrameBench", dependencies: ["FrameServer", "FrameControl", "FrameMedia", "FrameProcess", "FrameBridge"], exclude: ["peers"]),
        // The command-line tool.
        .executableTarget(name: "framesrv", dependencies: ["FrameServer", "FrameControl", "FrameMedia", "FrameProcess", "FramePipeline", "FrameRecording",
                                                           "FrameMonitor", "FrameWeb", "FrameBridge", "FrameBench"]),
        // End-to-end suites: real framesrv processes (see Tests/README.md).
        .testTarget(name: "FrameServerTests", dependencies: ["FrameServer", "FrameControl", "FrameMedia", "FramePipeline", "CFrameServer", "framesrv", "FrameRecording", "FrameMonitor", "FrameWeb", "FrameBridge", "FrameBench"]),
        // FrameMedia's pieces on their own, in process (and FrameControl's FFmpeg-free parts against FFmpeg's).
        .testTarget(name: "FrameMediaTests", dependencies: ["FrameMedia", "FrameControl", "FrameServer"]),
    ]
)
