import Foundation
import FrameServer
import Glibc
import Testing

/// `framesrv web`: its API against `ls --json`, its page in headless Chromium, its token and its load.
@Suite(.serialized) struct WebTests {
    /// A three-stage chain with three streams: produce ! filter ! filter ! sink.
    /// SMPTE bars: a still picture, so a preview shown at any moment can be compared with ffmpeg's.
    static let chain = "produce -f lavfi -i smptebars=size=320x240:rate=25 -re ! filter --preset gray ! filter --preset blur=2 ! sink --null"

    /// Starts `framesrv web` on a free port of `listen`'s host; its port and the URL it printed.
    func startWeb(_ scratch: Scratch, _ extra: [String] = [], listen: String = "127.0.0.1:0",
                  environment: [String: String] = [:]) throws -> (web: Spawned, port: UInt16, url: String) {
        let web = try scratch.start(["web", "--listen", listen] + extra, environment: environment)
        var url = ""
        let printed = eventually(timeout: 20) {
            url = web.stdout.split(separator: " ").last.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) } ?? ""
            return url.hasPrefix("http://")
        }
        try #require(printed, "framesrv web printed no URL: \(web.stderr)")
        let port = try #require(URLComponents(string: url)?.port.flatMap { UInt16($0) })
        return (web, port, url)
    }

    /// Starts `framesrv run CHAIN` and waits until its three streams run and have delivered frames.
    func startChain(_ scratch: Scratch) throws -> Spawned {
        let run = try scratch.start(["run", "--quiet", Self.chain])
        let running = eventually(timeout: 30) {
            let streams = scratch.directory.streamNames().compactMap { scratch.snapshot($0) }
            return streams.count == 3 && streams.allSatisfy { $0.state == "running" && $0.published > 5 }
        }
        try #require(running, "the chain did not start: \(run.stderr)")
        return run
    }

    func stop(_ run: Spawned) {
        run.signal(SIGINT)
        run.wait(timeout: 10)
    }

    @Test func refusesANonLoopbackAddressWithoutAToken() throws {
        let scratch = try Scratch()
        let r = try scratch.run(["web", "--listen", "0.0.0.0:0"], timeout: 20)
        #expect(r.status == 1)
        let lines = r.stderr.split(separator: "\n")
        #expect(lines.count == 1)
        #expect(r.stderr.contains("--token") && r.stderr.contains("0.0.0.0"))
        #expect(r.stdout.isEmpty)
        // A token opens any address; `--token` alone prints a random one in the URL.
        let (web, port, url) = try startWeb(scratch, ["--token"])
        defer { web.kill() }
        let token = try #require(URLComponents(string: url)?.queryItems?.first { $0.name == "token" }?.value)
        #expect(token.count == 48)
        #expect(http(port, "/api/streams")?.status == 401)
        #expect(http(port, "/api/streams", headers: ["Authorization": "Bearer \(token)"])?.status == 200)
    }

    @Test(arguments: [
        (["web", "--listen", "localhost"], "--listen must be HOST:PORT"),
        (["web", "--listen", "example.com:80"], "numeric host"),
        (["web", "--listen", "127.0.0.1:70000"], "--listen must be"),
        (["web", "--token", "short"], "at least 8"),
        (["web", "--token", "abcdefgh", "--token"], "twice"),
        (["web", "--bogus"], "unknown option '--bogus'"),
        (["web", "--listen", "[::]:0"], "not a loopback address"),
    ])
    func badInputGetsOneClearLine(_ args: [String], _ expected: String) throws {
        let scratch = try Scratch()
        let (status, out, err) = try scratch.run(args, timeout: 20)
        #expect(status == 1 || status == 2)
        #expect(err.split(separator: "\n").count == 1 && err.hasPrefix("framesrv: error: ") && err.contains(expected), "got: \(err)")
        #expect(out.isEmpty)
    }

    @Test func aPortInUseIsOneLine() throws {
        let scratch = try Scratch()
        let (web, port, _) = try startWeb(scratch)
        defer { web.kill() }
        let (status, _, err) = try scratch.run(["web", "--listen", "127.0.0.1:\(port)"], timeout: 20)
        #expect(status == 1 && err.split(separator: "\n").count == 1 && err.contains("cannot listen on 127.0.0.1:\(port)"), "got: \(err)")
        #expect(http(port, "/api/streams")?.status == 200)
    }

    @Test func aWrongTokenGets401AndNoFrameBytes() throws {
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "--pattern", "--out", "cam", "--size", "160x120"])
        defer { producer.kill() }
        #expect(eventually { (scratch.snapshot("cam")?.published ?? 0) > 3 })
        let token = "s3cret-token-for-tests"
        let (web, port, _) = try startWeb(scratch, ["--token", token])
        defer { web.kill() }
        let jpegStart: [UInt8] = [0xFF, 0xD8, 0xFF], pngMagic: [UInt8] = [0x89, 0x50, 0x4E, 0x47]
        for path in ["/", "/api/streams", "/api/graph", "/api/streams/cam/snapshot.png", "/api/streams/cam/preview.mjpeg?fps=5"] {
            for headers in [[:], ["Authorization": "Bearer wrong-token-xxxxx"], ["Cookie": "framesrv_token=wrong"]] {
                let reply = try #require(http(port, path, headers: headers, timeout: 3), "\(path): no reply")
                #expect(reply.status == 401, "\(path) \(headers)")
                #expect(!contains(reply.body, jpegStart) && !contains(reply.body, pngMagic), "\(path): frame bytes without the token")
            }
            #expect(http(port, path + (path.contains("?") ? "&" : "?") + "token=wrong", timeout: 3)?.status == 401)
        }
        #expect(http(port, "/api/streams/cam/control", method: "POST", body: "pause")?.status == 401)
        // The right token: in the query (which sets the cookie), as the cookie, or as a bearer.
        let page = try #require(http(port, "/?token=\(token)"))
        #expect(page.status == 200 && page.text.contains("<svg id=\"graph\""))
        let cookie = try #require(page.header("Set-Cookie").first)
        #expect(cookie.hasPrefix("framesrv_token=\(token)") && cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"))
        #expect(http(port, "/api/streams", headers: ["Cookie": "framesrv_token=\(token)"])?.status == 200)
        let streams = try #require(http(port, "/api/streams", headers: ["Authorization": "Bearer \(token)"])?.json as? [[String: Any]])
        #expect(streams.map { $0["name"] as? String } == ["cam"])
        // ...and with it, the frame bytes the wrong one did not get.
        let bearer = ["Authorization": "Bearer \(token)"]
        let png = try #require(http(port, "/api/streams/cam/snapshot.png", headers: bearer))
        #expect(png.status == 200 && png.body.starts(with: pngMagic) && png.header("Content-Type") == ["image/png"])
        let mjpeg = try #require(http(port, "/api/streams/cam/preview.mjpeg?fps=5", headers: bearer, maxBytes: 4 << 10, timeout: 5))
        #expect(mjpeg.status == 200 && contains(mjpeg.body, jpegStart))
        #expect(mjpeg.header("Content-Type").first?.hasPrefix("multipart/x-mixed-replace") == true)
        // Loopback only answers loopback names (DNS rebinding), and takes no cross-site control.
        #expect(http(port, "/api/streams", headers: ["Host": "evil.example:80", "Authorization": "Bearer \(token)"])?.status == 403)
        #expect(http(port, "/api/streams/cam/control", method: "POST", headers: ["Origin": "http://evil.example", "Authorization": "Bearer \(token)"],
                     body: "pause")?.status == 403)
    }

    @Test func apiMatchesLsJsonAtTheSameMoment() throws {
        let scratch = try Scratch()
        let run = try startChain(scratch)
        defer { stop(run) }
        let (web, port, _) = try startWeb(scratch)
        defer { web.kill() }
        // Two samples, so fps is measured.
        #expect(eventually(timeout: 10) { ((http(port, "/api/history")?.json as? [String: Any])?["samples"] as? [Any])?.count ?? 0 >= 2 })
        let api = try #require(http(port, "/api/streams")?.json as? [[String: Any]])
        let ls = try scratch.run(["ls", "--json"])
        #expect(ls.status == 0)
        let cli = try #require(try JSONSerialization.jsonObject(with: Data(ls.stdout.utf8)) as? [[String: Any]])
        #expect(api.count == 3)
        #expect(api.map { $0["name"] as? String } == cli.map { $0["name"] as? String })
        for (a, c) in zip(api, cli) {
            let name = a["name"] as? String ?? "?"
            #expect(a["producerPID"] as? Int == c["producerPID"] as? Int, "\(name)")
            #expect(Set(keys(a)) == Set(keys(c)), "\(name): the same fields as ls --json")
            let consumers = { (s: [String: Any]) in ((s["consumers"] as? [[String: Any]]) ?? []).map { $0["pid"] as? Int ?? -1 }.sorted() }
            #expect(consumers(a) == consumers(c) && consumers(a).count == 1, "\(name)")
            // Counts within one refresh (1 s of frames at up to 30 fps, and ls's own 250 ms).
            let pa = a["published"] as? Int ?? 0, pc = c["published"] as? Int ?? 0
            #expect(pa > 0 && pc >= pa && pc - pa <= 60, "\(name): published \(pa) (api) vs \(pc) (ls)")
            #expect((a["fps"] as? Double ?? 0) > 0, "\(name): measured fps")
        }
        // top --json's refresh and the graph: the same streams, the chain's edges.
        let top = try #require(http(port, "/api/top")?.json as? [String: Any])
        #expect(((top["streams"] as? [[String: Any]]) ?? []).map { $0["name"] as? String } == cli.map { $0["name"] as? String })
        let graph = try #require(http(port, "/api/graph")?.json as? [String: Any])
        #expect(((graph["streams"] as? [Any]) ?? []).count == 3)
        #expect(((graph["processes"] as? [Any]) ?? []).count == 4)
        #expect(((graph["edges"] as? [Any]) ?? []).count == 6)
        #expect(http(port, "/api/nothing")?.status == 404)
        #expect(http(port, "/api/streams/nosuch/snapshot.png")?.status == 404)
    }

    func keys(_ o: [String: Any]) -> [String] { Array(o.keys) }

    /// The page's controls go through /api/streams/NAME/control as `framesrv ctl` does: pause,
    /// status, seek, rate and resume on a producer that plays a file; bad controls are 400 or 409.
    @Test func controlsPlayAFile() throws {
        let scratch = try Scratch()
        let clip = try PlaybackControlTests.clip(scratch)
        let producer = try PlaybackControlTests.producer(clip, "film", ["-re", "--loop", "-1"], scratch)
        defer { producer.kill() }
        let (web, port, _) = try startWeb(scratch)
        defer { web.kill() }
        func control(_ body: String) -> (Int, [String: Any]) {
            let r = http(port, "/api/streams/film/control", method: "POST", body: body)
            return (r?.status ?? 0, (r?.json as? [String: Any]) ?? [:])
        }
        #expect(control("pause").0 == 200)
        let (status, paused) = control("status")
        #expect(status == 200 && paused["paused"] as? Bool == true, "\(paused)")
        #expect(control("seek 2").0 == 200 && control("rate 2").0 == 200)
        #expect(control("resume").0 == 200)
        #expect(control("status").1["rate"] as? Double == 2)
        #expect(control("rate 0").0 == 400 && control("bogus").0 == 400)
        #expect(control("seek 3600").0 == 409)
        #expect(http(port, "/api/streams/film/control")?.status == 405)
        #expect(http(port, "/api/streams/nosuch/control", method: "POST", body: "pause")?.status == 404)
        // The page's rows say it plays: /api/streams has its playback, as ls --json.
        #expect(eventually(timeout: 5) {
            ((http(port, "/api/streams")?.json as? [[String: Any]])?.first?["playback"] as? [String: Any])?["paused"] as? Bool == false
        })
    }

    /// Headless Chromium's arguments: a fixed window, 4 s of the page's time.
    func chromium(_ scratch: Scratch) -> [String] {
        ["--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=\(scratch.path)/chromium",
         "--virtual-time-budget=4000", "--window-size=1200,1000", "--force-device-scale-factor=1"]
    }

    /// The page at `url` as Chromium leaves it after 4 s of its time.
    func dumpDOM(_ scratch: Scratch, _ url: String) throws -> String {
        let dump = try Spawned(try RequiredTool.chromium.path(), chromium(scratch) + ["--dump-dom", url], environment: [:],
                               logDirectory: scratch.path)
        #expect(dump.wait(timeout: 60) == 0, "chromium: \(dump.stderr.suffix(500))")
        return dump.stdout
    }

    @Test func chromiumShowsEveryStreamAndConsumer() throws {
        let scratch = try Scratch()
        let run = try startChain(scratch)
        defer { stop(run) }
        let (web, _, url) = try startWeb(scratch)
        defer { web.kill() }
        let chromium = chromium(scratch)
        let dom = try dumpDOM(scratch, url)
        let streams = scratch.directory.streamNames()
        #expect(streams.count == 3)
        for name in streams {
            #expect(dom.contains("class=\"node stream\" transform=") && dom.contains("data-stream=\"\(name)\""), "graph: \(name)")
            #expect(dom.contains("<h3 class=\"stream-name\">\(name)</h3>"), "card: \(name)")
            // The chain's consumers (the server's own preview consumer may attach after the page drew its tables).
            for c in scratch.snapshot(name)?.consumers ?? [] where c.pid != web.pid {
                #expect(dom.contains("<td class=\"pid\">\(c.pid)</td>"), "consumer pid \(c.pid) of \(name)")
            }
        }
        #expect(dom.components(separatedBy: "class=\"node stream\"").count - 1 == 3, "the graph's three streams")
        // The first stream's preview, where the page says it is (same window size, fixed layout).
        let first = try #require(scratch.directory.streamNames().sorted().first)
        let rect = try #require(previewRect(dom, first), "no preview box for \(first)")
        #expect(rect.width == 320 && rect.height == 240, "\(rect)")
        let shot = scratch.path + "/page.png"
        let screenshot = try Spawned(try RequiredTool.chromium.path(), chromium + ["--hide-scrollbars", "--screenshot=\(shot)", url],
                                     environment: [:], logDirectory: scratch.path)
        #expect(screenshot.wait(timeout: 60) == 0)
        let shown = try rgb(scratch, ["-i", shot, "-vf", "crop=\(rect.width):\(rect.height):\(rect.x):\(rect.y)"], "shown")
        let frame = try rgb(scratch, ["-f", "lavfi", "-i", "smptebars=size=320x240", "-frames:v", "1"], "frame")
        #expect(shown.count == 320 * 240 * 3 && frame.count == shown.count)
        let mean = Double(shown.reduce(0) { $0 + Int($1) }) / Double(max(1, shown.count))
        let spread = sqrt(shown.reduce(0.0) { $0 + (Double($1) - mean) * (Double($1) - mean) } / Double(max(1, shown.count)))
        #expect(spread > 40, "the preview looks blank: mean \(mean), deviation \(spread)")
        let difference = Double(zip(shown, frame).reduce(0) { $0 + abs(Int($1.0) - Int($1.1)) }) / Double(max(1, shown.count))
        #expect(difference < 12, "preview vs ffmpeg's frame: mean absolute difference \(difference) per channel")
    }

    /// A live source dropping frames for a slow lossless consumer, with four consumers in
    /// one column of the chain: the page shows the source's drops (as the JSON has them),
    /// labels latencies of 100 ms and more in ms (not clamped to a lower bucket) and shows
    /// the whole graph (no node cut off below).
    @Test func pageShowsDropsLatencyInItsUnitAndTheWholeChain() throws {
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "--pattern", "--out", "cam", "--size", "64x48", "--rate", "200", "--slots", "4", "--live-source"])
        defer { producer.kill() }
        var sinks = [try scratch.start(["sink", "--in", "cam", "--null", "--lossless", "--hold-us", "50000", "--name", "slow", "-q"])]
        for i in 0..<3 { sinks.append(try scratch.start(["sink", "--in", "cam", "--null", "--lossless", "--name", "fast\(i)", "-q"])) }
        defer { for s in sinks { s.kill() } }
        #expect(eventually(timeout: 20) { scratch.snapshot("cam").map { $0.dropped > 0 && $0.consumers.count == 4 } ?? false })
        let (web, port, url) = try startWeb(scratch)
        defer { web.kill() }
        #expect(eventually(timeout: 10) { ((http(port, "/api/history")?.json as? [String: Any])?["samples"] as? [Any])?.count ?? 0 >= 2 })
        let graph = try #require(http(port, "/api/graph")?.json as? [String: Any])
        let stream = try #require((graph["streams"] as? [[String: Any]])?.first)
        #expect((stream["dropped"] as? Int ?? 0) > 0, "\(stream)")
        let dom = try dumpDOM(scratch, url)
        let dropped = try #require(dom.range(of: "<span class=\"dropped\">dropped at source ").map { Int(dom[$0.upperBound...].prefix { $0.isNumber }) ?? 0 })
        #expect(dropped > 0, "the card says the source's drops")
        let label = try #require(dom.range(of: "data-plot=\"latency\" data-label=\"").map { String(dom[$0.upperBound...].prefix { $0 != "\"" }) })
        #expect(label.hasPrefix("latency (max ") && (label.hasSuffix(" ms)") || label.hasSuffix(" s)")), "\(label)")
        #expect(label.contains("&gt;=100.0 ms") || label.contains(" s)"), "the slow consumer waits 100 ms and more: \(label)")
        #expect(dom.contains("id=\"chain\" data-fits=\"1\""), "the chain's graph is cut off")
    }

    /// A page without streams names the directory it reads; a new producer under an old
    /// name starts new plots (its pid), without the earlier run's samples.
    @Test func pageNamesItsDirectoryAndStartsNewSeriesForANewProducer() throws {
        let scratch = try Scratch()
        let (web, port, url) = try startWeb(scratch)
        defer { web.kill() }
        #expect(try dumpDOM(scratch, url).contains("no streams in \(scratch.path) (FRAMESRV_DIR)"))
        func samples(of pid: Int32) -> Int {
            let history = (http(port, "/api/history")?.json as? [String: Any])?["samples"] as? [[String: Any]] ?? []
            return history.filter { (($0["streams"] as? [[String: Any]]) ?? []).contains { $0["producerPID"] as? Int == Int(pid) } }.count
        }
        let first = try scratch.start(["produce", "--pattern", "--out", "cam", "--size", "64x48", "--rate", "50"])
        #expect(eventually(timeout: 20) { samples(of: first.pid) >= 2 })
        first.signal(SIGINT)
        #expect(first.wait() == 0)
        let second = try scratch.start(["produce", "--pattern", "--out", "cam", "--size", "64x48", "--rate", "50"])
        defer { second.kill() }
        #expect(eventually(timeout: 20) { samples(of: second.pid) >= 2 })
        let dom = try dumpDOM(scratch, url)
        let series = try #require(dom.range(of: "data-plot=\"fps\" data-label=\"").map { String(dom[$0.upperBound...].prefix { $0 != ">" }) })
        #expect(series.contains("data-series=\"stream pid \(second.pid)") && !series.contains("pid \(first.pid)"), "\(series)")
    }

    /// The layout box the page wrote on `stream`'s preview image (data-rect="x,y,w,h").
    func previewRect(_ dom: String, _ stream: String) -> (x: Int, y: Int, width: Int, height: Int)? {
        guard let img = dom.range(of: "alt=\"preview of \(stream)\" data-rect=\"") else { return nil }
        let values = dom[img.upperBound...].prefix { $0 != "\"" }.split(separator: ",").compactMap { Int($0) }
        return values.count == 4 ? (values[0], values[1], values[2], values[3]) : nil
    }

    /// ffmpeg's decoding of INPUT ARGS as raw RGB24 bytes.
    func rgb(_ scratch: Scratch, _ input: [String], _ name: String) throws -> [UInt8] {
        let out = scratch.path + "/\(name).rgb"
        let p = try Spawned(try RequiredTool.ffmpeg.path(), ["-v", "error", "-y"] + input + ["-f", "rawvideo", "-pix_fmt", "rgb24", out],
                            environment: [:], logDirectory: scratch.path)
        #expect(p.wait(timeout: 30) == 0, "ffmpeg: \(p.stderr)")
        return [UInt8]((try? Data(contentsOf: URL(fileURLWithPath: out))) ?? Data())
    }

    @Test func fiftyPageLoadsAndTenPreviewsStayBounded() throws {
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "--pattern", "--out", "cam", "--size", "320x240"])
        defer { producer.kill() }
        #expect(eventually { (scratch.snapshot("cam")?.published ?? 0) > 3 })
        let (web, port, _) = try startWeb(scratch)
        defer { web.kill() }
        let failures = Locked(0), loads = Locked(0), previews = Locked(0)
        let deadline = Date().addingTimeInterval(10)
        var threads: [Thread] = []
        for i in 0..<60 {
            let t = Thread {
                func count(_ ok: Bool) { if ok { loads.withLock { $0 += 1 } } else { failures.withLock { $0 += 1 } } }
                if i < 50 {
                    // A page: the document, then its script's polls, twice a second (a browser polls once).
                    count(http(port, "/")?.status == 200)
                    while Date() < deadline {
                        for path in ["/api/graph", "/api/top", "/api/history?since=\(Date().timeIntervalSince1970 - 2)"] {
                            count(http(port, path)?.status == 200)
                        }
                        usleep(500_000)
                    }
                } else {
                    // A preview, read for 3 s at a time: JPEG parts.
                    while Date() < deadline {
                        let r = http(port, "/api/streams/cam/preview.mjpeg?fps=10&width=320", maxBytes: 4 << 20, timeout: 3)
                        if r?.status == 200, contains(r?.body ?? [], [0xFF, 0xD8, 0xFF]) { previews.withLock { $0 += 1 } } else { failures.withLock { $0 += 1 } }
                    }
                }
            }
            t.stackSize = 1 << 20
            threads.append(t)
            t.start()
        }
        var peak = 0
        while Date() < deadline {
            peak = max(peak, residentKiB(web.pid))
            usleep(200_000)
        }
        #expect(eventually(timeout: 20) { threads.allSatisfy { $0.isFinished } })
        #expect(web.isRunning, "framesrv web died: \(web.stderr.suffix(500))")
        #expect(failures.withLock { $0 } == 0)
        #expect(loads.withLock { $0 } > 50 * 10)
        #expect(previews.withLock { $0 } >= 10)
        #expect(peak > 0 && peak < 200 * 1024, "peak RSS \(peak) KiB")
        #expect(http(port, "/api/streams")?.status == 200)
    }

    func residentKiB(_ pid: Int32) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }) else { return 0 }
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }
}
