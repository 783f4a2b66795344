import FoundationEssentials
import FrameProcess

/// framesrv's own CUDA transport without Python: a libframesrv producer and consumer in C, the
/// same work as the script's fs-produce and fs-consume (GpuScript.swift) less the interpreter
/// and torch, compiled by `bench gpu` with `cc` against the bundle's include/framesrv.h and
/// lib/libframesrv.so (beside bin/framesrv). A string here, as the script is, so that a
/// relocated framesrv carries it. Each process prints one JSON line as the script's roles do.
extension Bench {
    /// The header's directory and the library's, beside this framesrv (the bundle's layout), or
    /// why there are none.
    static func libframesrvBeside() -> Result<(include: String, lib: String), BenchError> {
        let prefix = URL(fileURLWithPath: selfExecutable).deletingLastPathComponent().deletingLastPathComponent().path
        let include = prefix + "/include", lib = prefix + "/lib"
        guard FileManager.default.fileExists(atPath: include + "/framesrv.h"),
              FileManager.default.fileExists(atPath: lib + "/libframesrv.so") else {
            return .failure(.missingProgram("libframesrv beside framesrv (\(include)/framesrv.h, \(lib)/libframesrv.so)",
                                            remedy: "run the bundle's bin/framesrv (make bundle)"))
        }
        return .success((include, lib))
    }

    /// The program compiled in `scratch`: its path; nil (with why) without cc or libframesrv.
    static func compileGpuCTransport(in scratch: ScratchDirectory) -> (path: String?, why: String) {
        switch libframesrvBeside() {
        case .failure(let why):
            return (nil, "\(why)")
        case .success(let (include, lib)):
            let flags = ["-I" + include, "-L" + lib, "-lframesrv", "-ldl", "-Wl,-rpath," + lib]
            guard let binary = try? CPeers.compile("gpu_c_transport", source: gpuCTransport, in: scratch, flags: flags) else {
                return (nil, "cc could not build the C transport (cc -O2 ... \(flags.joined(separator: " ")))")
            }
            return (binary, "")
        }
    }

    static let gpuCTransport = #"""
        /* produce NAME SECONDS | consume NAME: 3840x2160 nv12 CUDA stream, 8 slots, lossless; the
         * producer reserves on its stream and publishes on it (nothing written), the consumer
         * takes each frame with next on its stream and releases it on that stream. One JSON line.
         * lat-produce NAME FPS SECONDS | lat-consume NAME POLL_US: the same at FPS; the consumer,
         * asleep between frames (POLL_US 0) or busy-polling up to POLL_US around when each is due,
         * synchronizes its stream after next: ready - the frame's publish_ns. */
        #define _GNU_SOURCE
        #include <framesrv.h>
        #include <dlfcn.h>
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>
        #include <sys/resource.h>
        #include <time.h>

        enum { W = 3840, H = 2160, SLOTS = 8, WARMUP = 16 };

        static int (*stream_sync)(void *);   /* cuStreamSynchronize */

