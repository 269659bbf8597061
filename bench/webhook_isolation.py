"""Whether webhooks slow the service: the p99 of GET /api/v2/builds/latest under load while
builds are published, with webhook targets that hang, drip and answer 500 forever (and one
that answers at once), against the same without webhooks: two servers over the same data
directory, loaded at the same time, so that the rest of the machine weighs on both alike.

    python bench/webhook_isolation.py [--seconds 10] [--rounds 5] [--clients 32]

Each of the two wrk keeps `--clients` connections (more than the server's 8 threads) on the route of the
project being published to, so its answer changes with every build; a build is added to the
project file every `--every` seconds in both configurations, so that with webhooks each one
is an event written to the outbox and tried on every target. Goal (issue 27): the p99 with
webhooks within 1.5 times the p99 without (the median of the rounds' ratios).
"""

import argparse
import http.server
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading

import harness
import synthetic

SLUG = "alpha"
GOAL = 1.5
NAMES = ("without", "with")


class Receivers:
    """Receivers on 127.0.0.1, one per behaviour: each request counted."""

    def __init__(self):
        self.counts = {"hang": 0, "drip": 0, "fail": 0, "ok": 0}
        self.stopping = threading.Event()
        receivers = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                kind = self.path.strip("/")
                receivers.counts[kind] += 1
                if kind == "hang":
                    receivers.stopping.wait()
                    return
                if kind == "drip":  # a status line, then a byte a second, forever
                    self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
                    while not receivers.stopping.wait(1):
                        try:
                            self.wfile.write(b"x")
                            self.wfile.flush()
                        except OSError:
                            return
                    return
                self.send_response(500 if kind == "fail" else 204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def targets(self):
        port = self.server.server_address[1]
        return [
            {"url": f"http://127.0.0.1:{port}/{kind}", "format": fmt}
            for kind, fmt in (("hang", "discord"), ("drip", "slack"), ("fail", "discord"))
        ] + [{"url": f"http://127.0.0.1:{port}/ok", "format": "discord"}]

    def close(self):
        self.stopping.set()
        self.server.shutdown()


class Publisher:
    """Adds a build to the project file every `every` seconds, as `publish` would."""

    def __init__(self, data, builds, every):
        self.data, self.builds, self.every = data, builds, every
        self.stopping = threading.Event()
        self.added = 0
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        import random

        rng = random.Random(len(self.builds))
        while not self.stopping.wait(self.every):
            number = self.builds[-1]["buildNumber"] + 1
            self.builds.append(synthetic.build(rng, number, "1.21", False))
            write(self.data, self.builds)
            self.added += 1

    def stop(self):
        self.stopping.set()
        self.thread.join()


def write(data, builds):
    path = os.path.join(data, f"{SLUG}.json")
    with open(path + ".tmp", "w") as file:
        json.dump(synthetic.project(SLUG, builds), file)
    os.replace(path + ".tmp", path)


def one_round(data, states, files, builds, args):
    """Both servers at once, over the same data, each under its own wrk: whatever else the
    machine does in this round weighs on both alike."""
    servers = {
        name: harness.Server.buildshelf(
            data, ["--quiet", "--state", states[name], "--webhooks", files[name]], log_path=args.log
        )
        for name in NAMES
    }
    loads = {}
    cpu = {name: harness.cpu_seconds(server.pid) for name, server in servers.items()}
    try:
        publisher = Publisher(data, builds, args.every)
        try:
            runs = [
                threading.Thread(
                    target=lambda name=name: loads.__setitem__(
                        name,
                        harness.wrk(
                            servers[name].port,
                            f"/api/v2/builds/latest?project={SLUG}",
                            args.seconds,
                            args.clients,
                        ),
                    )
                )
                for name in NAMES
            ]
            for run in runs:
                run.start()
            for run in runs:
                run.join()
        finally:
            publisher.stop()
        for name, server in servers.items():
            cpu[name] = harness.cpu_seconds(server.pid) - cpu[name]
    finally:
        for server in servers.values():
            server.stop()
    for load in loads.values():
        if load.errors:
            raise SystemExit(f"wrk: {load.errors}")
    # CPU per request: what the webhooks' threads take from the requests, less noisy than
    # a p99 on a busy machine.
    per_request = {name: 1e6 * cpu[name] / loads[name].requests for name in NAMES}
    return loads, per_request, publisher.added


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--every", type=float, default=0.25, help="seconds between builds")
    parser.add_argument("--log", default=os.devnull, help="the servers' log")
    args = parser.parse_args()
    harness.stop_servers_on_sigterm()
    tmp = tempfile.mkdtemp(prefix="buildshelf-webhook-bench-")
    receivers = Receivers()
    try:
        data = os.path.join(tmp, "data")
        os.mkdir(data)
        import random

        builds = synthetic.channel_builds(random.Random(1), 1, [("1.21", 200)])
        write(data, builds)
        states = {name: os.path.join(tmp, f"state-{name}") for name in NAMES}
        files = {name: os.path.join(state, "webhooks.json") for name, state in states.items()}
        os.makedirs(states["with"], mode=0o700)
        with open(os.open(files["with"], os.O_WRONLY | os.O_CREAT, 0o600), "w") as file:
            json.dump({"targets": receivers.targets()}, file)
        results = {name: [] for name in NAMES}
        ratios, costs = [], {name: [] for name in NAMES}
        for round_ in range(args.rounds):
            loads, per_request, added = one_round(data, states, files, builds, args)
            for name in NAMES:
                costs[name].append(per_request[name])
            for name in NAMES:
                results[name].append(loads[name].p99_ms)
            ratios.append(loads["with"].p99_ms / loads["without"].p99_ms)
            print(
                f"round {round_ + 1}: p99 {loads['without'].p99_ms:.2f} ms without webhooks "
                f"({loads['without'].requests / loads['without'].seconds:.0f} requests/s), "
                f"{loads['with'].p99_ms:.2f} ms with "
                f"({loads['with'].requests / loads['with'].seconds:.0f} requests/s): "
                f"{ratios[-1]:.2f}; CPU a request {per_request['without']:.0f} us without, "
                f"{per_request['with']:.0f} us with; {added} builds published",
                flush=True,
            )
        print(f"receivers' requests: {receivers.counts}")
        ratio = statistics.median(ratios)
        harness.report(
            [
                (
                    "p99 without webhooks (ms)",
                    "-",
                    harness.spread(results["without"], "{:.2f}"),
                    True,
                ),
                ("p99 with webhooks (ms)", "-", harness.spread(results["with"], "{:.2f}"), True),
                ("CPU a request without (us)", "-", harness.spread(costs["without"]), True),
                ("CPU a request with (us)", "-", harness.spread(costs["with"]), True),
                (
                    "p99 with / without, a round",
                    f"<= {GOAL}",
                    harness.spread(ratios, "{:.2f}"),
                    ratio <= GOAL,
                ),
            ]
        )
        return 0 if ratio <= GOAL else 1
    finally:
        receivers.close()
        harness.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
