import FrameControl
import FrameMedia

/// `framesrv ctl`'s options: a stream, one control and `--json`. `seek -5` (back 5 s) is a
/// control's argument, not an option.
struct CtlOptions: CommandOptions {
    var stream: String
    var request: ControlRequest
    var json = false

    init(parsing arguments: [String]) throws(UsageError) {
        var list = arguments
        // A relative seek backwards reads like an option: take it before the options are parsed.
        var backwards: String?
        if let i = list.firstIndex(of: "seek"), i + 1 < list.count, list[i + 1].hasPrefix("-"),
           let next = list[i + 1].dropFirst().first, next.isNumber {
            backwards = list.remove(at: i + 1)
        }
        var args = Arguments(list, command: "ctl")
        json = args.flag("--json")
        var words = args.positionals()
        try args.finish()
        if let backwards { words.append(backwards) }
        guard words.count >= 2 else {
            throw UsageError("say which stream and what to do: framesrv ctl NAME pause|resume|toggle|seek T|rate X|step [N]|status")
        }
        stream = words[0]
        do { request = try ControlRequest.parse(words.dropFirst().joined(separator: " ")) } catch {
            throw UsageError(error.description)
        }
        guard !json || request == .status else { throw UsageError("--json goes with status") }
    }
}
