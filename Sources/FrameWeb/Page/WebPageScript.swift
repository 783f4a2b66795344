/// The page's script: polls /api/graph, /api/top and /api/history once a second and draws.
enum WebPageScript {
    static let js = #"""
    "use strict";
    const samples = [];            // samples of /api/history, oldest first (at most 300)
    let lastTime = 0, playback = {}, topByName = {};
    const $ = (tag, attrs = {}, text) => { const e = document.createElement(tag); for (const k in attrs) e.setAttribute(k, attrs[k]); if (text !== undefined) e.textContent = text; return e; };
    const svgEl = (tag, attrs = {}, text) => { const e = document.createElementNS("http://www.w3.org/2000/svg", tag); for (const k in attrs) e.setAttribute(k, attrs[k]); if (text !== undefined) e.textContent = text; return e; };
    const fmt = (v, d = 1) => v === null || v === undefined ? "-" : Number(v).toFixed(d);
    const api = (path) => fetch(path, {credentials: "same-origin", cache: "no-store"}).then(r => r.ok ? r.json() : Promise.reject(r.status));
    const url = (name, what) => "api/streams/" + encodeURIComponent(name) + "/" + what;

    function drawGraph(g) {
      const svg = document.getElementById("graph");
      svg.replaceChildren();
      const ids = [], layer = {}, incoming = {};
      for (const p of g.processes) ids.push("pid:" + p.pid);
      for (const s of g.streams) ids.push("stream:" + s.name);
      for (const id of ids) { layer[id] = 0; incoming[id] = []; }
      for (const e of g.edges) if (incoming[e.to]) incoming[e.to].push(e.from);
      for (let pass = 0; pass < ids.length; pass++)       // longest path from a source (bounded: no cycle loops)
        for (const id of ids) for (const f of incoming[id]) if (layer[f] !== undefined) layer[id] = Math.max(layer[id], layer[f] + 1);
      const rows = {}, pos = {}, W = 124, H = 34, GX = 134, GY = 26;
      for (const id of ids) { const l = Math.min(layer[id], 40); rows[l] = (rows[l] || 0); pos[id] = {x: 10 + l * (W + GX), y: 10 + rows[l] * (H + GY)}; rows[l]++; }
      const height = 20 + Math.max(1, ...Object.values(rows)) * (H + GY), width = 20 + (Math.max(0, ...Object.keys(rows).map(Number)) + 1) * (W + GX);
      svg.setAttribute("height", height); svg.setAttribute("width", Math.max(width, 300));   // full size: #chain grows with it, scrolls sideways
      for (const e of g.edges) {
        const a = pos[e.from], b = pos[e.to]; if (!a || !b) continue;
        const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2, mx = (x1 + x2) / 2;
        const cls = "edge" + (e.lagging ? " lagging" : "") + (e.missing ? " missing" : "");
        svg.append(svgEl("path", {class: cls, d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`, "data-from": e.from, "data-to": e.to}));
        const lines = e.consumer === null || e.consumer === undefined ? [fmt(e.fps) + " fps"]
          : [`${fmt(e.fps)} fps lag ${e.lag} miss ${e.missed}`, `p50 ${e.latencyP50} p99 ${e.latencyP99}`];
        lines.forEach((t, i) => svg.append(svgEl("text", {class: "edge-label" + (i ? " latency" : ""), x: x1 + 6, y: (y1 + y2) / 2 - 4 + i * 12}, t)));
      }
      for (const p of g.processes) node(svg, "process", pos["pid:" + p.pid], p.name, "pid " + p.pid, {"data-pid": p.pid}, W, H);
      for (const s of g.streams) node(svg, "stream", pos["stream:" + s.name], s.name, `${fmt(s.fps)} fps ${s.slotsInUse}/${s.slots}` + (s.dropped ? ` drop ${s.dropped}` : ""), {"data-stream": s.name}, W, H);
      const chain = document.getElementById("chain");
      chain.dataset.fits = chain.scrollHeight <= chain.clientHeight + 1 ? "1" : "0";   // no node cut off at the bottom
    }
    function node(svg, kind, p, title, sub, attrs, W, H) {
      const g = svgEl("g", Object.assign({class: "node " + kind, transform: `translate(${p.x},${p.y})`}, attrs));
      g.append(svgEl("rect", {width: W, height: H, rx: kind === "stream" ? 14 : 3}));
      g.append(svgEl("text", {x: 6, y: 14, class: "node-name"}, title.length > 19 ? title.slice(0, 18) + "…" : title));
      g.append(svgEl("text", {x: 6, y: 28, class: "node-sub"}, sub));
      svg.append(g);
    }

    const shown = new IntersectionObserver(entries => { for (const e of entries) setPreview(e.target.closest(".stream"), e.isIntersecting); });
    function setPreview(card, on) {
      card.dataset.visible = on ? "1" : "";
      const img = card.querySelector("img.preview"), name = card.dataset.stream;
      if (!img) return;   // an audio stream: its meters poll while visible
      const src = on ? url(name, "preview.mjpeg") + "?fps=" + card.querySelector("select.fps").value + "&width=" + card.querySelector("select.width").value : "";
      if (img.getAttribute("src") !== src) { if (src) img.src = src; else img.removeAttribute("src"); }
    }
    function source() { const d = $("div", {class: "source"}); d.append($("span", {class: "producer"}), " ", $("span", {class: "dropped"})); return d; }
    function card(name, media) {
      const id = "stream-" + name.replace(/[^A-Za-z0-9_-]/g, "_");
      let c = document.getElementById(id);
      if (c) return c;
      c = $("div", {class: "stream", id: id, "data-stream": name, "data-media": media});
      const left = $("div"), right = $("div");
      left.append($("h3", {class: "stream-name"}, name), source(), media === "audio"
                  ? $("canvas", {class: "meter", width: 320, height: 120, title: "peak (bar) and RMS (dark) per channel, dBFS"})
                  : $("img", {class: "preview", alt: "preview of " + name}));
      const ctl = $("div", {class: "controls"});
      ctl.hidden = media === "audio";   // a picture's preview settings and snapshot
      const fps = $("select", {class: "fps", title: "preview frames per second"}), width = $("select", {class: "width", title: "preview width"});
      for (const v of [1, 5, 10, 25]) fps.append($("option", v === 5 ? {value: v, selected: ""} : {value: v}, v + " fps"));
      for (const v of [160, 320, 640, 1280]) width.append($("option", v === 320 ? {value: v, selected: ""} : {value: v}, v + " px"));
      fps.onchange = width.onchange = () => setPreview(c, true);
      const snap = $("a", {class: "snapshot", href: url(name, "snapshot.png"), download: name + ".png"}, "snapshot PNG");
      ctl.append(fps, " ", width, " ", snap);
      const play = $("div", {class: "controls playback", hidden: ""});
      for (const verb of ["pause", "resume"]) { const b = $("button", {class: verb}, verb); b.onclick = () => control(name, verb); play.append(b, " "); }
      const seek = $("input", {class: "seek", size: 5, placeholder: "seconds"}), sb = $("button", {class: "seek"}, "seek");
      sb.onclick = () => control(name, "seek " + seek.value);
      const rate = $("input", {class: "rate", size: 4, placeholder: "1.0"}), rb = $("button", {class: "rate"}, "rate");
      rb.onclick = () => control(name, "rate " + rate.value);
      play.append(seek, sb, " ", rate, rb, $("span", {class: "position"}));
      left.append(ctl, play, $("div", {class: "reply"}));
      const table = $("table", {class: "consumers"});
      right.append(table, $("div", {class: "plots"}));
      for (const k of ["fps", "latency", "slots", "misses"]) right.lastChild.append($("canvas", {class: "plot plot-" + k, width: 260, height: 90, "data-plot": k}));
      c.append(left, right);
      document.getElementById("streams").append(c);
      shown.observe(c);
      return c;
    }
    function control(name, text) {
      fetch(url(name, "control"), {method: "POST", body: text, credentials: "same-origin"}).then(r => r.json()).then(j => {
        document.getElementById("stream-" + name.replace(/[^A-Za-z0-9_-]/g, "_")).querySelector(".reply").textContent = j.error ? "error: " + j.error : (j.ok || j.state || "ok");
      });
    }
    function drawStreams(g) {
      const empty = document.getElementById("empty");
      empty.hidden = g.streams.length > 0;
      empty.textContent = `no streams in ${g.directory} (FRAMESRV_DIR)`;
      const names = new Set(g.streams.map(s => s.name));
      for (const c of [...document.querySelectorAll(".stream")]) if (!names.has(c.dataset.stream)) { shown.unobserve(c); const img = c.querySelector("img.preview"); if (img) img.removeAttribute("src"); c.remove(); }
      for (const s of g.streams) {
        const c = card(s.name, s.media), t = c.querySelector("table.consumers");
        const rows = [["PID", "CONSUMER", "MODE", "FPS", "LAG", "MISS", "P50", "P99"]];
        t.replaceChildren();
        const head = $("tr"); for (const h of rows[0]) head.append($("th", {}, h)); t.append(head);
        for (const k of (topByName[s.name] || {consumers: []}).consumers) {
          const tr = $("tr", {class: "consumer", "data-pid": k.pid});
          tr.append($("td", {class: "pid"}, k.pid), $("td", {class: "name"}, k.name), $("td", {}, k.mode), $("td", {}, fmt(k.fps)),
                    $("td", {}, k.lag), $("td", {}, k.missed), $("td", {}, k.latencyP50), $("td", {}, k.latencyP99));
          t.append(tr);
        }
        const top = topByName[s.name];
        c.querySelector(".producer").textContent = "pid " + s.producerPID;
        c.querySelector(".dropped").textContent = "dropped at source " + (top ? top.dropped : s.dropped);
        const pb = playback[s.name], play = c.querySelector(".playback");
        play.hidden = !pb;
        if (pb) play.querySelector(".position").textContent = ` ${pb.paused ? "paused" : "playing"} ${fmt(pb.position)} s` + (pb.duration ? ` / ${fmt(pb.duration)} s` : "");
        plots(c, s.name);
        const view = c.querySelector("img.preview, canvas.meter"), r = view.getBoundingClientRect();
        view.dataset.rect = [r.left + scrollX, r.top + scrollY, r.width, r.height].map(Math.round).join(",");
      }
    }
    // One canvas per figure: a line per stream (fps, slots) or per consumer (latency, misses),
    // of the stream's current producer only: an earlier run under the same name (another pid) is left out.
    function plots(c, name) {
      const series = {fps: {}, latency: {}, slots: {}, misses: {}};
      const last = [...samples].reverse().map(h => h.streams.find(s => s.name === name)).find(s => s);
      samples.forEach((h, i) => {
        const s = h.streams.find(s => s.name === name); if (!s || !last || s.producerPID !== last.producerPID) return;
        (series.fps["stream pid " + s.producerPID] = series.fps["stream pid " + s.producerPID] || [])[i] = s.fps;
        (series.slots["in use"] = series.slots["in use"] || [])[i] = s.slotsInUse;
        for (const k of s.consumers) {
          const key = "pid " + k.pid;
          (series.fps[key] = series.fps[key] || [])[i] = k.fps;
          (series.latency[key + " p50"] = series.latency[key + " p50"] || [])[i] = k.latencyP50Micros;
          (series.latency[key + " p99"] = series.latency[key + " p99"] || [])[i] = k.latencyP99Micros;
          (series.misses[key] = series.misses[key] || [])[i] = k.missed;
        }
      });
      const units = {fps: "fps", latency: "latency", slots: "slots in use", misses: "misses"};
      for (const cv of c.querySelectorAll("canvas.plot"))
        plot(cv, series[cv.dataset.plot], units[cv.dataset.plot], samples.length, cv.dataset.plot === "latency" ? micros : fmt);
    }
    // Microseconds in the unit that reads best; the open last bucket (100 ms and more) as ">=".
    const micros = (v) => (v >= latencyOpenFrom ? ">=" : "") + (v >= 1e6 ? fmt(v / 1e6, 2) + " s" : v >= 1000 ? fmt(v / 1000, 1) + " ms" : fmt(v, 0) + " us");
    const latencyOpenFrom = 100000;
    const colours = ["#2a7", "#27c", "#d60", "#a3c", "#c23", "#777"];
    function plot(cv, lines, unit, n, format) {
      const x = cv.getContext("2d"), W = cv.width, H = cv.height;
      x.clearRect(0, 0, W, H);
      let max = 0; for (const k in lines) for (const v of lines[k]) if (v !== null && v !== undefined) max = Math.max(max, v);
      const label = unit + " (max " + format(max) + ")";
      max = max > 0 ? max * 1.1 : 1;
      cv.dataset.label = label; cv.dataset.series = Object.keys(lines).join(",");
      x.fillStyle = "#555"; x.font = "10px sans-serif"; x.fillText(label, 4, 10);
      Object.keys(lines).forEach((k, j) => {
        x.strokeStyle = colours[j % colours.length]; x.beginPath(); let moved = false;
        // A sample without a value (none yet, or not this run) is a gap, not a line across it.
        for (let i = 0; i < n; i++) { const v = lines[k][i]; if (v === null || v === undefined) { moved = false; continue; }
          const px = n > 1 ? i * (W - 2) / (n - 1) : 0, py = H - 2 - v / max * (H - 16);
          if (moved) x.lineTo(px, py); else { x.moveTo(px, py); moved = true; } }
        x.stroke(); x.fillStyle = x.strokeStyle; x.fillText(k, W - 70, 22 + j * 10);
      });
    }
    // Level meters of the audio streams on screen: /api/streams/NAME/levels.json 4 times a second.
    function meter(cv, l) {
      const x = cv.getContext("2d"), W = cv.width, H = cv.height, n = l.peakDB.length, floor = -60;
      const y = (db) => db === null ? H : Math.min(H, Math.max(0, -db / -floor * H));
      x.clearRect(0, 0, W, H); x.fillStyle = "#555"; x.font = "10px sans-serif";
      x.fillText(l.sampleRate + " Hz " + l.layout + " " + l.sampleFormat, 4, 10);
      const w = Math.max(4, (W - 40) / n - 4);
      l.peakDB.forEach((p, i) => {
        const px = 30 + i * (w + 4);
        x.fillStyle = p !== null && p > -1 ? "#c23" : "#2a7"; x.fillRect(px, y(p), w, H - y(p));
        x.fillStyle = "#174"; const r = l.rmsDB[i]; x.fillRect(px + w / 4, y(r), w / 2, H - y(r));
      });
      for (const db of [0, -20, -40]) x.fillText(db + "", 2, Math.max(20, y(db) + 4));
      cv.dataset.peak = l.peakDB.map(v => v === null ? "-inf" : v.toFixed(1)).join(",");
    }
    setInterval(() => {
      for (const c of document.querySelectorAll(".stream[data-media=audio][data-visible='1']"))
        api(url(c.dataset.stream, "levels.json")).then(l => meter(c.querySelector("canvas.meter"), l)).catch(() => {});
    }, 250);
    async function refresh() {
      try {
        const [g, t, h] = await Promise.all([api("api/graph"), api("api/top"), api("api/history?since=" + lastTime)]);
        playback = {}; topByName = {};
        for (const s of t.streams) { topByName[s.name] = s; if (s.playback) playback[s.name] = s.playback; }
        for (const p of h.samples) { samples.push(p); lastTime = p.time; }
        if (samples.length > 300) samples.splice(0, samples.length - 300);
        drawGraph(g); drawStreams(g);
        document.getElementById("status").textContent = g.streams.length + " streams, " + g.processes.length + " processes, " + new Date().toLocaleTimeString();
        document.body.dataset.ready = "1";
      } catch (e) { document.getElementById("status").textContent = "cannot reach framesrv web: " + e; }
    }
    refresh(); setInterval(refresh, 1000);
    """#
}
