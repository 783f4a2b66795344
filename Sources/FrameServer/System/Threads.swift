import Glibc

private final class ThreadBody {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}

/// Starts a detached-on-join OS thread running `body` (for blocking waits that must not
/// tie up Swift's cooperative pool: futex waits, poll on pidfds).
///
/// The corresponding C function is `pthread_create`.
func spawnThread(_ body: @escaping @Sendable () -> Void) -> pthread_t {
    let box = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
    var tid = pthread_t()
    let r = pthread_create(&tid, nil, { arg in
        let b = Unmanaged<ThreadBody>.fromOpaque(arg!).takeRetainedValue()
        b.body()
        return nil
    }, box)
    precondition(r == 0, "pthread_create failed: \(Errno(rawValue: r))")
    return tid
}
