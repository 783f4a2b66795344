// libFuzzer target: each command's option parsing.
//
// Input: a command name and its arguments, separated by NUL bytes. Compiled into the framesrv
// module (Fuzz/build.sh), so it reaches the commands' internal parsers.
//
// Today the commands parse inside `run`, which then does the work, so `parseToday` replays each
// command's options (the same Arguments calls, names and ranges as its `run`) and the value
// parsers it uses. Once every command parses into an `XOptions(parsing:)`, the switch becomes
// one line per command: `case "sink": _ = try SinkOptions(parsing: &args)`.
import FrameMedia
import FrameServer

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOptions(_ data: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let items = UnsafeBufferPointer(start: data, count: count).split(separator: 0, omittingEmptySubsequences: false)
        .map { String(decoding: $0, as: UTF8.self) }
    guard let name = items.first else { return 0 }
    var args = Arguments(Array(items.dropFirst()), command: name)
    // -- The parsers under test: adapt these lines when they change. --
    do { try parseToday(name, &args) } catch {}
    return 0
}

func parseToday(_ name: String, _ args: inout Arguments) throws {
    switch name {
    case "produce":
        _ = args.flag("--pattern"); _ = try args.value("--input", "-i"); _ = try args.value("-f", "--format")
        _ = try args.int("--threads", range: 0...256); _ = try args.value("--out", "-o")
        _ = try parseSize(try args.value("--size", "-s") ?? "640x360", option: "--size")
        if let f = try args.value("--pix-fmt", "-pix_fmt") { _ = PixelFormat(name: f) }
        if let t = try args.value("-ss") { _ = MediaInputOptions.parseTime(t) }
        if let t = try args.value("-t") { _ = MediaInputOptions.parseTime(t) }
        _ = try args.int("--loop", "-stream_loop", range: -1...Int(Int32.max)); _ = args.flag("-re", "--re")
        _ = try args.double("--readrate", range: 0.001...1000); _ = try args.value("--rate", "-r")
        _ = try args.int("--frames", "-frames", range: 1...Int(Int32.max)); _ = try args.int("--slots", range: 1...64)
        _ = args.flag("--live-source"); _ = args.flag("--copy"); _ = try args.int("--wait-for", range: 0...63)
        _ = try args.value("--fill"); _ = try args.int("--sndhwm", range: 1...1_000_000)
        _ = try ProduceCommand.parseSizeChanges(try args.value("--size-change-at"))
        _ = args.flag("--quiet", "-q"); _ = args.flag("--strict")
    case "sink":
        for v in ["--in", "--framemd5", "--y4m", "--raw", "--record", "--preset", "--seq-log", "--name"] { _ = try args.value(v) }
        _ = try args.value("-i"); _ = try args.value("-f", "--format"); _ = try args.value("-c:v", "-vcodec", "--codec")
        if let b = try args.value("-b:v", "--bitrate") { _ = try SinkCommand.parseBitRate(b) }
        _ = try args.double("--crf", range: 0...63); _ = try args.int("-g", "--gop", range: 1...1_000_000)
        _ = try args.double("--wait", range: 0...1e9); _ = try args.int("--frames", range: 1...Int.max)
        _ = try SinkCommand.parseHold(try args.value("--hold-us")); _ = try args.int("--rcvhwm", range: 1...1_000_000)
        for f in ["--null", "--live", "--lossless", "--verify", "--stats-json", "--no-reattach", "--quiet"] { _ = args.flag(f) }
    case "filter":
        _ = try args.value("--in", "-i"); _ = try args.value("--out", "-o"); _ = try args.value("--vf", "-vf")
        if let p = try args.value("--preset") { _ = try FilterCommand.expand(preset: p) }
        for f in ["--live", "--lossless", "--live-source", "--quiet"] { _ = args.flag(f) }
        _ = try args.int("--slots", range: 1...64); _ = try args.double("--wait", range: 0...1e9)
        _ = try args.int("--wait-for", range: 0...63); _ = try args.int("--threads", range: 0...256)
    case "demo":
        _ = try args.value("-i", "--input"); _ = try args.value("-o", "--output")
        _ = try args.int("--frames", range: 1...10_000_000); _ = try args.double("--sigma", range: 0.1...100)
    case "ls": _ = args.flag("--json")
    case "inspect":
        _ = args.flag("--json"); _ = try args.value("--snapshot"); _ = try args.double("--wait", range: 0...86400)
        _ = args.positionals()
    case "top":
        _ = try args.double("-d", range: 0.01...86_400); _ = try args.int("-n", range: 1...Int.max)
        _ = args.flag("-b", "--batch"); _ = args.flag("--json")
    case "bench":
        _ = args.flag("--quick"); _ = try args.int("--frames", range: 100...10_000_000)
        _ = try args.value("--input", "-i"); _ = try args.int("--threads", range: 0...256); _ = args.positionals()
    case "clean": break
    default: return
    }
    try args.finish()
}
