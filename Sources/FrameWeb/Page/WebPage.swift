/// The page `framesrv web` serves at `/`: one HTML document with its style and script inline
/// (no CDN, no other file: the machine may be offline). Ids and classes are stable for tests:
/// `#graph` (SVG: `g.node.stream[data-stream]`, `g.node.process[data-pid]`, `.edge`),
/// `#chain[data-fits]` (1: the graph shows whole), `#empty` (no streams: the directory),
/// `#streams` (`div.stream[data-stream]`, `span.dropped`, `img.preview` with `data-rect` = its
/// layout box, `td.pid`, `canvas.plot` with `data-label` and `data-series` = what it draws).
enum WebPage {
    static let html = """
    <!DOCTYPE html>
    <html lang="en"><head><meta charset="utf-8"><title>framesrv web</title>
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <style>\(WebPageStyle.css)</style></head>
    <body>
    <header><h1>framesrv</h1><span id="status">loading…</span></header>
    <section id="chain"><h2>Chain</h2><svg id="graph" width="300" height="60"></svg></section>
    <p id="empty" hidden></p>
    <section id="streams"></section>
    <script>\(WebPageScript.js)</script>
    </body></html>
    """
}

enum WebPageStyle {
    static let css = """
    body{font:14px system-ui,sans-serif;margin:0;background:#f6f7f9;color:#222}
    header{display:flex;gap:1em;align-items:baseline;padding:6px 14px;background:#1d2733;color:#fff}
    header h1{font-size:18px;margin:0}
    section{padding:6px 14px}
    h2{font-size:15px;margin:6px 0}
    #chain{overflow-x:auto;min-height:124px}
    #graph{background:#fff;border:1px solid #ccd}
    .node rect{fill:#eef3fb;stroke:#557}
    .node.stream rect{fill:#fff7e0;stroke:#a80}
    .node text{font-size:12px}
    .edge{stroke:#2a7;stroke-width:2;fill:none}
    .edge.lagging{stroke:#e90}.edge.missing{stroke:#d22}
    .edge-label{font-size:10px;fill:#333}
    .stream{background:#fff;border:1px solid #ccd;margin:8px 0;padding:8px;display:grid;grid-template-columns:340px 1fr;gap:10px}
    .preview{display:block;width:320px;min-height:60px;background:#000}
    .controls{margin:4px 0}.controls button,.controls input,.controls select{font-size:12px}
    table.consumers{border-collapse:collapse;font-size:12px}
    table.consumers td,table.consumers th{border-bottom:1px solid #eee;padding:1px 6px;text-align:right}
    .plots{display:flex;flex-wrap:wrap;gap:6px}
    canvas.plot{background:#fafbfc;border:1px solid #dde}
    """
}
