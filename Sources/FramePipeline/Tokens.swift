/// Splits a pipeline description into words as a POSIX shell would: blanks and newlines
/// separate words, single quotes keep everything, double quotes keep all but `\"` and `\\`,
/// a backslash outside quotes keeps the next character, and `#` at the start of a word
/// comments out the rest of the line. `!` is a word of its own wherever it stands unquoted.
public enum PipelineTokens {
    public static func split(_ text: String) throws(PipelineError) -> [String] {
        var words: [String] = []
        var word = "", inWord = false
        var chars = Array(text)[...]
        func end() { if inWord { words.append(word) }; word = ""; inWord = false }
        while let c = chars.popFirst() {
            switch c {
            case " ", "\t", "\n", "\r": end()
            case "#" where !inWord: while let n = chars.popFirst(), n != "\n" {}
            case "!": end(); words.append("!")
            case "\\":
                guard let n = chars.popFirst() else { throw PipelineError("a '\\' ends the description") }
                if n != "\n" { word.append(n); inWord = true }
            case "'":
                guard let close = chars.firstIndex(of: "'") else { throw PipelineError("a ' quote is not closed") }
                word += String(chars[..<close]); chars = chars[(close + 1)...]; inWord = true
            case "\"":
                inWord = true
                var closed = false
                while let n = chars.popFirst() {
                    if n == "\"" { closed = true; break }
                    if n == "\\", let e = chars.first, e == "\"" || e == "\\" { word.append(chars.removeFirst()) } else { word.append(n) }
                }
                guard closed else { throw PipelineError("a \" quote is not closed") }
            default: word.append(c); inWord = true
            }
        }
        end()
        return words
    }
}
