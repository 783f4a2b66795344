/// One chain of a description: elements linked by `!`, starting from a named stream or not.
struct PipelineChain {
    var from: String?
    var elements: [[String]] = []
    var isFresh: Bool { from == nil && elements.isEmpty }
}

/// The words of a description cut into chains and elements.
enum PipelineSyntax {
    static let keywords: Set<String> = ["produce", "filter", "sink", "tee", "exec", "queue"]

    static func chains(_ words: [String]) throws(PipelineError) -> [PipelineChain] {
        guard !words.isEmpty else { throw PipelineError("the pipeline is empty: say what to run, e.g. 'produce -i in.mp4 ! sink --null'") }
        // The streams a chain may start from: name=NAME, and produce's audio=NAME (its sound).
        let names = Set(words.compactMap { $0.hasPrefix("name=") ? String($0.dropFirst(5)) : $0.hasPrefix("audio=") ? String($0.dropFirst(6)) : nil })
        var chains = [PipelineChain()]
        var element: [String] = []
        var linked = false   // a '!' since the last element
        func close() {
            if !element.isEmpty { chains[chains.count - 1].elements.append(element) }
            element = []
            linked = false
        }
        for word in words {
            let chain = chains[chains.count - 1]
            if word == "!" {
                guard !element.isEmpty || (chain.from != nil && chain.elements.isEmpty && !linked) else {
                    throw PipelineError("a '!' with no element before it")
                }
                close()
                linked = true
            } else if word.hasSuffix("."), names.contains(String(word.dropLast())) {
                guard !linked || !element.isEmpty else {
                    throw PipelineError("'\(word)' after '!': a chain starts from a named stream, it cannot end in one")
                }
                close()
                chains.append(PipelineChain(from: String(word.dropLast())))
            } else if word == "produce" || word == "exec", let first = element.first, first != "exec" {
                close()
                chains.append(PipelineChain())
                element = [word]
            } else if element.isEmpty {
                guard keywords.contains(word) else {
                    throw PipelineError("unknown element '\(word)': elements are produce, filter, sink, queue, tee and exec, and NAME. reads the stream named by name=NAME")
                }
                guard linked || chain.isFresh else { throw PipelineError("'\(word)' needs a '!' before it") }
                element = [word]
            } else {
                element.append(word)
            }
        }
        guard !linked || !element.isEmpty else { throw PipelineError("the pipeline ends in '!'") }
        close()
        return chains.filter { !$0.isFresh }
    }
}
