import CZMQ
import FrameServer
import Glibc

// The asking side of a stream's control socket (`framesrv ctl`, ls, top, the web view).

/// Asks a stream's control socket (`framesrv ctl`).
public enum ControlClient {
    /// Sends `request` to `stream`'s control socket and returns its reply; throws when there
    /// is no such stream, no control socket, or no answer within `timeout` seconds.
    public static func send(_ request: ControlRequest, to stream: String, directory: RuntimeDirectory,
                            timeout: Double = 2) throws(ControlSocketError) -> ControlReply {
        let path = directory.controlSocketPath(stream)
        guard access(path, F_OK) == 0 else {
            throw directory.streamNames().contains(stream) ? .notControllable(stream) : .noStream(stream)
        }
        let s = try ZMQSocket(type: ZMQ_REQ) { ControlSocketError.zeromq("create a socket", $0) }
        try s.connect("ipc://" + path) { ControlSocketError.zeromq("connect to ipc://\(path)", $0) }
        let bytes = Array(request.text.utf8)
        guard bytes.withUnsafeBytes({ s.send($0) }) else { throw .noAnswer(stream, timeout) }
        let deadline = monotonicNanos() + UInt64(timeout * 1e9)
        while true {
            let left = Int64(deadline) - Int64(monotonicNanos())
            guard left > 0 else { throw .noAnswer(stream, timeout) }
            if s.wait(orReadable: [], timeoutMillis: Int(left / 1_000_000) + 1) != nil { break }
        }
        var buffer = [UInt8](repeating: 0, count: 65536)
        guard let n = buffer.withUnsafeMutableBytes({ s.receive(into: $0) }) else { throw .noAnswer(stream, timeout) }
        return ControlReply(text: String(decoding: buffer.prefix(min(n, buffer.count)), as: UTF8.self))
    }
}

extension ControlClient {
    /// `stream`'s playback status when it has a control socket and answers within `timeout`
    /// seconds; nil otherwise (for monitors: ls and top ask every stream, briefly).
    public static func playbackStatus(of stream: String, directory: RuntimeDirectory, timeout: Double = 0.5) -> PlaybackStatus? {
        guard access(directory.controlSocketPath(stream), F_OK) == 0,
              case .json(let text)? = try? send(.status, to: stream, directory: directory, timeout: timeout) else { return nil }
        return PlaybackStatus(json: text)
    }
}
