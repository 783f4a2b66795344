import CFrameServer
import CFrameServerClient
import FrameServer
import Glibc

/// A CUDA stream's frames brought into host memory for a viewer (`framesrv web`'s previews
/// and snapshots): a live libframesrv consumer of the stream reads on its device's legacy
/// default stream, and each frame taken is copied device to host (`framesrv_frame_read_on`,
/// one 2D copy per plane) into a picture of this reader's, laid out as the frame's canonical
/// slot, then released. One copy per frame taken: a preview takes only the frames a viewer
/// is due. A machine or process that cannot reach the stream's device (no driver, another
/// GPU) is refused at `init` with libframesrv's line.
public final class CUDAPreviewReader {
    public let stream: String
    private var consumer: OpaquePointer?
    /// The last frame's picture: 256 bytes of header room, then the planes.
    private var buffer: UnsafeMutableRawPointer?
    private var bufferBytes = 0

    /// Attaches a live consumer called `name`, waiting up to `waitSeconds` for the stream.
    public init(stream: String, name: String, waitSeconds: Double) throws(CUDAStreamError) {
        self.stream = stream
        var o = framesrv_consumer_options()
        o.mode = FRAMESRV_LIVE
        o.memory = FRAMESRV_MEMORY_CUDA
        o.attach_timeout_ms = Int32(min(max(waitSeconds, 0) * 1000, 2e9))
        let status = name.withCString { n -> Int32 in
            o.client_name = n
            return framesrv_consumer_open(&consumer, stream, &o)
        }
        guard status == FRAMESRV_OK.rawValue else { throw CUDAStreamError(String(cString: framesrv_last_error())) }   // it names the stream
    }

    deinit {
        framesrv_consumer_close(consumer)
        free(buffer)
    }

    /// The next frame (waiting up to `timeoutMillis`) in host memory: its header (canonical
    /// layout) and the picture's first byte, valid until the next call. nil when none came
    /// in time; `.ended` when the stream ended or its producer went.
    public func next(timeoutMillis: Int32) throws(CUDAStreamError) -> Next {
        var frame: OpaquePointer?
        switch framesrv_consumer_next_on(consumer, nil, timeoutMillis, &frame) {
        case FRAMESRV_OK.rawValue: break
        case FRAMESRV_TIMEOUT.rawValue: return .none
        case FRAMESRV_END.rawValue, FRAMESRV_GONE.rawValue: return .ended
        default: throw .last("read CUDA stream '\(stream)'")
        }
        defer { framesrv_frame_release(frame) }
        let info = framesrv_frame_info_of(frame)!.pointee
        let name = String(cString: framesrv_pix_fmt_name(info.pix_fmt))
        guard let pixelFormat = PixelFormat(name: name) else {
            throw CUDAStreamError("CUDA stream '\(stream)': frames in pixel format '\(name)' cannot be previewed")
        }
        let format = FrameFormat(pixelFormat, width: Int(info.width), height: Int(info.height))
        try reserve(format.slotBytes)
        let offsets = format.planeOffsets()
        var planes = offsets.map { UInt64(UInt(bitPattern: buffer!) + UInt($0)) }
        var pitches = offsets.indices.map { format.stride(plane: $0) }
        guard framesrv_frame_read_on(frame, &planes, &pitches, UInt32(planes.count), nil) == FRAMESRV_OK.rawValue else {
            throw .last("download a frame of CUDA stream '\(stream)'")
        }
        var d = FrameDescription()
        d.color = ColorDescription(matrix: info.color_matrix, range: info.color_range, primaries: info.color_primaries,
                                   transfer: info.color_transfer)
        return .picture(FrameHeader(canonical: format, description: d), UnsafeRawPointer(buffer!))
    }

    public enum Next {
        case picture(FrameHeader, UnsafeRawPointer)
        case none
        case ended
    }

    /// Makes the picture hold `bytes`.
    private func reserve(_ bytes: Int) throws(CUDAStreamError) {
        guard bytes > bufferBytes else { return }
        free(buffer)
        buffer = malloc(bytes)
        bufferBytes = buffer == nil ? 0 : bytes
        guard buffer != nil else { throw CUDAStreamError("CUDA stream '\(stream)': no memory for a \(bytes)-byte picture") }
    }
}
