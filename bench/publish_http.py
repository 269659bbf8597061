"""Uploads over HTTP: the server's memory, the time of a publish, and the API's latency while
builds are uploaded (issue 24).

    python bench/publish_http.py [--rounds 3] [--upload-rate 25M] [--latest-of p01]
                                 [--route stand-in --recv-bytes 8192,65536]

Against the real server (8 threads, the default) on a free port of 127.0.0.1, over synthetic
data (bench/synthetic.py), with curl as the client, as CI would upload. Every upload is of
other bytes (a counter stamped on its first 32), as each build's jar is: identical bytes are
stored once, and the object already there is hashed again to check it. For each server (the
real one, or the stand-in at each recv_bytes: what waitress reads of a connection a turn of
the loop), it prints:

- memory: the server's peak resident memory (VmHWM) before and after one 512 MiB upload
  (goal: at most 20 MB more);
- publish: the wall time of a 100 MiB upload, answered once the file is written and fsynced,
  against `cp` of the same file plus `sha256sum` of it, timed in the same rounds, the page
  cache warm (goal: at most 2x);
- p99 of `GET /api/v2/builds/latest?project=p00` (`--latest-of`) under `wrk -t1 -c16` (more
  clients than threads), alone and while 4 clients upload 100 MiB over and over, each at
  `--upload-rate` (curl's --limit-rate; 25M, 25 MB/s: four of them fill a 1 Gbit/s link, the
  most one box takes from its CI runners; goal: under 2x alone); then, to compare, while 4
  clients upload as fast as loopback takes them, and while 2 `sha256sum` loops take the CPU
  with no upload at all.

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
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager

import harness
import synthetic
from harness import ROOT

UPLOAD_APP = os.path.join(ROOT, "tests", "upload_app.py")
LATEST = "/api/v2/builds/latest?project={}"
WRK_SECONDS = 5
UPLOADERS = 4
CPU_BURNERS = 2
MiB = 1 << 20
STAMPS = itertools.count()  # what makes each upload's bytes its own


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


def upload(route, port, path, rate=None):
    """curl's upload of the file `path`, made other bytes first: its wall time in seconds."""
    with open(path, "r+b") as f:
        f.write(b"%032d" % next(STAMPS))
    limit = ["--limit-rate", rate] if rate else []
    started = time.perf_counter()
    subprocess.run(["curl", "-sSf", "-o", "/dev/null", *limit, *route.curl(port, path)], check=True)
    return time.perf_counter() - started


def uploader(route, port, path, rate, stop, times):
    """Upload `path` over and over until `stop` is set, adding each one's time to `times`."""
    while not stop.is_set():
        times.append(upload(route, port, path, rate))


@contextmanager
def uploading(route, port, paths, rate, times):
    """A client uploading each of `paths` over and over at `rate` (None: as fast as it
    goes) for the block, each upload's time added to `times`."""
    stop = threading.Event()
    threads = [
        threading.Thread(target=uploader, args=(route, port, path, rate, stop, times))
        for path in paths
    ]
    for thread in threads:
        thread.start()
    try:
        time.sleep(1)  # under way
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join()


@contextmanager
def burning_cpu(path):
    """CPU_BURNERS loops of `sha256sum path`, and no upload, for the block."""
    loop = f"while true; do sha256sum {path} >/dev/null; done"
    burners = [subprocess.Popen(["sh", "-c", loop], start_new_session=True)
               for _ in range(CPU_BURNERS)]  # fmt: skip
    try:
        time.sleep(1)
        yield
    finally:
        for burner in burners:
            os.killpg(burner.pid, signal.SIGKILL)
            burner.wait()


def p99(port, target):
    return harness.wrk(port, target, WRK_SECONDS, 16).p99_ms


