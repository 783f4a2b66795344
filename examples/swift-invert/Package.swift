// swift-tools-version:6.0
// swift-invert: a filter stage of your own, in Swift, on framesrv's FrameServer library
// (see Sources/swift-invert/main.swift). Build it with `swift build` in this directory.
import PackageDescription

let package = Package(
    name: "swift-invert",
    dependencies: [
        // The framesrv repository this example lives in (its FrameServer library: the
        // protocol only, no FFmpeg).
        .package(path: "../.."),
    ],
    targets: [
        .executableTarget(name: "swift-invert", dependencies: [.product(name: "FrameServer", package: "framesrv")]),
    ]
)
