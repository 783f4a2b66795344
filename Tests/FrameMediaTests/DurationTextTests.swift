import FrameControl
import FrameMedia
import Testing

/// FrameControl reads `seek T` without FFmpeg (`parseDuration`); FFmpeg's `av_parse_time`
/// (`MediaInputOptions.parseTime`, what `-ss`/`-t` use) is the oracle.
@Suite struct DurationTextTests {
    static let texts = [
        "0", "5", "1.5", "12.345678901", ".5", "5.", "90", "00:05", "1:30", "01:02:03", "1:02:03.25", "100:00:00",
        "9999:59:59", "12345:00:00", "1:60", "1:5", "1:2:3:4", "61:00", "5s", "250ms", "40us", "1.5ms", "2.5us",
        "1:00ms", "5x", "s", "", " 5", "+5", "-5", "--5", "-1:30", "5 ", "1e3", "0x10", ":30", "1:", "::",
        "9223372036854775807", "9223372036854", "9223372036855", "-9223372036854775808us", "9223372036854775807us",
        "99999999999999999999", "5\u{0}junk", "١٢", "0.0000009", "00000000000000000000000005",
    ]

    @Test(arguments: texts)
    func durationTextIsFFmpegs(_ text: String) {
        #expect(parseDuration(text) == MediaInputOptions.parseTime(text), "'\(text)'")
    }
}
