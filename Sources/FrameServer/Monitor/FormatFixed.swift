/// `x` with `digits` decimals, without Foundation (status lines and their JSON).
public func formatFixed(_ x: Double, _ digits: Int) -> String {
    guard x.isFinite else { return "0" }
    var scale = 1.0
    for _ in 0..<digits { scale *= 10 }
    let scaled = (abs(x) * scale).rounded()
    let whole = Int64(scaled / scale)
    var fraction = String(Int64(scaled - Double(whole) * scale))
    while fraction.count < digits { fraction = "0" + fraction }
    return (x < 0 && scaled > 0 ? "-" : "") + "\(whole)" + (digits > 0 ? "." + fraction : "")
}

/// `v` rounded to `decimals` decimals, as Swift prints a Double (no trailing zeros, no ".0"
/// with 0 decimals): the figures of the CLI's lines and of the benchmarks' reports.
package func formatDouble(_ v: Double, _ decimals: Int = 1) -> String {
    var p: Double = 1
    for _ in 0..<decimals { p *= 10 }
    let r = (v * p).rounded() / p
    var s = "\(r)"
    if decimals == 0, s.hasSuffix(".0") { s.removeLast(2) }
    return s
}
