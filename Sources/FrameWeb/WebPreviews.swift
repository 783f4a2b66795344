/// The previews the server shows: none until FrameWeb/Preview's hub is part of the build.
public enum WebPreviews {
    public static func make() -> (any PreviewSource)? { nil }
}
