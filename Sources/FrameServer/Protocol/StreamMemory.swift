import CFrameServer

/// Where a stream's planes live (`fs_control.memory`, PROTOCOL.md 4.5): in host memory, in
/// the pool file after each slot's header, or in one CUDA device's memory, named by the
/// device's UUID. The kind is fixed for the stream's life.
public enum StreamMemory: Sendable, Equatable, CustomStringConvertible {
    case host
    /// `device`: the UUID as nvidia-smi prints it (`GPU-` and 32 hex digits in 8-4-4-4-12 groups).
    case cuda(device: String)

    /// "host" or "cuda", as monitors and their JSON show it.
    public var kind: String {
        switch self { case .host: "host"; case .cuda: "cuda" }
    }

    /// The device, for CUDA memory.
    public var device: String? {
        switch self { case .host: nil; case .cuda(let device): device }
    }

    public var description: String {
        switch self { case .host: "host memory"; case .cuda(let device): "CUDA memory of device \(device)" }
    }

    /// A device's 16 UUID bytes (`cuDeviceGetUuid`) as nvidia-smi names the device: libframesrv's
    /// own formatting (`fs_cuda_uuid_text`, which needs no driver), so both say the same name.
    static func deviceName(_ uuid: [UInt8]) -> String {
        precondition(uuid.count == 16, "a CUDA device UUID has 16 bytes")
        var text = [CChar](repeating: 0, count: 41)
        fs_cuda_uuid_text(uuid, &text)
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
