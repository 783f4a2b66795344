// libFuzzer target: each command's option parsing.
//
// Input: a command name and its arguments, separated by NUL bytes. Compiled into the framesrv
// module (Fuzz/build.sh), so it reaches the commands' internal `XOptions(parsing:)` parsers,
// which are pure functions of the argument array (no I/O). Oracle: a parser returns or throws
// a UsageError; it never traps.
import FrameMedia
import FrameServer

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOptions(_ data: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let items = UnsafeBufferPointer(start: data, count: count).split(separator: 0, omittingEmptySubsequences: false)
        .map { String(decoding: $0, as: UTF8.self) }
    guard let name = items.first else { return 0 }
    let args = Array(items.dropFirst())
    // -- The parsers under test, one per command. --
    do {
        switch name {
        case "produce": _ = try ProduceOptions(parsing: args)
        case "sink": _ = try SinkOptions(parsing: args)
        case "filter": _ = try FilterOptions(parsing: args)
        case "demo": _ = try DemoOptions(parsing: args)
        case "ls": _ = try ListOptions(parsing: args)
        case "inspect": _ = try InspectOptions(parsing: args)
        case "top": _ = try TopOptions(parsing: args)
        case "clean": _ = try CleanOptions(parsing: args)
        case "bench": _ = try BenchOptions(parsing: args)
        case "ctl": _ = try CtlOptions(parsing: args)
        case "record": _ = try RecordCommandOptions(parsing: args)
        case "replay": _ = try ReplayCommandOptions(parsing: args)
        case "web": _ = try WebOptions(parsing: args)
        case "bridge":   // bridge send|recv ARGS (keygen takes only -o)
            if let role = args.first, role != "keygen" { _ = try BridgeOptions(role: role, parsing: Array(args.dropFirst())) }
            else { _ = try BridgeKeygenOptions(parsing: Array(args.dropFirst())) }
        case "run":   // the options, then the pipeline description's parser and graph (no process started)
            if !args.contains("-f"), !args.contains("--file") { _ = try RunCommand.parse(RunOptions(parsing: args).description) }
        default: break
        }
    } catch {}
    return 0
}
