"""Uploads over HTTP: the server's memory, the time of a publish, and the API's latency while
builds are uploaded (issue 24).

    python bench/publish_http.py [--rounds 3] [--latest-of p01] [--route stand-in --recv-bytes 8192,65536]

Against the real server (8 threads, the default) on a free port of 127.0.0.1, over synthetic
data (bench/synthetic.py), with curl as the client, as CI would upload. For each server (the
real one, or the stand-in at each recv_bytes: what waitress reads of a connection a turn of
the loop), it prints:

- memory: the server's peak resident memory (VmHWM) before and after one 512 MiB upload
  (goal: at most 20 MB more);
- publish: the wall time of a 100 MiB upload, answered once the file is written and fsynced,
  against `cp` of the same file plus `sha256sum` of it, timed in the same rounds, the page
  cache warm (goal: at most 2x);
- p99 of `GET /api/v2/builds/latest?project=p00` (`--latest-of`) under `wrk -t1 -c16` (more
  clients than threads), alone and while 4 clients upload 100 MiB over and over (goal: under
  2x alone).

`--route real` (the default when the code has it) publishes each upload as a new build of
p00 with `PUT /api/v2/projects/p00/builds/N` (multipart, curl -F, a token made with `buildshelf
token create`), with the server's own recv_bytes. `--route stand-in` uploads to
tests/upload_app.py's stand-in route instead, which reads the body in 1 MiB chunks, hashes
it, writes it to a file and fsyncs it, once for each `--recv-bytes`.
"""

import argparse
import importlib.util
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import harness
import synthetic
from harness import ROOT

UPLOAD_APP = os.path.join(ROOT, "tests", "upload_app.py")
LATEST = "/api/v2/builds/latest?project={}"
WRK_SECONDS = 5
UPLOADERS = 4
MiB = 1 << 20


class StandIn:
    """tests/upload_app.py's PUT /upload, reading `recv_bytes` a turn."""

    def __init__(self, recv_bytes):
        self.recv_bytes = recv_bytes

    def start(self, data_dir, bodies, log_path):
        os.environ["UPLOAD_APP_RECV_BYTES"] = str(self.recv_bytes)
        port = harness.free_port()
        argv = [sys.executable, UPLOAD_APP, data_dir, str(port), bodies, str(1 << 30)]
        return harness.Server(argv, port, log_path)

    def curl(self, port, path):
        return ["-T", path, "-H", "Authorization: Bearer bench", f"http://127.0.0.1:{port}/upload"]


