/// A usage mistake: printed as one line, exit status 2.
struct UsageError: Error, CustomStringConvertible, Equatable {
    let description: String
    init(_ message: String) { description = message }
}

/// The arguments of one subcommand, consumed option by option.
///
/// Each command's options type takes what it knows (`flag`, `value`, `int`, ...) and then
/// calls `finish()`, which rejects whatever is left, so a typo is an error, not ignored.
/// A pure value: parsing reads nothing but the array, so a fuzzer can drive every
/// command's `init(parsing:)`.
struct Arguments {
    private var items: [String]
    /// What follows a lone `--`: positional however it is spelled (`framesrv inspect -- -x`).
    private var afterDashes: [String]
    let command: String

    init(_ arguments: [String], command: String) {
        if let dashes = arguments.firstIndex(of: "--") {
            items = Array(arguments[..<dashes])
            afterDashes = Array(arguments[(dashes + 1)...])
        } else {
            items = arguments
            afterDashes = []
        }
        self.command = command
    }

    var wantsHelp: Bool { items.contains("--help") || items.contains("-h") }

    /// True if any of `names` is present (and removes it).
    mutating func flag(_ names: String...) -> Bool {
        var found = false
        items.removeAll { item in
            if names.contains(item) { found = true; return true }
            return false
        }
        return found
    }

    /// The value after `name` (`--size 64x64` or `--size=64x64`), nil if absent.
    /// Given twice (under any of its names) is a usage error: `--out x --out y` is ambiguous.
    mutating func value(_ names: String...) throws(UsageError) -> String? {
        try value(names)
    }

    mutating func value(_ names: [String]) throws(UsageError) -> String? {
        var result: (option: String, value: String)?
        var i = 0
        while i < items.count {
            let item = items[i]
            var found: (option: String, value: String)?
            if names.contains(item) {
                guard i + 1 < items.count else { throw UsageError("option \(item) needs a value (see 'framesrv \(command) --help')") }
                found = (item, items[i + 1])
                items.removeSubrange(i...(i + 1))
            } else if let eq = item.firstIndex(of: "="), names.contains(String(item[..<eq])) {
                found = (String(item[..<eq]), String(item[item.index(after: eq)...]))
                items.remove(at: i)
            } else {
                i += 1
            }
            if let found {
                if let result {
                    throw UsageError("\(result.option) given twice ('\(result.value)' and '\(found.value)'): say it once")
                }
                result = found
            }
        }
        return result?.value
    }

    mutating func int(_ names: String..., range: ClosedRange<Int>) throws(UsageError) -> Int? {
        guard let name = names.first, let raw = try value(names) else { return nil }
        guard let v = Int(raw), range.contains(v) else {
            throw UsageError("\(name) must be an integer from \(range.lowerBound) to \(range.upperBound), not '\(raw)'")
        }
        return v
    }

    mutating func double(_ names: String..., range: ClosedRange<Double>) throws(UsageError) -> Double? {
        guard let name = names.first, let raw = try value(names) else { return nil }
        guard let v = Double(raw), v.isFinite, range.contains(v) else {
            throw UsageError("\(name) must be a number from \(range.lowerBound) to \(range.upperBound), not '\(raw)'")
        }
        return v
    }

    /// A byte count: digits with an optional K, M, G or T (powers of 1024: 256M, 1G), from
    /// `range` (in bytes); nil if absent.
    mutating func bytes(_ names: String..., range: ClosedRange<Int64>) throws(UsageError) -> Int64? {
        guard let name = names.first, let raw = try value(names) else { return nil }
        let units: [Character: Int64] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40]
        let unit = raw.last.flatMap { $0.isASCII ? units[Character($0.uppercased())] : nil }
        let digits = unit == nil ? Substring(raw) : raw.dropLast()
        guard digits.allSatisfy(\.isASCII), let n = Int64(digits), n >= 0 else {
            throw UsageError("\(name) must be a size in bytes, with K, M, G or T for powers of 1024 (256M), not '\(raw)'")
        }
        let (v, overflow) = n.multipliedReportingOverflow(by: unit ?? 1)
        guard !overflow, range.contains(v) else {
            throw UsageError("\(name) must be from \(range.lowerBound) to \(range.upperBound) bytes, not '\(raw)'")
        }
        return v
    }

    /// The name of a stream to create: refused if it starts with '-', which would read as an option.
    mutating func newStreamName(_ names: String...) throws(UsageError) -> String? {
        guard let name = try value(names) else { return nil }
        guard !name.hasPrefix("-") else {
            throw UsageError("stream name '\(name)' starts with '-': it would read as an option; choose another")
        }
        return name
    }

    /// The remaining positional arguments (anything not starting with '-', and all after `--`).
    mutating func positionals() -> [String] {
        let p = items.filter { !$0.hasPrefix("-") || $0 == "-" }
        items.removeAll { !$0.hasPrefix("-") || $0 == "-" }
        defer { afterDashes = [] }
        return p + afterDashes
    }

    /// Fails on anything no option claimed.
    func finish() throws(UsageError) {
        if let first = items.first ?? afterDashes.first {
            throw UsageError("unknown \(first.hasPrefix("-") ? "option" : "argument") '\(first)' for 'framesrv \(command)' (see 'framesrv \(command) --help')")
        }
    }
}

/// A command's options, parsed and validated from its arguments alone (no I/O), in the
/// shape of swift-argument-parser's `ParsableArguments`.
protocol CommandOptions {
    init(parsing arguments: [String]) throws(UsageError)
}

/// A subcommand: its name, a one-line summary, its help text and what it does.
protocol Command {
    associatedtype Options: CommandOptions
    static var name: String { get }
    static var summary: String { get }
    static var help: String { get }
    /// Runs the command; returns the exit status (a failure it throws is main's one error line).
    static func run(_ options: Options) throws -> ExitStatus
}

/// Parses `WxH`.
func parseSize(_ s: String, option: String) throws(UsageError) -> (Int, Int) {
    let parts = s.lowercased().split(separator: "x")
    guard parts.count == 2, let w = Int(parts[0]), let h = Int(parts[1]), w > 0, h > 0, w <= 16384, h <= 16384 else {
        throw UsageError("\(option) must look like WIDTHxHEIGHT (for example 1280x720), not '\(s)'")
    }
    return (w, h)
}

/// A command as the root command lists and runs it.
struct CommandEntry {
    let name: String
    let summary: String
    let help: String
    /// Parses the arguments (a usage error before any work) and runs the command.
    let run: ([String]) throws -> ExitStatus
}

extension Command {
    static var entry: CommandEntry {
        CommandEntry(name: name, summary: summary, help: help) { arguments in try run(try Options(parsing: arguments)) }
    }
}
