// libFuzzer target: the argument parser (Sources/framesrv/CommandLine/Arguments.swift).
//
// Input: arguments separated by NUL bytes, decoded as the C runtime hands them to Swift.
// Every way a command takes options runs over them; oracle: whatever is returned is inside
// the range asked for, and nothing traps.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzArguments(_ data: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let items = UnsafeBufferPointer(start: data, count: count).split(separator: 0, omittingEmptySubsequences: false)
        .map { String(decoding: $0, as: UTF8.self) }
    var args = Arguments(items, command: "fuzz")
    _ = args.wantsHelp
    _ = args.flag("--flag", "-f")
    _ = try? args.value("--value", "-v")
    if let n = try? args.int("--int", "-n", range: -3...1_000_000) { require(n >= -3 && n <= 1_000_000, "int \(n)") }
    if let n = try? args.int("--count", range: 1...Int.max) { require(n >= 1, "count \(n)") }
    if let d = try? args.double("--double", range: 0.01...86_400) { require(d.isFinite && d >= 0.01 && d <= 86_400, "double \(d)") }
    _ = args.positionals()
    _ = try? args.finish()
    for item in items {
        if let (w, h) = try? parseSize(item, option: "--size") { require((1...16384).contains(w) && (1...16384).contains(h), "size \(w)x\(h)") }
    }
    return 0
}

func require(_ ok: Bool, _ what: @autoclosure () -> String) {
    if !ok { fatalError("the argument parser returned \(what()) outside the range asked for") }
}