def timed(argv):
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def random_file(path, size):
    with open(path, "wb") as f:
        for _ in range(size // MiB):
            f.write(os.urandom(MiB))
    return path


def measure(tmp, data_dir, route, rounds, latest, rate):
    """{figure: value} for one route."""
    bodies = os.path.join(tmp, "bodies")
    os.makedirs(bodies, exist_ok=True)
    big, file = os.path.join(tmp, "512.bin"), os.path.join(tmp, "100.bin")
    figures = {}
    with route.start(data_dir, bodies, os.path.join(tmp, "server.log")) as running:
        port = running.port
        harness.fetch(port, latest)
        before = harness.memory(running.pid, "VmHWM")
        upload(route, port, big)
        figures["memory"] = (before, harness.memory(running.pid, "VmHWM"))
        uploaded, baselines = [], []
        for _ in range(rounds):
            uploaded.append(upload(route, port, file))
            copy = os.path.join(tmp, "copy.bin")
            baselines.append(timed(["cp", file, copy]) + timed(["sha256sum", file]))
            os.unlink(copy)
        figures["publish"] = (uploaded, baselines)
        copies = [shutil.copyfile(file, f"{file}.{i}") for i in range(UPLOADERS)]
        p99s = {"alone": [], "paced": [], "unpaced": [], "cpu": []}
        meanwhile = {"paced": [], "unpaced": []}
        for _ in range(rounds):
            p99s["alone"].append(p99(port, latest))
            for name, limit in (("paced", rate), ("unpaced", None)):
                with uploading(route, port, copies, limit, meanwhile[name]):
                    p99s[name].append(p99(port, latest))
            with burning_cpu(file):
                p99s["cpu"].append(p99(port, latest))
        figures["p99"] = (p99s, meanwhile)
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
        "--upload-rate",
        default="25M",
        help="what each of the 4 uploads beside the API's load sends a second (curl's "
        "--limit-rate): 25M, four of them filling a 1 Gbit/s link",
    )
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
                figures = measure(tmp, data_dir, route, args.rounds, latest, args.upload_rate)
                report(route, figures, args.upload_rate)
    finally:
        harness.stop_all()
    return 0


def report(route, figures, rate):
    before, after = figures["memory"]
    uploads, baselines = figures["publish"]
    p99s, meanwhile = figures["p99"]
    ratio = statistics.median(uploads) / statistics.median(baselines)
    alone = statistics.median(p99s["alone"])
    ratios = {name: statistics.median(p99s[name]) / alone for name in p99s}
    what = "the server's" if route.recv_bytes is None else f"{route.recv_bytes:,}"
    print(f"\n{type(route).__name__} route, recv_bytes {what}: medians of {len(uploads)} rounds")

    def p99_rows(name, label, goal):
        return [
            (f"p99 {label} (ms)", "", harness.spread(p99s[name], "{:.1f}"), True),
            ("  ratio to alone", goal, f"{ratios[name]:.2f}", not goal or ratios[name] < 2),
        ]

    def each(name):
        times = meanwhile[name]
        return harness.spread(times, "{:.2f}") if times else "-"

    harness.report(
        [
            (
                "memory growth, 512 MiB upload",
                "<= 20 MB",
                f"{(after - before) / 1e6:.1f} MB (peak {after / 1e6:.0f} MB)",
                after - before <= 20e6,
            ),
            ("100 MiB upload (s)", "", harness.spread(uploads, "{:.2f}"), True),
            ("cp + sha256sum (s)", "", harness.spread(baselines, "{:.2f}"), True),
            ("upload / (cp + sha256sum)", "<= 2", f"{ratio:.2f}", ratio <= 2),
            ("/builds/latest p99 alone (ms)", "", harness.spread(p99s["alone"], "{:.1f}"), True),
            *p99_rows("paced", f"beside {UPLOADERS} uploads at {rate}B/s", "< 2"),
            ("  each upload meanwhile (s)", "", each("paced"), True),
            *p99_rows("unpaced", f"beside {UPLOADERS} uploads, no limit", ""),
            ("  each upload meanwhile (s)", "", each("unpaced"), True),
            *p99_rows("cpu", f"beside {CPU_BURNERS} sha256sum loops", ""),
        ]
    )
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
