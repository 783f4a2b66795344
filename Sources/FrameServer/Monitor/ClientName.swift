/// The names consumers give themselves in `ls`/`top`/`inspect`: their role, as a user
/// would say it (`filter blur=4 -> soft`, `sink record out.mp4`), unless told `--name`.
/// The shared field holds 31 bytes; `fit` shortens the middle of a longer name.
public enum ClientName {
    /// Bytes a name may have (`fs_consumer.name` without its NUL).
    public static let maxBytes = 31

    /// A filter reading with `what` (its preset, or its --vf graph) and writing stream `out`.
    public static func filter(_ what: String, out: String) -> String { fit("filter \(what) -> \(out)") }

    /// A producer reading `input` (shown by its last path component; a device as given), or
    /// the test pattern when nil.
    public static func producer(input: String?) -> String {
        guard let input else { return "produce pattern" }
        return fit("produce " + (input.split(separator: "/").last.map(String.init) ?? input))
    }

    /// A sink and its outputs, each as (kind, path): `sink record out.mp4`, `sink null`,
    /// `sink framemd5 - +1` (one more output). Paths are shown by their last component.
    public static func sink(_ outputs: [(kind: String, path: String)]) -> String {
        guard let first = outputs.first else { return "sink null" }
        let file = first.path.split(separator: "/").last.map(String.init) ?? first.path
        return fit("sink \(first.kind) \(file)" + (outputs.count > 1 ? " +\(outputs.count - 1)" : ""))
    }

    /// `name` cut to `maxBytes` bytes of UTF-8 by replacing its middle with "~".
    public static func fit(_ name: String, maxBytes: Int = maxBytes) -> String {
        guard name.utf8.count > maxBytes else { return name }
        var head = Substring(name.prefix(maxBytes / 2))
        var tail = Substring(name.suffix(maxBytes / 2))
        while head.utf8.count + tail.utf8.count + 1 > maxBytes {
            if head.utf8.count > tail.utf8.count { head.removeLast() } else { tail.removeFirst() }
        }
        return head + "~" + tail
    }
}
