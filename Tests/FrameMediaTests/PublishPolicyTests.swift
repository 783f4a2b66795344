import FrameMedia
import Testing

/// `produce -i`'s defaults: what is a live source, what waits for a consumer, what takes controls.
@Suite struct PublishPolicyTests {
    func policy(live: Bool = false, readrate: Double? = nil, noWait: Bool = false, waitFor: Int = 0,
                liveSource: Bool = false, device: Bool = false) -> PublishPolicy {
        PublishPolicy(liveRequested: live, readrate: readrate, noWait: noWait, waitFor: waitFor,
                      isLiveSource: liveSource, isDevice: device)
    }

    @Test func aFileWaitsForItsFirstLosslessConsumer() {
        let file = policy()
        #expect(!file.liveSource && file.waitFor == 1 && file.waitsByDefault && file.takesControls)
    }

    @Test func noWaitAndWaitForAreTheUsersChoice() {
        #expect(policy(noWait: true).waitFor == 0 && !policy(noWait: true).waitsByDefault)
        #expect(policy(waitFor: 3).waitFor == 3 && !policy(waitFor: 3).waitsByDefault)
    }

    @Test(arguments: [(true, nil, false), (false, 1.0, false), (false, 0.5, false), (false, nil, true)] as [(Bool, Double?, Bool)])
    func pacedInputsAreLiveAndPublishAtOnce(_ live: Bool, _ readrate: Double?, _ capture: Bool) {
        let p = policy(live: live, readrate: readrate, liveSource: capture, device: capture)
        #expect(p.liveSource && p.waitFor == 0 && !p.waitsByDefault)
        #expect(policy(live: live, readrate: readrate, waitFor: 2, liveSource: capture, device: capture).waitFor == 2)
    }

    @Test func aGeneratorPublishesAtOnceWithoutControls() {
        let lavfi = policy(device: true)
        #expect(!lavfi.liveSource && lavfi.waitFor == 0 && !lavfi.waitsByDefault && !lavfi.takesControls)
    }

    @Test func aPacedFileStillTakesControls() {
        #expect(policy(readrate: 1).takesControls && !policy(liveSource: true, device: true).takesControls)
    }
}
