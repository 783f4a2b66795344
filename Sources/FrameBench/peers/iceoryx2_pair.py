"""iceoryx2's Python publisher and subscribers, the peer of `framesrv bench transport`.

  python iceoryx2_pair.py throughput --bytes B [--subscribers N] [--seconds S] [--frames F]
  python iceoryx2_pair.py latency --bytes B [--rate FPS] [--seconds S] [--frames F] [--wait listener|spin] [--warmup W]

This process is the publisher; each subscriber is another process running this script
(`subscribe`). The settings are those of the issue's comparison: a Slice[u8] payload of
B bytes, subscriber buffer 8, safe overflow off, RetryUntilDelivered, and an event service
notified after every send; a subscriber waits on a blocking Listener (or, with --wait
spin, calls receive() in a loop). Neither side writes the payload (framesrv's bench paints
each slot once; here nothing is painted).

The start-up handshake: a subscriber creates its port and its Listener, calls receive()
once (which connects it to the publisher), then prints `ready`; the publisher waits for
every `ready` and for the service to count every subscriber before its first send. Without
it, a subscriber that blocks on its Listener before its first receive loses frames.

Prints one JSON line:
  throughput: {"sent": N, "seconds": S, "fps": N/S, "received": [N1, ...]}
    seconds from the first send to the last (RetryUntilDelivered keeps the publisher at
    most a buffer ahead of the slowest subscriber);
  latency: {"sent": N, "received": [N1], "p50_us": X, "p99_us": Y}
    publish -> receive, from a CLOCK_MONOTONIC stamp written into the payload just before
    send() to the subscriber's clock just after its receive().
Exit 0 when every subscriber received every frame, 1 otherwise, 2 on an error.
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys
import time

import iceoryx2 as iox2

FRAME = iox2.EventId.new(1)
END = iox2.EventId.new(2)
BUFFER = 8
iox2.set_log_level_from_env_or(iox2.LogLevel.Error)   # no "No config file was loaded" line


def open_ports(name, subscribers, create):
    """The publish-subscribe and event services of `name`, created (publisher) or opened."""
    node = iox2.NodeBuilder.new().create(iox2.ServiceType.Ipc)
    builder = (node.service_builder(iox2.ServiceName.new(name))
               .publish_subscribe(iox2.Slice[ctypes.c_uint8])
               .subscriber_max_buffer_size(BUFFER)
               .enable_safe_overflow(False)
               .max_subscribers(max(subscribers, 1)))
    pubsub = builder.create() if create else builder.open()
    events = node.service_builder(iox2.ServiceName.new(name)).event()
    event = events.create() if create else events.open()
    return node, pubsub, event


def percentile(sorted_values, p):
    """The sink's rule: the value at round((n - 1) * p)."""
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, round((len(sorted_values) - 1) * p))]


def drain(subscriber, latencies):
    """Takes every sample waiting; returns how many (with latencies: each one's, in us)."""
    n = 0
    while True:
        sample = subscriber.receive()
        if sample is None:
            return n
        if latencies is not None:
            now = time.monotonic_ns()
            stamp = ctypes.c_uint64.from_address(sample.payload_ptr).value
            latencies.append((now - stamp) / 1000)
        sample.delete()
        n += 1


def has_end(activations):
    """Whether the publisher's END event is among a Listener's activations."""
    return any(a.id.as_value == END.as_value for a in activations)


def subscribe(args):
    """One subscriber process: counts (and times) frames until the END event."""
    node, pubsub, event = open_ports(args.name, args.subscribers, create=False)
    subscriber = pubsub.subscriber_builder().buffer_size(BUFFER).create()
    listener = event.listener_builder().create()
    latencies = [] if args.latency else None
    received = drain(subscriber, latencies)   # the handshake's first receive: connects
    print("ready", flush=True)
    ended, idle = False, 0
    while not ended:
        if args.wait == "spin":
            taken = drain(subscriber, latencies)
            received += taken
            idle = 0 if taken else idle + 1
            # The Listener is only asked every 256 empty polls: the spin is on receive().
            ended = idle % 256 == 255 and has_end(listener.try_wait())
        else:
            activations = listener.blocking_wait()
            received += drain(subscriber, latencies)
            ended = has_end(activations)
    received += drain(subscriber, latencies)
    result = {"received": received}
    if latencies is not None:
        latencies = sorted(latencies[args.warmup:])   # the first frames are the run's warm-up
        result.update(p50_us=percentile(latencies, 0.5), p99_us=percentile(latencies, 0.99))
    print(json.dumps(result), flush=True)


