// PROTOCOL.md 12.1, Admission watcher (thread A, on `attach_seq`; 9.1 Admission), 12.5,
// Watching consumers (thread B, on their pidfds) and 12.4, Reclaim (15.4, a consumer that dies).

import CFrameServer
import Glibc
import Synchronization

extension Producer {
    /// Thread A: sleeps on `attach_seq`; on every change admits new consumers and
    /// detaches the ones that asked to leave.
    func watchAttachments() {
        while true {
            // Read the futex word before `running`: close() clears `running` and then bumps
            // the word, so either this sees running == false or the wait returns at once.
            let seen = control.attachSequence
            guard shared.withLock({ $0.running }) else { return }
            scanConsumers()
            // At most a second: a control segment truncated under us is replaced by private
            // zero pages (the SIGBUS guard), and close()'s wake then no longer reaches a
            // wait keyed on the old shared page.
            control.waitForConsumerChange(seen: seen, timeoutNanos: Self.longestWaitNanos)
        }
    }

    func scanConsumers() {
        var changed = false
        for i in 0..<Int(FS_MAX_CONSUMERS) {
            let pid = control.consumerPID(i)
            guard pid != 0 else { continue }
            // A state that is none of the protocol's is a bad entry: left alone (a dead
            // owner's bits are still reclaimed through its pidfd, if it was admitted).
            guard let state = control.consumerState(i) else { continue }
            let known = shared.withLock { $0.watched[i] != nil }
            switch state {
            case .active where !known:
                let identity = control.consumerIdentity(i)
                let fd: Int32
                switch identity.watch() {
                case .running(let d): fd = d
                case .exited: reclaim(i, identity: identity); changed = true; continue
                case .unknown: continue   // cannot watch it now (no fds?): try again at the next scan
                }
                let lossless = control.consumerMode(i) == .lossless   // anything else is served live
                shared.withLock { st in
                    st.watched[i] = (fd, identity)
                    st.everAdmitted = true
                    if lossless {
                        // SYNC: first_seq is stored before any frame carrying the bit is published.
                        control.admit(i, firstSequence: st.nextSeq)
                        st.losslessMask |= 1 << UInt64(i)
                        control.publishLosslessMask(st.losslessMask)
                    }
                }
                changed = true
            case .closing:
                reclaim(i, identity: control.consumerIdentity(i))
                changed = true
            case .free where processStartTime(pid) == 0,
                 .claimed where processStartTime(pid) == 0:
                // Died between claiming the entry (CAS on pid) and finishing its registration.
                reclaim(i, identity: ProcessIdentity(pid: pid, startTime: 0))
                changed = true
            default:
                break
            }
        }
        if changed {
            control.frameReady()   // an admitted consumer waiting for first_seq looks again
            signalEvent(wakeFD.rawValue)
            wakeWaiters()
        }
    }

    /// Thread B: polls every watched consumer's pidfd; a readable pidfd is a consumer
    /// that exited, whatever the way (SIGKILL included), and its holds are reclaimed at once.
    func reapExitedConsumers() {
        while true {
            let (running, fds, closing) = shared.withLock { st -> (Bool, [(Int, Int32)], [Int32]) in
                let c = st.toClose
                st.toClose.removeAll()
                return (st.running, st.watched.map { ($0.key, $0.value.fd) }, c)
            }
            for fd in closing { FileDescriptor(adopting: fd).close() }
            guard running else { return }
            let ready = readableDescriptors(among: [wakeFD.rawValue] + fds.map(\.1), timeoutMillis: -1)
            guard !ready.isEmpty else { continue }
            if ready.contains(wakeFD.rawValue) { drainEvent(wakeFD.rawValue) }
            for (index, fd) in fds where ready.contains(fd) {
                let identity = shared.withLock { st -> ProcessIdentity? in
                    st.watched[index]?.fd == fd ? st.watched[index]!.identity : nil
                }
                if let identity { reclaim(index, identity: identity) }
            }
        }
    }

    /// Takes consumer `i` out of the stream: no more reservations, every hold cleared,
    /// entry freed. Runs for dead consumers and for clean detaches alike.
    func reclaim(_ i: Int, identity: ProcessIdentity) {
        let bit: UInt64 = 1 << UInt64(i)
        // A consumer that asked to leave (CLOSING) and then exited did not die.
        let died = control.consumerState(i) != .closing
        shared.withLock { st in
            // Under the lock: no publish can be between reading the mask and storing holders.
            st.losslessMask &= ~bit
            control.publishLosslessMask(st.losslessMask)
            control.clearHolder(bit)
            control.clearSleeper(bit)
            if let w = st.watched.removeValue(forKey: i) { st.toClose.append(w.fd) }
            // Only free the entry if it still belongs to the process we reclaim.
            control.freeConsumer(i, ifOwnedBy: identity.pid)
        }
        if died { control.countReclaimed() }
        signalEvent(wakeFD.rawValue)
        wakeWaiters()
    }
}
