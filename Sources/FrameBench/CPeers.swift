import FoundationEssentials
import FrameProcess
import FrameServer

/// The benchmarks' small C peers: each is compiled with `cc -O2` into a scratch directory and
/// prints "P50 P99" (microseconds) on one line: the pipe of `bench audio` (CPeers.pipeSource)
/// and the bare futex wake of `bench transport` (CPeers.futexSource), the floor of any wake.
enum CPeers {
    /// Compiles `source` as `name` in `scratch` and runs it with `arguments`: its p50 and p99,
    /// nil without `cc`; a run that fails, or lasts more than `within` seconds, throws (`bench`
    /// names the benchmark).
    static func latency(_ name: String, source: String, arguments: [String], in scratch: ScratchDirectory,
                        bench: String, within: Double) throws -> (p50: Double, p99: Double)? {
        try compile(name, source: source, in: scratch).map { try run($0, arguments, bench: bench, within: within) }
    }

    /// `source` compiled as `name` in `scratch` (`flags` after the file: -I, -L, -l): the
    /// program's path, nil without `cc` or when it fails.
    static func compile(_ name: String, source: String, in scratch: ScratchDirectory, flags: [String] = []) throws -> String? {
        let file = scratch.path + "/\(name).c", binary = scratch.path + "/\(name)"
        try Data(source.utf8).write(to: URL(fileURLWithPath: file))
        guard let cc = try? Child(["cc", "-O2", "-o", binary, file] + flags, label: "cc", executable: "/usr/bin/env", captureErrors: true),
              cc.finishWithErrors().status == 0 else { return nil }
        return binary
    }

    /// Runs a compiled peer: the p50 and p99 it prints. A run still going after `within`
    /// seconds is stopped and said.
    static func run(_ binary: String, _ arguments: [String], bench: String, within: Double) throws -> (p50: Double, p99: Double) {
        let peer = try Child(arguments, label: binary, executable: binary)
        let (status, out, _, killed) = finish(peer, within: within)
        let numbers = out.split(separator: " ").compactMap { Double($0.trimmed) }
        guard status == 0, !killed, numbers.count == 2 else {
            let stage = "the C peer \(binary)" + (killed ? " (stopped: still running after \(Int(within)) s)" : "")
            throw BenchError.stageFailed(bench: bench, stage: stage, status: status, said: out)
        }
        return (numbers[0], numbers[1])
    }

