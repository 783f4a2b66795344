import Glibc

/// A stream `name` whose producer published a few frames and was then stopped (SIGSTOP), with
/// `mutation` applied to every slot's frame header: a consumer that attaches now meets the
/// damage in the newest frame. Returns the stopped producer (kill it at the end).
func stoppedDamagedStream(_ name: String, _ mutation: FileMutation, in scratch: Scratch,
                          size: String = "64x48") throws -> Spawned {
    let producer = try scratch.start(["produce", "--pattern", "--out", name, "--size", size, "--rate", "100", "--slots", "4", "--quiet"])
    let files = StreamFiles(directory: scratch.path, name: name)
    guard eventually(timeout: 30, { (files.published ?? 0) >= 4 }) else {
        throw TestFailure("the producer of '\(name)' did not start: \(producer.stderr)")
    }
    producer.signal(SIGSTOP)
    guard eventually(timeout: 10, { procFile("/proc/\(producer.pid)/stat").contains(") T ") }) else {
        throw TestFailure("the producer of '\(name)' did not stop")
    }
    var rng = SplitMix64(seed: 27)
    _ = mutation.apply(to: files, rng: &rng)
    return producer
}
