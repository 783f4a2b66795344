// MediaDecoder's opening steps: the input, its video stream and the decoder.

import CFFmpeg
import FrameServer
import Glibc

extension MediaDecoder {
    /// Every stream of `ctx` but `index`, as `#N type (codec)`.
    static func streamNames(_ ctx: UnsafeMutablePointer<AVFormatContext>, except index: Int32) -> [String] {
        (0..<Int(ctx.pointee.nb_streams)).filter { $0 != Int(index) }.map { i in
            let par = ctx.pointee.streams[i]!.pointee.codecpar!.pointee
            let type = av_get_media_type_string(par.codec_type).map { String(cString: $0) } ?? "unknown"
            return "#\(i) \(type) (\(String(cString: avcodec_get_name(par.codec_id))))"
        }
    }
}
