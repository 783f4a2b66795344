import Foundation
@testable import FrameServer
import Glibc
import Testing

/// The runtime directory's checks (finding 10: a planted symlink; finding 12: `ls` must
/// not create the directory). Each test works in its own scratch folder under /dev/shm.
/// The tests that plant files of another user (uid 65534) need root for chown; as any
/// other user they are skipped.
@Suite(.serialized) struct RuntimeDirectoryTests {
    static let isRoot = geteuid() == 0
    static let otherUID: uid_t = 65534

    /// A fresh folder to plant runtime directories in, removed at the end.
    final class Place {
        private let folder = TemporaryFolder("framesrv-rtdir")
        var path: String { folder.path }

        /// Makes directory `name` with `mode`, owned by `owner` (default: this process's user).
        @discardableResult
        func directory(_ name: String, mode: mode_t = 0o755, owner: uid_t? = nil) -> String {
            let p = path + "/" + name
            #expect(mkdir(p, mode) == 0)
            #expect(chmod(p, mode) == 0)
            if let owner { #expect(chown(p, owner, owner) == 0) }
            return p
        }

        /// Makes symbolic link `name` to `target`, owned by `owner` (default: this process's user).
        func link(_ name: String, to target: String, owner: uid_t? = nil) -> String {
            let p = path + "/" + name
            #expect(symlink(target, p) == 0)
            if let owner { #expect(lchown(p, owner, owner) == 0) }
            return p
        }
    }

    static func mode(_ path: String) -> mode_t {
        var st = stat()
        return stat(path, &st) == 0 ? st.st_mode & 0o7777 : 0
    }

    /// The error `body` threw, as the one line a command would print; nil when it succeeded.
    static func refusal(_ body: () throws -> Void) -> String? {
        do { try body(); return nil } catch { return "\(error)" }
    }

    // MARK: Plain directories

    @Test func createsAMissingDirectoryWithMode0700() throws {
        let place = Place()
        let path = place.path + "/rt"
        _ = try RuntimeDirectory(path: path)
        #expect(Self.mode(path) == 0o700)
    }

    @Test func tightensAnOpenDirectoryOfYours() throws {
        let place = Place()
        let path = place.directory("rt", mode: 0o755)
        _ = try RuntimeDirectory(path: path)
        #expect(Self.mode(path) == 0o700)
    }

    @Test func refusesAFileInPlaceOfTheDirectory() {
        let place = Place()
        let path = place.path + "/rt"
        #expect(FileManager.default.createFile(atPath: path, contents: Data()))
        let why = Self.refusal { _ = try RuntimeDirectory(path: path) }
        #expect(why?.contains("not a directory") == true, "\(why ?? "accepted")")
    }

    @Test(.enabled(if: isRoot)) func refusesADirectoryOfAnotherUser() {
        let place = Place()
        let path = place.directory("rt", mode: 0o755, owner: Self.otherUID)
        let why = Self.refusal { _ = try RuntimeDirectory(path: path) }
        #expect(why?.contains("uid \(Self.otherUID)") == true, "\(why ?? "accepted")")
        #expect(Self.mode(path) == 0o755, "another user's directory is never chmodded")
    }

    // MARK: Symbolic links

    /// Finding 10: another user plants `framesrv-UID -> a directory of yours`. The link is
    /// refused and the directory it names keeps its mode.
    @Test(.enabled(if: isRoot)) func refusesALinkPlantedByAnotherUser() {
        let place = Place()
        let mine = place.directory("mine", mode: 0o755)
        let link = place.link("rt", to: mine, owner: Self.otherUID)
        let why = Self.refusal { _ = try RuntimeDirectory(path: link) }
        #expect(why?.contains("symbolic link owned by uid \(Self.otherUID)") == true, "\(why ?? "accepted")")
        #expect(Self.mode(mine) == 0o755, "nothing reached through another user's link is chmodded")
        #expect(Self.refusal { _ = try RuntimeDirectory.existing(path: link) } != nil)
    }

    @Test(.enabled(if: isRoot)) func refusesYourLinkToADirectoryOfAnotherUser() {
        let place = Place()
        let theirs = place.directory("theirs", mode: 0o755, owner: Self.otherUID)
        let link = place.link("rt", to: theirs)
        let why = Self.refusal { _ = try RuntimeDirectory(path: link) }
        #expect(why?.contains("links to belongs to uid \(Self.otherUID)") == true, "\(why ?? "accepted")")
        #expect(Self.mode(theirs) == 0o755)
    }

    @Test func acceptsYourLinkToYourDirectory() throws {
        let place = Place()
        let mine = place.directory("mine", mode: 0o700)
        let link = place.link("rt", to: mine)
        let dir = try RuntimeDirectory(path: link)
        #expect(dir.path == link)
        #expect(Self.mode(mine) == 0o700)
        #expect(try RuntimeDirectory.existing(path: link)?.path == link)
    }

    @Test func refusesYourLinkToNothing() {
        let place = Place()
        let link = place.link("rt", to: place.path + "/missing")
        #expect(Self.refusal { _ = try RuntimeDirectory(path: link) } != nil)
        #expect(!FileManager.default.fileExists(atPath: place.path + "/missing"), "the link's target is not created")
    }

    // MARK: Opening without creating

    /// Finding 12: monitors open the directory only if it exists.
    @Test func existingDoesNotCreateTheDirectory() throws {
        let place = Place()
        let path = place.path + "/rt"
        #expect(try RuntimeDirectory.existing(path: path) == nil)
        #expect(!FileManager.default.fileExists(atPath: path))
        place.directory("rt", mode: 0o750)
        #expect(try RuntimeDirectory.existing(path: path)?.path == path)
        #expect(Self.mode(path) == 0o700)
    }

    // MARK: End to end

    /// A producer pointed at a planted link exits non-zero with one line naming it, and
    /// writes nothing into the directory behind it.
    @Test(.enabled(if: isRoot)) func producerRefusesAPlantedLink() throws {
        let place = Place()
        let mine = place.directory("mine", mode: 0o755)
        let link = place.link("rt", to: mine, owner: Self.otherUID)
        let p = try Spawned(framesrvPath, ["produce", "--pattern", "--out", "x", "--frames", "1"],
                            environment: ["FRAMESRV_DIR": link], logDirectory: place.path)
        #expect(p.wait(timeout: 60) != 0)
        let lines = p.stderr.split(separator: "\n")
        #expect(lines.count == 1, "\(p.stderr)")
        #expect(p.stderr.contains("symbolic link owned by uid \(Self.otherUID)"), "\(p.stderr)")
        #expect((try? FileManager.default.contentsOfDirectory(atPath: mine))?.isEmpty == true)
        #expect(Self.mode(mine) == 0o755)
    }
}