        static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
        static double cpu(void) {
            struct rusage r;
            getrusage(RUSAGE_SELF, &r);
            return r.ru_utime.tv_sec + r.ru_stime.tv_sec + (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
        }
        static int fail(const char *what, int status) {
            fprintf(stderr, "%s: %s (%s)\n", what, framesrv_status_name(status), framesrv_last_error());
            return 2;
        }

        /* A non-blocking stream of device 0's primary context, made current (libcuda at run time:
         * $FRAMESRV_LIBCUDA as libframesrv loads it, else libcuda.so.1). */
        static void *make_stream(void) {
            const char *path = getenv("FRAMESRV_LIBCUDA") ? getenv("FRAMESRV_LIBCUDA") : "libcuda.so.1";
            void *cu = dlopen(path, RTLD_NOW);
            if (!cu) { fprintf(stderr, "dlopen %s: %s\n", path, dlerror()); exit(2); }
            int (*init)(unsigned) = (int (*)(unsigned))dlsym(cu, "cuInit");
            int (*get)(int *, int) = (int (*)(int *, int))dlsym(cu, "cuDeviceGet");
            int (*retain)(void **, int) = (int (*)(void **, int))dlsym(cu, "cuDevicePrimaryCtxRetain");
            int (*set)(void *) = (int (*)(void *))dlsym(cu, "cuCtxSetCurrent");
            int (*create)(void **, unsigned) = (int (*)(void **, unsigned))dlsym(cu, "cuStreamCreate");
            stream_sync = (int (*)(void *))dlsym(cu, "cuStreamSynchronize");
            int device = 0;
            void *ctx = NULL, *stream = NULL;
            if (!init || !get || !retain || !set || !create || !stream_sync || init(0) || get(&device, 0) || retain(&ctx, device) ||
                set(ctx) || create(&stream, 1 /* CU_STREAM_NON_BLOCKING */)) {
                fprintf(stderr, "no CUDA stream on device 0\n");
                exit(2);
            }
            return stream;
        }

        static void report(const char *role, long frames, double seconds, double cpu_s) {
            printf("{\"role\": \"%s\", \"frames\": %ld, \"seconds\": %.6f, \"cpu_s\": %.6f, \"copies\": 0.0}\n", role, frames, seconds, cpu_s);
        }

        /* The stream's producer (rate fps, 0: unknown) once a consumer is attached. */
        static framesrv_producer *open_producer(const char *name, int fps) {
            framesrv_producer_options o = { .width = W, .height = H, .pix_fmt = FRAMESRV_PIX_NV12, .slots = SLOTS,
                                            .memory = FRAMESRV_MEMORY_CUDA, .cuda_device = 0, .rate_num = fps, .rate_den = fps ? 1 : 0 };
            framesrv_producer *p;
            int rc = framesrv_producer_open(&p, name, &o);
            if (rc) exit(fail("c-produce: open", rc));
            if ((rc = framesrv_producer_wait_for_consumers(p, 1, 120000))) exit(fail("c-produce: no consumer within 120 s", rc));
            return p;
        }

        static framesrv_consumer *open_consumer(const char *name, unsigned poll_us) {
            framesrv_consumer_options o = { .mode = FRAMESRV_LOSSLESS, .attach_timeout_ms = 120000, .memory = FRAMESRV_MEMORY_CUDA,
                                            .poll_us = poll_us };
            framesrv_consumer *c;
            int rc = framesrv_consumer_open(&c, name, &o);
            if (rc) exit(fail("c-consume: open", rc));
            return c;
        }

        static int produce(const char *name, double seconds) {
            void *stream = make_stream();
            framesrv_producer *p = open_producer(name, 0);
            int rc;
            long frames = 0;
            double t0 = 0, c0 = 0, last = 0, end = 0;
            for (long n = 0; n < WARMUP || last < end; n++) {
                framesrv_frame *f;
                if ((rc = framesrv_producer_reserve_on(p, stream, 10000, &f))) return fail("c-produce: reserve", rc);
                if ((rc = framesrv_producer_publish_on(p, f, stream))) return fail("c-produce: publish", rc);
                last = now();
                if (n + 1 == WARMUP) t0 = last, c0 = cpu(), end = t0 + seconds;
                else if (n >= WARMUP) frames++;
            }
            double c1 = cpu();
            framesrv_producer_end(p, 0);
            framesrv_producer_close(p);
            report("producer", frames, last - t0, c1 - c0);
            return 0;
        }

        static int consume(const char *name) {
            void *stream = make_stream();
            framesrv_consumer *c = open_consumer(name, 0);
            int rc;
            long frames = 0, n = 0;
            double t0 = 0, c0 = 0, last = 0;
            for (;;) {
                framesrv_frame *f;
                rc = framesrv_consumer_next_on(c, stream, 10000, &f);
                if (rc == FRAMESRV_END) break;
                if (rc) return fail("c-consume: next", rc);
                if ((rc = framesrv_frame_release_on(f, stream))) return fail("c-consume: release", rc);
                last = now();
                if (++n == WARMUP) t0 = last, c0 = cpu();
                else if (n > WARMUP) frames++;
            }
            double c1 = cpu();
            framesrv_consumer_close(c);
            if (frames == 0) { fprintf(stderr, "c-consume: no frame after the %d warm-up frames\n", WARMUP); return 2; }
            report("consumer", frames, last - t0, c1 - c0);
            return 0;
        }

        static int lat_produce(const char *name, int fps, double seconds) {
            void *stream = make_stream();
            framesrv_producer *p = open_producer(name, fps);
            double start = now();
            long count = WARMUP + (long)(fps * seconds > 1 ? fps * seconds : 1);
            for (long i = 0; i < count; i++) {
                double left = start + (double)i / fps - now();
                if (left > 0) nanosleep(&(struct timespec){ (time_t)left, (long)((left - (time_t)left) * 1e9) }, NULL);
                framesrv_frame *f;
                int rc = framesrv_producer_reserve_on(p, stream, 10000, &f);
                if (rc || (rc = framesrv_producer_publish_on(p, f, stream))) return fail("c-lat-produce: reserve/publish", rc);
            }
            framesrv_producer_end(p, 0);
            framesrv_producer_close(p);
            return 0;
        }

        static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }

