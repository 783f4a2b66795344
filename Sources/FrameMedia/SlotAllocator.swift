import CFFmpeg
import CFrameServer
import FrameServer
import Synchronization

/// Makes a decoder decode straight into a producer's pool slots (zero copy): installed as
/// the codec's `get_buffer2`, it leases a slot for every frame buffer the decoder asks for,
/// with the row alignment and padding rows FFmpeg's own allocator would use (for a picture;
/// for sound, the planes of its channels at one stride, `audioLayout`), and the
/// AVBuffer's free callback ends the lease. A decoded frame in a leased slot is published
/// as it is (`Producer.publish(_:format:layout:description:)`); the decoder may go on
/// using it as a reference picture, which `producer_hold` protects.
///
/// Where that is impossible it hands the request to `avcodec_default_get_buffer2` and the
/// frame takes the copy path: a codec without AV_CODEC_CAP_DR1, a pixel format framesrv
/// cannot carry, a frame larger than the slots (until the copy path starts a larger
/// epoch), or all leasable slots taken by the decoder's references.
///
/// The buffers are read-only to FFmpeg (AV_BUFFER_FLAG_READONLY): a decoder that keeps one
/// picture and updates it in place (qtrle, gif, ... through `ff_reget_buffer`) would
/// otherwise rewrite a published slot once it holds the only reference; read-only, it
/// asks for a new buffer and copies into it instead.
///
/// FFmpeg calls `get_buffer2` from its decoding threads (one at a time) and frees buffers
/// from any thread; everything here is thread-safe.
public final class SlotAllocator: @unchecked Sendable {
    // @unchecked Sendable: mutable state is behind Mutex/Atomic.
    private struct Target: @unchecked Sendable { let producer: Producer; let wait: Bool }
    private let target = Mutex<Target?>(nil)
    /// Addresses of the `SlotBuffer`s FFmpeg holds, to recognise our buffers in a frame.
    private let live = Mutex<Set<UInt>>([])

    public init() {}

    /// From now on, decode into `producer`'s slots. `wait`: when every slot is held by
    /// consumers, wait for one (backpressure) instead of decoding into FFmpeg's memory.
    public func attach(_ producer: Producer, wait: Bool) {
        target.withLock { $0 = Target(producer: producer, wait: wait) }
    }

    /// The lease behind `frame`'s buffer, if the frame lives in a slot this allocator leased.
    func lease(of frame: UnsafePointer<AVFrame>) -> SlotLease? {
        guard let buf = frame.pointee.buf.0, let opaque = av_buffer_get_opaque(buf) else { return nil }
        guard live.withLock({ $0.contains(UInt(bitPattern: opaque)) }) else { return nil }
        return Unmanaged<SlotBuffer>.fromOpaque(opaque).takeUnretainedValue().lease
    }

    /// Installs this allocator on `codec` (before `avcodec_open2`).
    func install(on codec: UnsafeMutablePointer<AVCodecContext>) {
        codec.pointee.opaque = Unmanaged.passUnretained(self).toOpaque()
        codec.pointee.get_buffer2 = { ctx, frame, flags in
            guard let ctx, let frame, let opaque = ctx.pointee.opaque else { return cffmpeg_averror(EINVAL) }
            return Unmanaged<SlotAllocator>.fromOpaque(opaque).takeUnretainedValue().getBuffer(ctx, frame, flags)
        }
    }

    private func getBuffer(_ ctx: UnsafeMutablePointer<AVCodecContext>, _ frame: UnsafeMutablePointer<AVFrame>,
                           _ flags: Int32) -> Int32 {
        if let target = target.withLock({ $0 }), cffmpeg_codec_has_dr1(ctx) != 0, ctx.pointee.hw_frames_ctx == nil,
           let layout = ctx.pointee.codec_type == AVMEDIA_TYPE_AUDIO ? Self.audioLayout(frame) : Self.layout(ctx, frame),
           let lease = try? target.producer.lease(bytes: layout.bytes, wait: target.wait) {
            let box = SlotBuffer(lease: lease, allocator: self)
            let opaque = Unmanaged.passRetained(box).toOpaque()
            let buffer = av_buffer_create(lease.base.assumingMemoryBound(to: UInt8.self), lease.capacity, { opaque, _ in
                let box = Unmanaged<SlotBuffer>.fromOpaque(opaque!).takeRetainedValue()
                box.allocator.live.withLock { _ = $0.remove(UInt(bitPattern: opaque!)) }
                box.lease.end()
            }, opaque, cffmpeg_buffer_flag_readonly())
            guard let buffer else {
                Unmanaged<SlotBuffer>.fromOpaque(opaque).release()
                lease.end()
                return cffmpeg_averror(ENOMEM)
            }
            live.withLock { _ = $0.insert(UInt(bitPattern: opaque)) }
            frame.pointee.buf.0 = buffer
            withUnsafeMutableBytes(of: &frame.pointee.data) { data in
                withUnsafeMutableBytes(of: &frame.pointee.linesize) { linesize in
                    for i in 0..<layout.offsets.count {
                        data.storeBytes(of: lease.base.assumingMemoryBound(to: UInt8.self) + layout.offsets[i],
                                        toByteOffset: i * MemoryLayout<UnsafeMutablePointer<UInt8>?>.stride,
                                        as: UnsafeMutablePointer<UInt8>?.self)
                    }
                    for i in 0..<layout.strides.count {
                        linesize.storeBytes(of: Int32(layout.strides[i]), toByteOffset: i * 4, as: Int32.self)
                    }
                }
            }
            cffmpeg_frame_use_data(frame)
            return 0
        }
        return avcodec_default_get_buffer2(ctx, frame, flags)
    }