    /// What both programs share: the clock, the percentile sort and the paced sender's sleep.
    static let common = #"""
    #include <stdio.h>
    #include <stdlib.h>
    #include <string.h>
    #include <time.h>
    #include <unistd.h>
    #include <sys/wait.h>
    static long long now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000LL + t.tv_nsec; }
    static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
    static void sleep_until(long long due) {
        while (now() < due) { struct timespec t = {0, 200000}; long long left = due - now(); if (left < 200000) t.tv_nsec = left > 0 ? left : 0; nanosleep(&t, 0); }
    }
    static void print_percentiles(double *lat, int frames) {
        qsort(lat, (size_t)frames, sizeof *lat, cmp);
        printf("%.1f %.1f\n", lat[frames / 2], lat[(int)(frames * 0.99)]);
    }

    """#

    /// BYTES FPS FRAMES: the parent writes FRAMES frames of BYTES (each starting with its
    /// CLOCK_MONOTONIC time) at FPS into a pipe; the child reads them, timing each from its
    /// write to the end of its read.
    static let pipeSource = common + #"""
    int main(int argc, char **argv) {
        if (argc != 4) return 5;
        size_t bytes = (size_t)atol(argv[1]); double fps = atof(argv[2]); int frames = atoi(argv[3]);
        int fd[2]; if (pipe(fd) != 0) return 1;
        char *buf = calloc(1, bytes);
        pid_t child = fork();
        if (child == 0) {
            close(fd[1]);
            double *lat = calloc((size_t)frames, sizeof *lat);
            for (int i = 0; i < frames; i++) {
                size_t got = 0; while (got < bytes) { ssize_t r = read(fd[0], buf + got, bytes - got); if (r <= 0) return 2; got += (size_t)r; }
                long long sent; memcpy(&sent, buf, sizeof sent); lat[i] = (now() - sent) / 1000.0;
            }
            print_percentiles(lat, frames);
            return 0;
        }
        close(fd[0]);
        long long start = now();
        for (int i = 0; i < frames; i++) {
            sleep_until(start + (long long)(i * 1e9 / fps));
            long long t = now(); memcpy(buf, &t, sizeof t);
            if (write(fd[1], buf, bytes) != (ssize_t)bytes) return 3;
        }
        close(fd[1]);
        int status; waitpid(child, &status, 0);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 4;
    }
    """#

    /// FPS FRAMES WARMUP [shm]: two processes over one shared page; the parent stores the time
    /// and a new sequence number, then FUTEX_WAKE (not _PRIVATE, as across framesrv's processes),
    /// at FPS; the child, asleep in FUTEX_WAIT between frames, times each from the store to its
    /// wake, the first WARMUP left out. Nothing else: the floor of any cross-process wake on
    /// this machine. With `shm`, the page is a file's under /dev/shm and each wait has a 500 ms
    /// timeout, as framesrv's control segment and its consumer's sleep have (the same floor
    /// done framesrv's way).
    static let futexSource = common + #"""
    #include <fcntl.h>
    #include <limits.h>
    #include <stdint.h>
    #include <linux/futex.h>
    #include <signal.h>
    #include <sys/mman.h>
    #include <sys/prctl.h>
    #include <sys/syscall.h>
    struct shared { uint32_t seq; uint32_t pad; long long sent[256]; };   /* sent[frame % 256]: its own time */
    int main(int argc, char **argv) {
        if (argc != 4 && argc != 5) return 5;
        double fps = atof(argv[1]); int frames = atoi(argv[2]), warmup = atoi(argv[3]), shm = argc == 5;
        if (warmup < 0 || warmup >= frames) return 5;
        struct shared *s;
        if (shm) {
            char path[] = "/dev/shm/framesrv-bench-futex-XXXXXX";
            int fd = mkstemp(path);
            if (fd < 0 || ftruncate(fd, 4096) != 0) return 1;
            s = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            unlink(path);
            close(fd);
        } else {
            s = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        }
        if (s == MAP_FAILED) return 1;
        pid_t parent = getpid(), child = fork();
        if (child == 0) {   /* until the last frame: a frame overtaken by the next while we ran is not timed */
            prctl(PR_SET_PDEATHSIG, SIGKILL);   /* the sender died: no frame will come */
            if (getppid() != parent) return 3;
            double *lat = calloc((size_t)frames, sizeof *lat);
            uint32_t seen = 0;
            int timed = 0;
            struct timespec limit = {0, 500000000};
            while (seen < (uint32_t)frames) {
                while (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) == seen)
                    syscall(SYS_futex, &s->seq, FUTEX_WAIT, seen, shm ? &limit : 0, 0, 0);
                long long woke = now();
                seen = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
                if (seen > (uint32_t)warmup) lat[timed++] = (woke - __atomic_load_n(&s->sent[seen % 256], __ATOMIC_ACQUIRE)) / 1000.0;
            }
            if (timed == 0) return 6;
            print_percentiles(lat, timed);   /* the first frames (warmup): not timed */
            return 0;
        }
        long long start = now();
        usleep(20000);   /* the child is asleep in FUTEX_WAIT before the first frame */
        for (int i = 0; i < frames; i++) {
            sleep_until(start + 20000000LL + (long long)(i * 1e9 / fps));
            __atomic_store_n(&s->sent[(i + 1) % 256], now(), __ATOMIC_RELEASE);
            __atomic_store_n(&s->seq, (uint32_t)(i + 1), __ATOMIC_RELEASE);
            syscall(SYS_futex, &s->seq, FUTEX_WAKE, INT_MAX, 0, 0, 0);
        }
        int status; waitpid(child, &status, 0);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 4;
    }
    """#
}
