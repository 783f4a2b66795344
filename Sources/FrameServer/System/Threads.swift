import Glibc

private final class ThreadBody {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}

/// Starts a detached-on-join OS thread running `body` (for blocking waits that must not
/// tie up Swift's cooperative pool: futex waits, poll on pidfds).
///
/// The corresponding C function is `pthread_create`.
package func spawnThread(_ body: @escaping @Sendable () -> Void) -> pthread_t {
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

/// A plain pthread mutex, for critical sections that call out (sleep, throw, allocate)
/// where `Mutex.withLock`'s closure would be awkward.
///
/// The corresponding C functions are `pthread_mutex_lock` and `pthread_mutex_unlock`.
package final class ThreadLock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)

    package init() { pthread_mutex_init(mutex, nil) }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    package func lock() { pthread_mutex_lock(mutex) }

    package func unlock() { pthread_mutex_unlock(mutex) }

    package func withLock<T: ~Copyable, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        lock()
        defer { unlock() }
        return try body()
    }
}
