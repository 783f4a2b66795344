import FrameMedia
import Testing

/// `framesrv filter --preset`: each preset's graph, and what is not a preset.
@Suite struct FilterPresetTests {
    @Test(arguments: [
        ("gray", "format=gray"),
        ("sepia", "colorchannelmixer=.393:.769:.189:0:.349:.686:.168:0:.272:.534:.131"),
        ("rgb", "format=rgb24"),
        ("blur=4", "gblur=sigma=4"),
        ("blend=logo.png:0.5", "movie=logo.png,format=rgba,colorchannelmixer=aa=0.5[framesrv_blend];[in][framesrv_blend]overlay"),
        ("blend=a:b's,[x].png:1", "movie=a\\\\:b\\\\\\'s\\,\\[x\\].png,format=rgba,colorchannelmixer=aa=1[framesrv_blend];[in][framesrv_blend]overlay"),
    ])
    func presetGraph(_ preset: String, _ graph: String) throws {
        #expect(try FilterPreset(parsing: preset).graph == graph)
    }

    @Test func blendReadsItsImage() throws {
        #expect(try FilterPreset(parsing: "blend=dir/a:b.png:0.25").image == "dir/a:b.png")
        #expect(try FilterPreset(parsing: "gray").image == nil)
    }

    @Test(arguments: ["grey", "gray=1", "blur", "blur=-1", "blur=1025", "blur=x", "blend=logo.png", "blend=:0.5",
                      "blend=logo.png:2", ""])
    func notAPreset(_ preset: String) {
        #expect(throws: FilterPresetError.self) { try FilterPreset(parsing: preset) }
    }
}
