/// What Foundation's NSString methods did for the command line and the benchmarks: framesrv
/// links FoundationEssentials only (Foundation's ICU data would be most of its binary).
package extension StringProtocol {
    /// Without the whitespace and newlines at either end (`trimmingCharacters(in: .whitespacesAndNewlines)`).
    var trimmed: String {
        guard let first = firstIndex(where: { !$0.isWhitespace }), let last = lastIndex(where: { !$0.isWhitespace }) else { return "" }
        return String(self[first...last])
    }

    /// Exactly `width` characters: cut, or padded with spaces on the right
    /// (`padding(toLength: width, withPad: " ", startingAt: 0)`).
    func padded(to width: Int) -> String {
        count >= width ? String(prefix(width)) : String(self) + String(repeating: " ", count: width - count)
    }
}
