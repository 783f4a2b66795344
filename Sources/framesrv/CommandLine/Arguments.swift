/// A usage mistake: printed as one line, exit status 2.
struct UsageError: Error, CustomStringConvertible {
    let description: String
    init(_ message: String) { description = message }
}

/// The arguments of one subcommand, consumed option by option.
///
/// Each command takes what it knows (`flag`, `value`, `int`, ...) and then calls
/// `finish()`, which rejects whatever is left, so a typo is an error, not ignored.
struct Arguments {
    private var items: [String]
    let command: String

    init(_ items: [String], command: String) {
        self.items = items
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
    mutating func value(_ names: String...) throws(UsageError) -> String? {
        var result: String?
        var i = 0
        while i < items.count {
            let item = items[i]
            if names.contains(item) {
                guard i + 1 < items.count else { throw UsageError("option \(item) needs a value (see 'framesrv \(command) --help')") }
                result = items[i + 1]
                items.removeSubrange(i...(i + 1))
            } else if let eq = item.firstIndex(of: "="), names.contains(String(item[..<eq])) {
                result = String(item[item.index(after: eq)...])
                items.remove(at: i)
            } else {
                i += 1
            }
        }
        return result
    }

    mutating func int(_ names: String..., range: ClosedRange<Int>) throws(UsageError) -> Int? {
        guard let name = names.first else { return nil }
        var raw: String?
        for n in names { if let v = try value(n) { raw = v } }
        guard let raw else { return nil }
        guard let v = Int(raw), range.contains(v) else {
            throw UsageError("\(name) must be an integer from \(range.lowerBound) to \(range.upperBound), not '\(raw)'")
        }
        return v
    }

    mutating func double(_ name: String, range: ClosedRange<Double>) throws(UsageError) -> Double? {
        guard let raw = try value(name) else { return nil }
        guard let v = Double(raw), v.isFinite, range.contains(v) else {
            throw UsageError("\(name) must be a number from \(range.lowerBound) to \(range.upperBound), not '\(raw)'")
        }
        return v
    }

    /// The remaining positional arguments (anything not starting with '-').
    mutating func positionals() -> [String] {
        let p = items.filter { !$0.hasPrefix("-") || $0 == "-" }
        items.removeAll { !$0.hasPrefix("-") || $0 == "-" }
        return p
    }

    /// Fails on anything no option claimed.
    func finish() throws(UsageError) {
        if let first = items.first {
            throw UsageError("unknown \(first.hasPrefix("-") ? "option" : "argument") '\(first)' for 'framesrv \(command)' (see 'framesrv \(command) --help')")
        }
    }
}

/// A subcommand: its name, a one-line summary, its help text and what it does.
protocol Command {
    static var name: String { get }
    static var summary: String { get }
    static var help: String { get }
    /// Runs the command; returns the exit status.
    static func run(_ args: inout Arguments) throws -> Int32
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
    let run: (inout Arguments) throws -> Int32
}

extension Command {
    static var entry: CommandEntry { CommandEntry(name: name, summary: summary, help: help, run: run) }
}
