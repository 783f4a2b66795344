import Foundation

/// A remux of `clip` into NUT (version 4: the one with packet side data) whose packet `index`
/// (0-based) carries `bytes` bytes of side data (`AV_PKT_DATA_MATROSKA_BLOCKADDITIONAL`, as a
/// recording's frame record), made by a small libavformat program compiled here: ffmpeg's
/// command line cannot attach side data. libavformat 5.1's NUT muxer sizes such a frame
/// without its side data, so the demuxer finds it too large, logs an error and skips it
/// (ffmpeg itself then decodes one frame fewer).
func nutWithLargeSideData(_ clip: String, packet index: Int, bytes: Int, _ scratch: Scratch) throws -> String {
    let source = scratch.file("side_data.c"), program = scratch.file("side_data"), output = scratch.file("side-data.nut")
    try #"""
    #include <libavformat/avformat.h>
    #include <stdlib.h>
    #include <string.h>
    int main(int argc, char **argv) {
        AVFormatContext *in = NULL, *out = NULL;
        if (argc != 5 || avformat_open_input(&in, argv[1], NULL, NULL) < 0 || avformat_find_stream_info(in, NULL) < 0) return 2;
        if (avformat_alloc_output_context2(&out, NULL, "nut", argv[2]) < 0) return 3;
        for (unsigned i = 0; i < in->nb_streams; i++) {
            AVStream *s = avformat_new_stream(out, NULL);
            if (!s || avcodec_parameters_copy(s->codecpar, in->streams[i]->codecpar) < 0) return 4;
            s->time_base = in->streams[i]->time_base;
        }
        out->strict_std_compliance = -2;   /* NUT version 4 */
        AVDictionary *options = NULL;
        av_dict_set(&options, "syncpoints", "timestamped", 0);
        if (avio_open(&out->pb, argv[2], AVIO_FLAG_WRITE) < 0 || avformat_write_header(out, &options) < 0) return 5;
        AVPacket *p = av_packet_alloc();
        long n = 0, index = atol(argv[3]);
        size_t bytes = strtoul(argv[4], NULL, 10);
        while (av_read_frame(in, p) >= 0) {
            if (n++ == index) {
                uint8_t *side = av_packet_new_side_data(p, AV_PKT_DATA_MATROSKA_BLOCKADDITIONAL, bytes);
                if (!side) return 6;
                memset(side, 0x41, bytes);
            }
            av_packet_rescale_ts(p, in->streams[p->stream_index]->time_base, out->streams[p->stream_index]->time_base);
            if (av_interleaved_write_frame(out, p) < 0) return 7;
        }
        if (av_write_trailer(out) < 0) return 8;
        avio_closep(&out->pb);
        return n > index ? 0 : 9;
    }
    """#.write(toFile: source, atomically: true, encoding: .utf8)
    let cc = try shell("cc -O1 '\(source)' -o '\(program)' $(pkg-config --cflags --libs libavformat libavcodec libavutil)", scratch)
    guard cc.status == 0 else { throw TestFailure("cc side_data.c: \(cc.stderr)") }
    let made = try shell("'\(program)' '\(clip)' '\(output)' \(index) \(bytes)", scratch)
    guard made.status == 0 else { throw TestFailure("side_data exited \(made.status): \(made.stderr)") }
    return output
}
