// swift-tools-version:6.0
// swift-invert: a filter stage of your own, in Swift, on framesrv's FrameServer library
// (see Sources/swift-invert/main.swift). Build it with `swift build` in this directory.
import PackageDescription

// The framesrv repository this example lives in, two directories up. SwiftPM names a
// dependency given by path after its directory (a clone may not be called "framesrv").
let repository = String(Context.packageDirectory.split(separator: "/").dropLast(2).last ?? "framesrv")

let package = Package(
    name: "swift-invert",
    dependencies: [
        .package(path: "../.."),
    ],
    targets: [
        // FrameServer is the protocol only (no FFmpeg).
        .executableTarget(name: "swift-invert", dependencies: [.product(name: "FrameServer", package: repository)]),
    ]
)
