/// A pipeline description that cannot run: one line saying where and why.
public struct PipelineError: Error, CustomStringConvertible, Equatable {
    public let description: String
    public init(_ message: String) { description = message }
}
