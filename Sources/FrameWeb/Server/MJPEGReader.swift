import CMicroHTTPD
import Synchronization

/// A multipart/x-mixed-replace body that pulls JPEGs from a preview feed, one part each, for
/// libmicrohttpd's content reader callback (on the connection's own thread: a slow reader stalls
/// only its own connection).
final class MJPEGReader: Sendable {
    static let boundary = "framesrvframe"
    /// Seconds without a frame before the response ends (the stream ended or stopped).
    static let idleLimit = 10.0

    let feed: PreviewViewer
    let stopping: @Sendable () -> Bool
    private let pending = Mutex<(bytes: [UInt8], offset: Int)>(([], 0))

    init(_ feed: PreviewViewer, stopping: @escaping @Sendable () -> Bool) {
        self.feed = feed
        self.stopping = stopping
    }

    /// Fills `buffer` (at most `max` bytes); the byte count, or MHD's end-of-stream marker.
    func read(into buffer: UnsafeMutablePointer<CChar>, max: Int) -> Int {
        pending.withLock { p in
            var waited = 0.0
            while p.offset >= p.bytes.count {
                guard !stopping(), waited < Self.idleLimit else { return fs_mhd_end_of_stream }
                guard let jpeg = feed.next(timeout: 1) else { waited += 1; continue }
                p.bytes = Array("--\(Self.boundary)\r\nContent-Type: image/jpeg\r\nContent-Length: \(jpeg.count)\r\n\r\n".utf8) + jpeg + [13, 10]
                p.offset = 0
            }
            let n = min(max, p.bytes.count - p.offset)
            p.bytes.withUnsafeBytes { src in
                UnsafeMutableRawPointer(buffer).copyMemory(from: src.baseAddress! + p.offset, byteCount: n)
            }
            p.offset += n
            return n
        }
    }
}
