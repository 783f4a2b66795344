import FrameControl
import FrameMedia
import FrameServer

/// `framesrv ctl`: run-time control of a producer that reads a file.
enum CtlCommand: Command {
    static let name = "ctl"
    static let summary = "control a playing file at run time: pause, resume, seek, rate, step, status"
    static let help = """
    usage: framesrv ctl NAME pause|resume|toggle|seek T|rate X|step [N]|status [--json]

    Sends one control to the producer of stream NAME over its control socket
    (NAME.control in the runtime directory) and prints its reply. Only a producer that
    reads a file takes controls (produce -i FILE, replay); the controls are applied
    between frames.

      pause          stop time: nothing more is published, nothing is dropped
      resume         go on from where it stopped, at the same rate
      toggle         pause when playing, resume when paused
      seek T         go to T (seconds, or [HH:]MM:SS[.xxx], from the input's start; +T / -T:
                     from the current position): decode from the keyframe before T and drop
                     the frames before it, as ffmpeg -ss T does (the same frames and
                     timestamps); the first frame after it carries the discontinuity flag
      rate X         X times real time (0.01 to 100), or max: as fast as consumers take frames
                     (a producer started with -re or --readrate stays a live source: it drops
                     the frames its consumers have no free slot for; without them it waits)
      step [N]       publish exactly N frames (default 1), pausing first when playing
      status         position/duration, state and rate (--json: one JSON object: stream,
                     state, paused, position, duration, rate (null: max), frames)

    Exit status: 0; 1 when the producer refuses the control (one error line: seek past the
    end, a pipe that cannot seek), there is no such stream, the stream's producer takes no
    controls, or it does not answer within 2 s; 2 on a usage error (an unknown control,
    rate 0, ...). A refused control changes nothing: the producer keeps running.
    """

    static func run(_ o: CtlOptions) throws -> ExitStatus {
        guard let directory = try RuntimeDirectory.existing() else { throw ControlSocketError.noStream(o.stream) }
        let reply = try ControlClient.send(o.request, to: o.stream, directory: directory)
        switch reply {
        case .ok:
            print(reply.text)
        case .error(let message):
            throw CommandError.controlRefused(stream: o.stream, message: message)
        case .json(let text):
            guard !o.json else { print(text); return .success }
            if let link = LinkStatus(json: text) { print("\(o.stream): \(link.line)"); return .success }
            guard let status = PlaybackStatus(json: text) else { print(text); return .success }
            print("\(o.stream): \(status.line), \(status.frames) frames")
        }
        return .success
    }
}
