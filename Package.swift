// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "framesrv",
    products: [
        .library(name: "FrameServer", targets: ["FrameServer"]),
        .executable(name: "framesrv", targets: ["framesrv"]),
    ],
    targets: [
        // The shared-memory layout (the protocol's single source of truth) and the
        // GNU-only system calls Swift's Glibc module cannot see.
        .target(name: "CFrameServer"),
        // libzmq, from Debian's libzmq3-dev.
        .systemLibrary(name: "CZMQ", pkgConfig: "libzmq", providers: [.apt(["libzmq3-dev"])]),
        // The protocol: producer and consumer sides, no FFmpeg.
        .target(name: "FrameServer", dependencies: ["CFrameServer", "CZMQ"]),
        // The command-line tool.
        .executableTarget(name: "framesrv", dependencies: ["FrameServer"]),
        .testTarget(name: "FrameServerTests", dependencies: ["FrameServer", "CFrameServer", "framesrv"]),
    ]
)