class Real:
    """The server's own PUT of a build, each upload a new build of p00."""

    recv_bytes = None  # the server's

    def __init__(self):
        self.numbers = itertools.count(1_000_000)

    def start(self, data_dir, bodies, log_path):
        self.token = subprocess.run(
            [sys.executable, "-m", "buildshelf", "token", "create", "p00", "--data", data_dir],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        return harness.Server.buildshelf(data_dir, ["--quiet"], log_path)

    def curl(self, port, path):
        number = next(self.numbers)
        return ["-X", "PUT", "-H", f"Authorization: Bearer {self.token}",
                "-F", 'build={"channelVersion":"9.9"};type=application/json',
                "-F", f"file=@{path};filename=p00-{number}.jar",
                f"http://127.0.0.1:{port}/api/v2/projects/p00/builds/{number}"]  # fmt: skip


def upload(route, port, path):
    """curl's upload of the file `path`: its wall time in seconds."""
    started = time.perf_counter()
    subprocess.run(["curl", "-sSf", "-o", "/dev/null", *route.curl(port, path)], check=True)
    return time.perf_counter() - started


def uploader(route, port, path, stop, times):
    """Upload `path` over and over until `stop` is set, adding each one's time to `times`."""
    while not stop.is_set():
        times.append(upload(route, port, path))


def timed(argv):
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def random_file(path, size):
    with open(path, "wb") as f:
        for _ in range(size // MiB):
            f.write(os.urandom(MiB))
    return path


def measure(tmp, data_dir, route, rounds, latest):
    """{figure: value} for one route."""
    bodies = os.path.join(tmp, "bodies")
    os.makedirs(bodies, exist_ok=True)
    big, file = os.path.join(tmp, "512.bin"), os.path.join(tmp, "100.bin")
    figures = {}
    with route.start(data_dir, bodies, os.path.join(tmp, "server.log")) as running:
        harness.fetch(running.port, latest)
        before = harness.memory(running.pid, "VmHWM")
        upload(route, running.port, big)
        figures["memory"] = (before, harness.memory(running.pid, "VmHWM"))
        uploads, baselines = [], []
        for _ in range(rounds):
            uploads.append(upload(route, running.port, file))
            copy = os.path.join(tmp, "copy.bin")
            baselines.append(timed(["cp", file, copy]) + timed(["sha256sum", file]))
            os.unlink(copy)
        figures["publish"] = (uploads, baselines)
        alone, during, uploaded = [], [], []
        for _ in range(rounds):
            alone.append(harness.wrk(running.port, latest, WRK_SECONDS, 16).p99_ms)
            stop = threading.Event()
            threads = [
                threading.Thread(target=uploader, args=(route, running.port, file, stop, uploaded))
                for _ in range(UPLOADERS)
            ]
            for thread in threads:
                thread.start()
            time.sleep(1)  # the uploads under way
            during.append(harness.wrk(running.port, latest, WRK_SECONDS, 16).p99_ms)
            stop.set()
            for thread in threads:
                thread.join()
        figures["p99"] = (alone, during, uploaded)
    return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    real = importlib.util.find_spec("buildshelf.web.publish") is not None
    parser.add_argument(
        "--route", choices=("real", "stand-in"), default="real" if real else "stand-in"
    )
    parser.add_argument("--recv-bytes", default="8192,65536", help="with --route stand-in")
    parser.add_argument(
        "--latest-of",
        default="p00",
        help="the project whose latest build wrk asks for: p00, which the uploads publish "
        "to (its answer made again after each), or p01, which they leave alone",
    )
    args = parser.parse_args()
    if args.route == "real":
        routes = [Real()]
    else:
        routes = [StandIn(int(value)) for value in args.recv_bytes.split(",")]
    harness.stop_servers_on_sigterm()
    try:
        with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
            data_dir = synthetic.generate(os.path.join(tmp, "data"), [2000, 2000])
            random_file(os.path.join(tmp, "512.bin"), 512 * MiB)
            random_file(os.path.join(tmp, "100.bin"), 100 * MiB)
            for path in ("512.bin", "100.bin"):  # the page cache warm
                subprocess.run(["cat", os.path.join(tmp, path)], stdout=subprocess.DEVNULL)
            for route in routes:
                latest = LATEST.format(args.latest_of)
                report(route, measure(tmp, data_dir, route, args.rounds, latest))
    finally:
        harness.stop_all()
    return 0


def report(route, figures):
    before, after = figures["memory"]
    uploads, baselines = figures["publish"]
    alone, during, uploaded = figures["p99"]
    ratio = statistics.median(uploads) / statistics.median(baselines)
    p99_ratio = statistics.median(during) / statistics.median(alone)
    what = "the server's" if route.recv_bytes is None else f"{route.recv_bytes:,}"
    print(f"\n{type(route).__name__} route, recv_bytes {what}: medians of {len(uploads)} rounds")
    harness.report(
        [
            (
                "memory growth, 512 MiB upload",
                "<= 20 MB",
                f"{(after - before) / 1e6:.1f} MB (peak {after / 1e6:.0f} MB)",
                after - before <= 20e6,
            ),
            (
                "100 MiB upload (s)",
                "",
                harness.spread(uploads, "{:.2f}"),
                True,
            ),
            ("cp + sha256sum (s)", "", harness.spread(baselines, "{:.2f}"), True),
            ("upload / (cp + sha256sum)", "<= 2", f"{ratio:.2f}", ratio <= 2),
            ("/builds/latest p99 alone (ms)", "", harness.spread(alone, "{:.1f}"), True),
            (
                f"p99 beside {UPLOADERS} uploads (ms)",
                "",
                harness.spread(during, "{:.1f}"),
                True,
            ),
            ("p99 ratio", "< 2", f"{p99_ratio:.2f}", p99_ratio < 2),
            (
                "the uploads meanwhile (s each)",
                "",
                harness.spread(uploaded, "{:.2f}") if uploaded else "-",
                True,
            ),
        ]
    )
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
