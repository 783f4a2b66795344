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
