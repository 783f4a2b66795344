import Foundation
import Glibc

/// Two hosts for the bridge's network tests: two network namespaces joined by a veth pair,
/// 10.77.0.1 (host A) and 10.77.0.2 (host B), with addresses inside the namespaces only (the
/// test machine's own interfaces, routes and addresses are not touched). Names carry the
/// test process's pid and a counter, so parallel tests never share one; `remove()` (also run by
/// deinit, so a failing test cleans up too) deletes both namespaces, which deletes the veth
/// pair and kills nothing else. Namespaces left by a killed test run are removed by the next.
///
/// Needs root (CI runs as root): without it `init` throws a clear error, so the tests fail
/// rather than skip silently.
final class NetworkPair: @unchecked Sendable {
    static let addressA = "10.77.0.1"
    static let addressB = "10.77.0.2"
    private static let counter = Locked(0)
    static let prefix = "fsbr"

    let namespaceA: String, namespaceB: String
    /// The veth ends: vethA in namespaceA, vethB in namespaceB.
    let vethA: String, vethB: String
    private var removed = false

    init() throws {
        guard geteuid() == 0 else {
            throw TestFailure("the bridge network tests need root to create network namespaces (ip netns add); run them as root, as CI does")
        }
        Self.removeStale()
        let n = Self.counter.withLock { $0 += 1; return $0 }
        let tag = "\(getpid())x\(n)"
        namespaceA = "\(Self.prefix)\(tag)a"
        namespaceB = "\(Self.prefix)\(tag)b"
        vethA = "fv\(tag)a"
        vethB = "fv\(tag)b"
        do { try setUp() } catch {
            remove()
            throw error
        }
    }

    deinit { remove() }

    private func setUp() throws {
        try ip(["netns", "add", namespaceA])
        try ip(["netns", "add", namespaceB])
        try ip(["link", "add", vethA, "netns", namespaceA, "type", "veth", "peer", "name", vethB, "netns", namespaceB])
        for (ns, veth, address) in [(namespaceA, vethA, Self.addressA), (namespaceB, vethB, Self.addressB)] {
            try ip(["-n", ns, "addr", "add", address + "/24", "dev", veth])
            try ip(["-n", ns, "link", "set", veth, "up"])
            try ip(["-n", ns, "link", "set", "lo", "up"])
        }
    }

    /// Deletes both namespaces (and with them the veth pair). Idempotent.
    func remove() {
        guard !removed else { return }
        removed = true
        _ = try? ip(["netns", "delete", namespaceA])
        _ = try? ip(["netns", "delete", namespaceB])
    }

    /// Limits A's sending side (A to B) to `megabits` per second with a token bucket filter.
    func limitAtoB(megabits: Int) throws {
        try run(try RequiredTool.tc.path(), ["-n", namespaceA, "qdisc", "add", "dev", vethA, "root", "tbf",
                                 "rate", "\(megabits)mbit", "burst", "256kb", "latency", "50ms"])
    }

    /// Takes the link down (both ends) or up again.
    func setLink(up: Bool) throws {
        try ip(["-n", namespaceA, "link", "set", vethA, up ? "up" : "down"])
        try ip(["-n", namespaceB, "link", "set", vethB, up ? "up" : "down"])
    }

    /// The arguments that run `framesrv ARGS` in `namespace` (`ip netns exec` execs it: same pid).
    func framesrv(in namespace: String, _ args: [String]) -> [String] {
        ["netns", "exec", namespace, framesrvPath] + args
    }

    /// Starts `framesrv ARGS` in `namespace` with scratch's FRAMESRV_DIR (killed with scratch).
    @discardableResult
    func start(in namespace: String, _ scratch: Scratch, _ args: [String]) throws -> Spawned {
        try scratch.start(framesrv(in: namespace, args), executable: try RequiredTool.ip.path())
    }

    private func ip(_ args: [String]) throws { try run(try RequiredTool.ip.path(), args) }

    /// Runs a setup command; its error output goes into the failure.
    private func run(_ executable: String, _ args: [String]) throws {
        let r = try Spawned.run([executable] + args, timeout: 60)
        guard r.status == 0 else {
            throw TestFailure("\(executable) \(args.joined(separator: " ")): exit \(r.status): \(r.stderr)")
        }
    }

    /// Deletes namespaces named by this suite for a test process that no longer runs.
    private static func removeStale() {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: "/run/netns"),
              let ip = try? RequiredTool.ip.path() else { return }
        for name in names where name.hasPrefix(prefix) {
            guard let x = name.firstIndex(of: "x"), let pid = Int32(name[name.index(name.startIndex, offsetBy: prefix.count)..<x]),
                  pid != getpid(), Glibc.kill(pid, 0) != 0, errno == ESRCH else { continue }
            _ = try? Spawned.run([ip, "netns", "delete", name], timeout: 60)
        }
    }
}

/// The largest resident set (VmRSS) seen in processes while sampling, every 20 ms on a thread.
final class RSSSampler: @unchecked Sendable {
    private let peaks = Locked<[Int32: Int]>([:])
    private let stopped = Locked(false)
    private let done = DispatchSemaphore(value: 0)

    init(_ pids: [Int32]) {
        Thread.detachNewThread { [self] in
            while !stopped.withLock({ $0 }) {
                for pid in pids {
                    guard let kb = Self.residentKB(pid) else { continue }
                    peaks.withLock { $0[pid] = max($0[pid] ?? 0, kb) }
                }
                usleep(20_000)
            }
            done.signal()
        }
    }

    /// Stops sampling; the peak of each process in kB (0 if never sampled).
    func stop() -> [Int32: Int] {
        stopped.withLock { $0 = true }
        done.wait()
        return peaks.withLock { $0 }
    }

    /// VmRSS of /proc/PID/status in kB.
    static func residentKB(_ pid: Int32) -> Int? {
        let status = procFile("/proc/\(pid)/status")
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }) else { return nil }
        return line.split(separator: " ").dropFirst().first.flatMap { Int($0) }
    }
}
