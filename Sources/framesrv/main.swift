import FrameProcess
import FrameServer
import Glibc

/// Every subcommand, in the order `framesrv --help` lists them.
let commands: [CommandEntry] = [
    DemoCommand.entry, ProduceCommand.entry, SinkCommand.entry, FilterCommand.entry, ListCommand.entry, InspectCommand.entry,
    TopCommand.entry, CtlCommand.entry, CleanCommand.entry, RunCommand.entry, BenchCommand.entry, RecordCommand.entry, ReplayCommand.entry,
    BridgeCommand.entry, WebCommand.entry,
]

func rootHelp(_ commands: [CommandEntry]) -> String {
    var s = """
    framesrv: a frame server. Producers put video frames into reference-counted shared-memory
    slots and announce them over ZeroMQ; consumers in other processes read them in place.

    usage: framesrv <command> [options]    (framesrv <command> --help for its options)
           framesrv --version

    commands:

    """
    for c in commands { s += "  " + c.name.padding(8) + c.summary + "\n" }
    s += "\nruntime directory: \(RuntimeDirectory.defaultPath) (set FRAMESRV_DIR to change it)\n"
    return s
}

let argv = Array(CommandLine.arguments.dropFirst())
guard let name = argv.first else {
    // No command is a usage mistake: the usage goes to standard error, as the one error line would.
    var text = rootHelp(commands)
    text.withUTF8 { _ = try? writeAll(2, UnsafeRawBufferPointer($0)) }
    exit(ExitStatus.usage.rawValue)
}
guard name != "--help", name != "-h", name != "help" else {
    print(rootHelp(commands), terminator: "")
    exit(ExitStatus.success.rawValue)
}
guard name != "--version", name != "-V", name != "version" else {
    print(FrameServerVersion.line)
    exit(ExitStatus.success.rawValue)
}
guard let command = commands.first(where: { $0.name == name }) else {
    fail("unknown command '\(name)'; commands are: \(commands.map(\.name).joined(separator: ", "))", status: .usage)
}
// A path that is not UTF-8 would reach the library repaired (U+FFFD) and be reported as
// missing: refuse it as what it is.
for i in 1..<Int(CommandLine.argc) {
    guard let raw = CommandLine.unsafeArgv[i], String(validatingCString: raw) == nil else { continue }
    fail("argument \(i) ('\(String(cString: raw))') is not valid UTF-8: framesrv takes UTF-8 names and paths", status: .usage)
}
dieWithParent()
// A producer needs a descriptor per consumer connection, pidfd and pool: start with the hard limit.
_ = try? raiseFileDescriptorLimit()
let arguments = Array(argv.dropFirst())
if Arguments(arguments, command: name).wantsHelp {
    print(command.help)
    exit(ExitStatus.success.rawValue)
}
let status: ExitStatus
do {
    status = try command.run(arguments)
} catch let e as UsageError {
    fail(e.description, status: .usage)
} catch let e as CommandError {
    fail(e.description, status: e.status)
} catch {
    fail("\(error)", status: .failed)   // each operation's error says what to do in its description
}
exit(status.rawValue)