    /// Where FFmpeg's own allocator would put the planes of `frame` (avcodec_default_get_buffer2:
    /// dimensions aligned as the codec needs, linesizes aligned to 64 bytes, 16 + 64 bytes
    /// of slack after each plane for SIMD over-reads), from the slot's 256-byte header on.
    /// nil for formats framesrv cannot carry.
    static func layout(_ ctx: UnsafeMutablePointer<AVCodecContext>, _ frame: UnsafeMutablePointer<AVFrame>)
        -> (offsets: [Int], strides: [Int], bytes: Int)? {
        let format = AVPixelFormat(rawValue: frame.pointee.format)
        guard let name = av_get_pix_fmt_name(format).map({ String(cString: $0) }),
              let pixelFormat = DecodedFrame.framesrvFormat(named: name), frame.pointee.width > 0, frame.pointee.height > 0 else { return nil }
        var w = frame.pointee.width, h = frame.pointee.height
        var align = [Int32](repeating: 0, count: Int(AV_NUM_DATA_POINTERS))
        avcodec_align_dimensions2(ctx, &w, &h, &align)
        let planes = pixelFormat.planes.count
        var linesize = [Int32](repeating: 0, count: 4)
        var unaligned = true
        while unaligned {
            guard av_image_fill_linesizes(&linesize, format, w) >= 0 else { return nil }
            w += w & ~(w - 1)
            unaligned = (0..<planes).contains { linesize[$0] % max(64, align[$0]) != 0 }
        }
        var sizes = [Int](repeating: 0, count: 4)
        let ptrdiffs = linesize.map { Int($0) }
        guard av_image_fill_plane_sizes(&sizes, format, h, ptrdiffs) >= 0 else { return nil }
        var offsets: [Int] = [], offset = FrameFormat.headerSize
        for i in 0..<planes {
            offsets.append(offset)
            offset = (offset + sizes[i] + 16 + 64 + 63) / 64 * 64
        }
        return (offsets, ptrdiffs.prefix(planes).map { $0 }, offset)
    }
}

extension SlotAllocator {
    /// Where FFmpeg's own allocator would put an audio frame's planes (avcodec_default_get_buffer2:
    /// `nb_samples` rounded up to 32, one plane per channel when planar), one after another
    /// from the slot's 256-byte header on, each with 16 + 64 bytes of slack and 64 bytes
    /// apart: PROTOCOL.md 4.6's rows at one stride. `strides` is FFmpeg's one `linesize[0]`
    /// (bytes of a plane). nil for formats framesrv cannot carry and for more planes than
    /// AVFrame's `data` holds (8: the decoder's own memory takes those).
    static func audioLayout(_ frame: UnsafeMutablePointer<AVFrame>) -> (offsets: [Int], strides: [Int], bytes: Int)? {
        let format = AVSampleFormat(rawValue: frame.pointee.format)
        let channels = frame.pointee.ch_layout.nb_channels
        // Only what a stream can carry (PROTOCOL.md 4.6's limits): a damaged packet's huge
        // frame must not make the producer want slots its size (`leaseBytesWanted`).
        guard let name = av_get_sample_fmt_name(format).map({ String(cString: $0) }), SampleFormat(name: name) != nil,
              (1...Int(FS_MAX_SAMPLES)).contains(Int(frame.pointee.nb_samples)), (1...Int(FS_MAX_CHANNELS)).contains(Int(channels))
        else { return nil }
        var lineSize: Int32 = 0
        guard av_samples_get_buffer_size(&lineSize, channels, frame.pointee.nb_samples, format, 0) >= 0 else { return nil }
        let planes = av_sample_fmt_is_planar(format) != 0 ? Int(channels) : 1
        guard planes <= Int(AV_NUM_DATA_POINTERS) else { return nil }
        let stride = (Int(lineSize) + 16 + 64 + 63) / 64 * 64
        return ((0..<planes).map { FrameFormat.headerSize + $0 * stride }, [Int(lineSize)], FrameFormat.headerSize + planes * stride)
    }
}

/// What an AVBuffer in a slot points at: the lease, and the allocator that tracks it.
final class SlotBuffer {
    let lease: SlotLease
    let allocator: SlotAllocator
    init(lease: SlotLease, allocator: SlotAllocator) { self.lease = lease; self.allocator = allocator }
}
