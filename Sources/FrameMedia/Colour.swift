import FrameServer

extension ColorDescription {
    /// The colour of a frame converted (by libswscale or libavfilter) from one described by
    /// `self`: the one home of the colour-of-output rule. RGB carries matrix 0 (protocol
    /// section 20) and is full range; YUV made from RGB was made with BT.601 (smpte170m)
    /// coefficients, and has the range the conversion wrote (`fullRange`). Primaries and
    /// transfer pass through.
    func converted(toRGB: Bool, fullRange: Bool) -> ColorDescription {
        var c = self
        if toRGB {
            c.matrix = 0
            c.range = 2
        } else {
            if c.matrix == 0 { c.matrix = 6 }
            c.range = fullRange ? 2 : 1
        }
        return c
    }

    /// What the built-in test pattern's frames of `pixelFormat` are: BT.709 limited range,
    /// or its RGB form.
    static func ofPattern(_ pixelFormat: PixelFormat) -> ColorDescription {
        bt709Limited.converted(toRGB: pixelFormat.isRGB, fullRange: false)
    }
}