def start_subscribers(args, name):
    """The subscriber processes, each past its first receive (the handshake)."""
    command = [sys.executable, os.path.abspath(__file__), "subscribe", "--name", name,
               "--subscribers", str(args.subscribers), "--wait", args.wait]
    if args.mode == "latency":
        command += ["--latency", "--warmup", str(args.warmup)]
    children = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(args.subscribers)]
    for child in children:
        line = child.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(f"a subscriber did not start (it said {line!r})")
    return children


def publish(args, publisher, notifier):
    """Sends frames until --frames or --seconds; returns (sent, seconds first to last send)."""
    deadline = None if args.frames else time.monotonic_ns() + int(args.seconds * 1e9)
    period = int(1e9 / args.rate) if args.mode == "latency" else 0
    start = last = time.monotonic_ns()
    sent = 0
    while (sent < args.frames) if args.frames else (last < deadline):
        if period:
            delay = start + sent * period - time.monotonic_ns()
            if delay > 0:
                time.sleep(delay / 1e9)
        sample = publisher.loan_slice_uninit(args.bytes)
        if period:
            ctypes.c_uint64.from_address(sample.payload_ptr).value = time.monotonic_ns()
        sample.assume_init().send()
        notifier.notify_with_custom_event_id(FRAME)
        sent += 1
        last = time.monotonic_ns()
    return sent, (last - start) / 1e9


def run(args):
    name = f"framesrv-bench/{os.getpid()}/{args.mode}"
    node, pubsub, event = open_ports(name, args.subscribers, create=True)
    publisher = (pubsub.publisher_builder().initial_max_slice_len(args.bytes)
                 .backpressure_strategy(iox2.BackpressureStrategy.RetryUntilDelivered).create())
    notifier = event.notifier_builder().create()
    children = start_subscribers(args, name)
    while pubsub.dynamic_config.number_of_subscribers < args.subscribers:
        time.sleep(0.001)
    publisher.update_connections()
    sent, seconds = publish(args, publisher, notifier)
    notifier.notify_with_custom_event_id(END)
    results = []
    for child in children:
        out, _ = child.communicate(timeout=60)
        results.append(json.loads(out.strip().splitlines()[-1]) if child.returncode == 0 and out.strip() else {"received": -1})
    received = [r["received"] for r in results]
    line = {"sent": sent, "seconds": seconds, "fps": sent / seconds if seconds > 0 else 0.0, "received": received}
    if args.mode == "latency":
        line.update(p50_us=results[0].get("p50_us", 0.0), p99_us=results[0].get("p99_us", 0.0))
    print(json.dumps(line), flush=True)
    return 0 if all(r == sent for r in received) else 1


def parse(argv):
    p = argparse.ArgumentParser(prog="iceoryx2_pair.py", description=__doc__.splitlines()[0])
    p.add_argument("mode", choices=["throughput", "latency", "subscribe"])
    p.add_argument("--bytes", type=int, default=64 * 64 * 3 // 2)
    p.add_argument("--subscribers", type=int, default=1)
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--frames", type=int, default=0)
    p.add_argument("--rate", type=float, default=200.0)
    p.add_argument("--wait", choices=["listener", "spin"], default="listener")
    p.add_argument("--name")
    p.add_argument("--latency", action="store_true")
    p.add_argument("--warmup", type=int, default=0, help="latency: frames left out of the percentiles at the start")
    return p.parse_args(argv)


def main(argv=None):
    args = parse(argv)
    try:
        if args.mode == "subscribe":
            subscribe(args)
            return 0
        return run(args)
    except Exception as e:   # one line, never a traceback
        print(f"iceoryx2_pair: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
