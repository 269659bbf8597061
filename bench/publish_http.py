"""Uploads over HTTP: the server's memory, the time of a publish, and the API's latency while
builds are uploaded (issue 24).

    python bench/publish_http.py [--rounds 3] [--recv-bytes 8192,65536,262144]

Against the real server (8 threads, the default) on a free port of 127.0.0.1, over synthetic
data (bench/synthetic.py), with curl as the client, as CI would upload. For each recv_bytes
(how much waitress reads of a connection a turn of the loop), it prints:

- memory: the server's peak resident memory (VmHWM) before and after one 512 MiB upload
  (goal: at most 20 MB more);
- publish: the wall time of a 100 MiB upload, answered once the file is written and fsynced,
  against `cp` of the same file plus `sha256sum` of it, timed in the same rounds, the page
  cache warm (goal: at most 2x);
- p99 of `GET /api/v2/builds/latest` under `wrk -t1 -c16` (more clients than threads), alone
  and while 4 clients upload 100 MiB over and over (goal: under 2x alone).

Until the PUT route is on main, the upload goes to tests/upload_app.py's stand-in route: it
reads the body in 1 MiB chunks, hashes it, writes it to a file and fsyncs it.
"""

import argparse
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
LATEST = "/api/v2/builds/latest?project=p00"
WRK_SECONDS = 5
UPLOADERS = 4
MiB = 1 << 20


def upload(port, path):
    """curl's PUT of the file `path`: its wall time in seconds."""
    started = time.perf_counter()
    subprocess.run(
        [
            "curl",
            "-sSf",
            "-o",
            "/dev/null",
            "-T",
            path,
            "-H",
            "Authorization: Bearer bench",
            f"http://127.0.0.1:{port}/upload",
        ],  # fmt: skip
        check=True,
    )
    return time.perf_counter() - started


def uploader(port, path, stop, times):
    """Upload `path` over and over until `stop` is set, adding each one's time to `times`."""
    while not stop.is_set():
        times.append(upload(port, path))


def timed(argv):
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def random_file(path, size):
    with open(path, "wb") as f:
        for _ in range(size // MiB):
            f.write(os.urandom(MiB))
    return path


def server(data_dir, bodies, recv_bytes, log_path):
    os.environ["UPLOAD_APP_RECV_BYTES"] = str(recv_bytes)
    port = harness.free_port()
    argv = [sys.executable, UPLOAD_APP, data_dir, str(port), bodies, str(1 << 30)]
    return harness.Server(argv, port, log_path)


def measure(tmp, data_dir, recv_bytes, rounds):
    """{figure: value} for one recv_bytes."""
    bodies = os.path.join(tmp, "bodies")
    os.makedirs(bodies, exist_ok=True)
    big, file = os.path.join(tmp, "512.bin"), os.path.join(tmp, "100.bin")
    figures = {}
    with server(data_dir, bodies, recv_bytes, os.path.join(tmp, "server.log")) as running:
        harness.fetch(running.port, LATEST)
        before = harness.memory(running.pid, "VmHWM")
        upload(running.port, big)
        figures["memory"] = (before, harness.memory(running.pid, "VmHWM"))
        uploads, baselines = [], []
        for _ in range(rounds):
            uploads.append(upload(running.port, file))
            copy = os.path.join(tmp, "copy.bin")
            baselines.append(timed(["cp", file, copy]) + timed(["sha256sum", file]))
            os.unlink(copy)
        figures["publish"] = (uploads, baselines)
        alone, during, uploaded = [], [], []
        for _ in range(rounds):
            alone.append(harness.wrk(running.port, LATEST, WRK_SECONDS, 16).p99_ms)
            stop = threading.Event()
            threads = [
                threading.Thread(target=uploader, args=(running.port, file, stop, uploaded))
                for _ in range(UPLOADERS)
            ]
            for thread in threads:
                thread.start()
            time.sleep(1)  # the uploads under way
            during.append(harness.wrk(running.port, LATEST, WRK_SECONDS, 16).p99_ms)
            stop.set()
            for thread in threads:
                thread.join()
        figures["p99"] = (alone, during, uploaded)
    return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--recv-bytes", default="8192,65536,262144")
    args = parser.parse_args()
    harness.stop_servers_on_sigterm()
    rows = []
    try:
        with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
            data_dir = synthetic.generate(os.path.join(tmp, "data"), [2000])
            random_file(os.path.join(tmp, "512.bin"), 512 * MiB)
            random_file(os.path.join(tmp, "100.bin"), 100 * MiB)
            for path in ("512.bin", "100.bin"):  # the page cache warm
                subprocess.run(["cat", os.path.join(tmp, path)], stdout=subprocess.DEVNULL)
            for recv_bytes in map(int, args.recv_bytes.split(",")):
                figures = measure(tmp, data_dir, recv_bytes, args.rounds)
                rows.append((recv_bytes, figures))
                report(recv_bytes, figures)
    finally:
        harness.stop_all()
    return 0


def report(recv_bytes, figures):
    before, after = figures["memory"]
    uploads, baselines = figures["publish"]
    alone, during, uploaded = figures["p99"]
    ratio = statistics.median(uploads) / statistics.median(baselines)
    p99_ratio = statistics.median(during) / statistics.median(alone)
    print(f"\nrecv_bytes {recv_bytes:,}: medians of {len(uploads)} rounds (min-max)")
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
