import Foundation
import FrameControl
import FrameServer
@testable import framesrv
import Testing

/// Every option that takes a value, of record, replay, ctl, run, bridge and web (and produce,
/// sink, filter), read from the command's own --help, given 0, -1, huge numbers, NaN,
/// infinities and a word (issue 27): each parser returns or throws a UsageError; none traps
/// (a trap here ends the test runner: the run's failure). In process, through the parsers
/// the commands call (pure functions of their arguments).
@Suite struct HostileOptionTests {
    static let values = ["0", "-1", "-0", "99999999999999999999", "9223372036854775807", "-9223372036854775808",
                         "1e308", "-1e308", "nan", "NaN", "inf", "-inf", "0x7fffffff", "1/0", "0/0", "x", "", "1:99:99", "1ß", "2ﬁ"]

    /// The options of `help` that take a value: `-x VALUE` / `--name VALUE` at the start of a line.
    static func valueOptions(_ help: String) -> [String] {
        var found: [String] = []
        for line in help.split(separator: "\n") {
            let words = line.split(separator: " ", omittingEmptySubsequences: true)
            guard words.count >= 2, words[0].hasPrefix("-"), !words[0].hasPrefix("---") else { continue }
            let option = String(words[0].split(separator: ",").first ?? words[0])
            let value = words[1]
            guard value.first?.isUppercase == true || value.hasPrefix("[") else { continue }
            if !found.contains(option) { found.append(option) }
        }
        return found
    }

    /// Each command: its help and a parse of `base` + the hostile option.
    static var commands: [(name: String, help: String, base: [String], parse: ([String]) throws -> Void)] { [
        ("record", RecordCommand.help, ["--in", "a", "-o", "x.nut"], { _ = try RecordCommandOptions(parsing: $0) }),
        ("replay", ReplayCommand.help, ["rec.nut"], { _ = try ReplayCommandOptions(parsing: $0) }),
        ("run", RunCommand.help, ["produce --pattern ! sink --null"], { _ = try RunCommand.parse(RunOptions(parsing: $0).description) }),
        ("web", WebCommand.help, [], { _ = try WebOptions(parsing: $0) }),
        ("bridge send", BridgeCommand.help, ["--in", "a", "--to", "tcp://127.0.0.1:5555", "--insecure"],
         { _ = try BridgeOptions(role: "send", parsing: $0) }),
        ("bridge recv", BridgeCommand.help, ["--out", "b", "--listen", "tcp://127.0.0.1:5555", "--insecure"],
         { _ = try BridgeOptions(role: "recv", parsing: $0) }),
        ("produce", ProduceCommand.help, ["--pattern", "--out", "p"], { _ = try ProduceOptions(parsing: $0) }),
        ("produce -i", ProduceCommand.help, ["-i", "a.mp4", "--out", "p"], { _ = try ProduceOptions(parsing: $0) }),
        ("sink", SinkCommand.help, ["--in", "a", "--record", "o.mp4"], { _ = try SinkOptions(parsing: $0) }),
        ("filter", FilterCommand.help, ["--in", "a", "--out", "b", "--vf", "null"], { _ = try FilterOptions(parsing: $0) }),
    ] }

    @Test func everyValueOptionTakesHostileValuesWithoutATrap() throws {
        var tried = 0
        for command in Self.commands {
            let options = Self.valueOptions(command.help)
            #expect(!options.isEmpty, "\(command.name): no option with a value found in its help")
            for option in options {
                for value in Self.values {
                    do { try command.parse(command.base + [option, value]) } catch is UsageError {} catch {
                        Issue.record("\(command.name) \(option) \(value): \(error), not a usage error")
                    }
                    tried += 1
                }
            }
        }
        #expect(tried > 1000, "only \(tried) command lines")
    }

    /// ctl's verbs take numbers too: each hostile value is refused in one line or taken.
    @Test func controlVerbsTakeHostileValuesWithoutATrap() {
        for verb in ["seek", "seek +", "seek -", "rate", "step"] {
            for value in Self.values {
                let text = verb.hasSuffix(" ") || verb.hasSuffix("+") || verb.hasSuffix("-") ? verb + value : verb + " " + value
                do { _ = try ControlRequest.parse(text) } catch {}
                do { _ = try CtlOptions(parsing: ["film"] + text.split(separator: " ").map(String.init)) } catch {}
            }
        }
    }
}
