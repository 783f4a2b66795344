import FrameWeb

/// `framesrv web`'s options: where to listen and the token.
struct WebOptions: CommandOptions {
    var address = WebAddress.defaultAddress
    /// nil: no token (loopback only); `.random`: generate one; `.given`: this one.
    var token: TokenChoice?

    enum TokenChoice: Equatable { case random, given(String) }

    init(parsing arguments: [String]) throws(UsageError) {
        var list = arguments
        guard list.filter({ $0 == "--token" || $0.hasPrefix("--token=") }).count <= 1 else {
            throw UsageError("--token given twice: say it once")
        }
        // `--token` alone (last, or before another option) asks for a random token.
        if let i = list.firstIndex(of: "--token"), i + 1 == list.count || list[i + 1].hasPrefix("-") {
            list.remove(at: i)
            token = .random
        }
        var args = Arguments(list, command: "web")
        if let listen = try args.value("--listen", "-l") {
            do { address = try WebAddress.parse(listen) } catch { throw UsageError(error.description) }
        }
        if let given = try args.value("--token") {
            guard given.count >= 8, given.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_.~".contains($0)) }) else {
                throw UsageError("--token must be at least 8 letters, digits or -_.~ (or --token alone for a random one)")
            }
            token = .given(given)
        }
        try args.finish()
    }
}
