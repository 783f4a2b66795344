import FrameServer

/// The previews the server shows: FrameWeb/Preview's hub on this user's runtime directory
/// (nil when it cannot be opened: the page then says previews are unavailable).
public enum WebPreviews {
    public static func make() -> PreviewHub? { (try? RuntimeDirectory()).map { PreviewHub(directory: $0) } }
}