        static int lat_consume(const char *name, unsigned poll_us) {
            void *stream = make_stream();
            framesrv_consumer *c = open_consumer(name, poll_us);
            static double lat[1 << 20], wake[1 << 20];
            long n = 0, kept = 0;
            for (;;) {
                framesrv_frame *f;
                int rc = framesrv_consumer_next_on(c, stream, 10000, &f);
                if (rc == FRAMESRV_END) break;
                if (rc) return fail("c-lat-consume: next", rc);
                struct timespec t;
                clock_gettime(CLOCK_MONOTONIC, &t);
                double woken = t.tv_sec * 1e9 + t.tv_nsec;
                if (stream_sync(stream)) { fprintf(stderr, "c-lat-consume: cuStreamSynchronize failed\n"); return 2; }
                clock_gettime(CLOCK_MONOTONIC, &t);
                double ready = t.tv_sec * 1e9 + t.tv_nsec, published = (double)framesrv_frame_info_of(f)->publish_ns;
                if (++n > WARMUP && kept < (1 << 20)) lat[kept] = (ready - published) / 1e3, wake[kept++] = (woken - published) / 1e3;
                framesrv_frame_release_on(f, stream);
            }
            framesrv_consumer_close(c);
            if (kept == 0) { fprintf(stderr, "c-lat-consume: no frame after the warm-up\n"); return 2; }
            qsort(lat, kept, sizeof *lat, cmp);
            qsort(wake, kept, sizeof *wake, cmp);
            printf("{\"role\": \"latency\", \"frames\": %ld, \"p50_us\": %.3f, \"p99_us\": %.3f, \"wake_p50_us\": %.3f}\n", kept,
                   lat[kept / 2], lat[(long)(kept * 0.99) < kept ? (long)(kept * 0.99) : kept - 1], wake[kept / 2]);
            return 0;
        }

        int main(int argc, char **argv) {
            if (argc == 5 && !strcmp(argv[1], "lat-produce")) return lat_produce(argv[2], atoi(argv[3]), atof(argv[4]));
            if (argc == 4 && !strcmp(argv[1], "lat-consume")) return lat_consume(argv[2], (unsigned)atoi(argv[3]));
            if (argc == 4 && !strcmp(argv[1], "produce")) return produce(argv[2], atof(argv[3]));
            if (argc == 3 && !strcmp(argv[1], "consume")) return consume(argv[2]);
            fprintf(stderr, "usage: %s produce NAME SECONDS | consume NAME | lat-produce NAME FPS SECONDS | lat-consume NAME POLL_US\n", argv[0]);
            return 2;
        }
        """#
}
