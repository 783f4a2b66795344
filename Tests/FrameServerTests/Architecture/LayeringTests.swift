import Foundation
import Testing

/// The house stays drawn: docs/ARCHITECTURE.md's target table, Package.swift's dependencies
/// and every `import` line under Sources/ say the same thing. A target that starts importing
/// one it must not (FFmpeg into the protocol, FoundationEssentials into FrameServer, all of
/// Foundation anywhere, a layer above itself) fails here, with the file and line.
@Suite struct LayeringTests {
    /// What every Swift target on Linux may import besides its table row.
    static let everywhere: Set<String> = ["Glibc", "Synchronization"]

    struct Row { var imports: Set<String>; var foundation: Bool }

    /// What a target whose row says yes may import besides: never Foundation itself (ICU's data).
    static let foundation: Set<String> = ["FoundationEssentials", "Dispatch"]

    /// The table under `<!-- layering` in docs/ARCHITECTURE.md: target -> (may import, FoundationEssentials).
    static func table() throws -> [String: Row] {
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent("docs/ARCHITECTURE.md"), encoding: .utf8)
        let marker = try #require(text.range(of: "<!-- layering"), "docs/ARCHITECTURE.md has no <!-- layering table")
        var rows: [String: Row] = [:]
        for line in text[marker.upperBound...].split(separator: "\n").dropFirst() {
            guard line.hasPrefix("|") else { if !rows.isEmpty { break } else { continue } }
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 4, cells[1] != "target", !cells[1].hasPrefix("---") else { continue }
            let imports = cells[2] == "-" ? [] : cells[2].split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            rows[cells[1]] = Row(imports: Set(imports), foundation: cells[3] == "yes")
        }
        return rows
    }

    /// Package.swift's targets (not the test targets) and their dependencies.
    static func packageTargets() throws -> [String: Set<String>] {
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent("Package.swift"), encoding: .utf8)
        let declaration = try Regex(#"\.(target|executableTarget|systemLibrary|testTarget)\(name: "([^"]+)""#)
        let matches = text.matches(of: declaration)
        var targets: [String: Set<String>] = [:]
        for (i, m) in matches.enumerated() where m.output[1].substring != "testTarget" {
            let end = i + 1 < matches.count ? matches[i + 1].range.lowerBound : text.endIndex
            let body = text[m.range.upperBound..<end]
            var deps: Set<String> = []
            if let open = body.range(of: "dependencies: ["), let close = body[open.upperBound...].firstIndex(of: "]") {
                deps = Set(body[open.upperBound..<close].matches(of: try Regex(#""([^"]+)""#)).map { String($0.output[1].substring!) })
            }
            targets[String(m.output[2].substring!)] = deps
        }
        return targets
    }

    @Test func theTableIsPackageSwiftsGraph() throws {
        let (rows, package) = (try Self.table(), try Self.packageTargets())
        #expect(Set(rows.keys) == Set(package.keys), "docs/ARCHITECTURE.md's targets \(rows.keys.sorted()) vs Package.swift's \(package.keys.sorted())")
        for (target, deps) in package.sorted(by: { $0.key < $1.key }) {
            #expect(rows[target]?.imports == deps, "\(target): docs/ARCHITECTURE.md says \(rows[target]?.imports.sorted() ?? []), Package.swift \(deps.sorted())")
        }
    }

    @Test func everyImportIsAllowedByTheTable() throws {
        let rows = try Self.table()
        let importLine = try Regex(#"^\s*(?:@testable\s+|@_implementationOnly\s+|public\s+|package\s+|internal\s+)?import\s+(?:struct\s+|class\s+|enum\s+|func\s+)?([A-Za-z_][A-Za-z0-9_]*)"#)
        var checked = 0
        for (target, row) in rows {
            let folder = repositoryRoot.appendingPathComponent("Sources/\(target)")
            let allowed = row.imports.union(Self.everywhere).union(row.foundation ? Self.foundation : [])
            let files = FileManager.default.enumerator(atPath: folder.path)?.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") } ?? []
            for file in files {
                let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
                var inLiteral = false   // a multi-line string literal (an embedded Python script's imports are not ours)
                for (n, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                    let wasInLiteral = inLiteral
                    if line.components(separatedBy: "\"\"\"").count % 2 == 0 { inLiteral.toggle() }
                    guard !wasInLiteral, let m = line.firstMatch(of: importLine) else { continue }
                    let module = String(m.output[1].substring!)
                    checked += 1
                    #expect(allowed.contains(module), "Sources/\(target)/\(file):\(n + 1) imports \(module); docs/ARCHITECTURE.md allows \(target) \(allowed.sorted())")
                }
            }
        }
        #expect(checked > 100, "only \(checked) import lines read under Sources/")
    }
}
