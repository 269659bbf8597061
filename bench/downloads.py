"""Downloads of a kept file: Buildshelf direct against nginx sending the same file from disk,
what downloads cost the API's other clients, and what `buildshelf publish --file` costs.

    python bench/downloads.py                  # 5 rounds of 4 s per cell: about 5 minutes
    python bench/downloads.py --quick          # 3 rounds of 2 s: about 2 minutes
    python bench/downloads.py --only publish   # one part: throughput, api or publish

Needs nginx and wrk (Debian: apt-get install nginx wrk). Everything runs in a temporary
directory on 127.0.0.1 and stops by itself, even on an error or SIGTERM.

1. A 64 MiB file of random bytes (fixed seed) is published with the real `buildshelf publish
   --file` into a data directory that also holds a project of 2,000 builds. Buildshelf
   (server.py with its default flags, the access log on, to a file) serves it at its download
   URL; nginx serves the very object file Buildshelf sends, from disk, with a minimal
   configuration: Debian's `worker_processes auto`, `sendfile on`, no access log, one location
   that `alias`es the file. A whole download from each is checked byte for byte (sha256) first.
2. Throughput: 1 and 16 keep-alive clients download the file again and again, the two servers
   taking turns, for --seconds each, --rounds times. Per cell: MiB/s and the server's CPU per
   MiB (Buildshelf's process; nginx's master and workers, from /proc/<pid>/stat), median and
   (min-max) of the rounds, and the ratios of the medians. Goals: Buildshelf's throughput at 1
   client at least 0.8 of nginx's; its CPU per MiB at 16 clients at most 2.5 times nginx's.
   The clients are one Python process with a socket each that discards the bodies in the
   kernel (recv with MSG_TRUNC, no copy to user space), so that on a small machine they take
   as little CPU from the servers as a client can; their own CPU is printed beside.
3. The API while files go out: `wrk -t1 -c16` on /builds/latest alone; then 32 clients
   download the file continuously, first alone, then while the same wrk runs; the three
   taking turns at going first. p99 latency (wrk's) and server CPU per request, medians of
   the rounds, with downloads against alone. Goals: p99 at most 2 times, CPU per request at
   most 1.5 times. The CPU of a request made during downloads is the server's CPU in that
   run less what the downloads cost: the MiB sent meanwhile times the CPU per MiB of the
   downloads alone, just before. The clients download as fast as loopback allows, which on
   two cores leaves the server little CPU; the same is measured again with the downloads
   held to 119 MiB/s in all (a 1 Gbit/s link), as information.
4. Publishing a 100 MiB file (other bytes each round, the page cache warm) with the real
   `buildshelf publish --file`, the interpreter's start included, against `cp` of the same
   file to the same filesystem plus `sha256sum` of it, taking turns: medians, goal at most 1.5
   times. `cp`, `sha256sum` and `sync` of the copy is printed beside: publish fsyncs, cp does
   not.

It prints a table of targets (goal, measured, ok) and exits 1 if one is missed.
"""

import argparse
import math
import multiprocessing
import os
import random
import resource
import selectors
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse

import harness
import synthetic
from buildshelf.kept.artifacts import default_store, object_path
from harness import cpu_seconds, report, spread, wrk

MIB = 1 << 20
FILE_MIB = 64
PUBLISH_MIB = 100
SLUG = "files"  # the project of the kept files
LATEST = "/api/v2/builds/latest?project=p00"
CLIENTS = (1, 16)
BACKGROUND_DOWNLOADS = 32
LINK_MIB_S = 119  # 1 Gbit/s
API_CLIENTS = 16
WARM_UP = 0.5  # seconds of downloading before a window is measured: past TCP's slow start
THROUGHPUT_GOAL = 0.8  # Buildshelf / nginx MiB/s, 1 client
CPU_GOAL = 2.5  # Buildshelf / nginx CPU per MiB, 16 clients
P99_GOAL = 2.0  # /builds/latest during downloads / alone
REQUEST_CPU_GOAL = 1.5
PUBLISH_GOAL = 1.5  # publish / (cp + sha256sum)
RECEIVE_BYTES = 4 * MIB  # the most one recv() discards
PARTS = ("throughput", "api", "publish")

NGINX_CONF = """\
worker_processes auto;
pid {work}/nginx.pid;
error_log {work}/error.log;
events {{
    worker_connections 768;
}}
http {{
    sendfile on;
    access_log off;
    default_type application/octet-stream;
    client_body_temp_path {work}/body;
    proxy_temp_path {work}/proxy;
    fastcgi_temp_path {work}/fastcgi;
    uwsgi_temp_path {work}/uwsgi;
    scgi_temp_path {work}/scgi;
    server {{
        listen 127.0.0.1:{port};
        location = /file.jar {{
            alias {file};
        }}
    }}
}}
"""


# --- the download clients ---------------------------------------------------------------------


def _download_loop(port, target, clients, rate, received, stopping, results):
    """In a process of its own: `clients` keep-alive connections, each asking for `target`
    again as soon as it has the whole body. `received` counts body bytes as they come; with
    a `rate` (MiB/s, all connections together) none is read while ahead of it, so that TCP's
    flow control holds the server back as a slower network would."""
    request = f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
    selector = selectors.DefaultSelector()
    scratch = bytearray(RECEIVE_BYTES)  # never written: MSG_TRUNC discards in the kernel
    errors, whole = [], 0

    def connect():
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(request)
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ, [b"", None])  # head so far, body left

    def reconnect(sock, why):
        errors.append(why)
        selector.unregister(sock)
        sock.close()
        connect()

    for _ in range(clients):
        connect()
    started = time.monotonic()
    while not stopping.is_set():
        if rate and received.value > rate * MIB * (time.monotonic() - started):
            time.sleep(0.001)
            continue
        for key, _ in selector.select(0.1):
            sock, state = key.fileobj, key.data
            try:
                if state[1] is None:
                    data = sock.recv(65536)
                    if not data:
                        reconnect(sock, "closed before the headers")
                        continue
                    state[0] += data
                    head, found, body = state[0].partition(b"\r\n\r\n")
                    if not found:
                        continue
                    lines = head.decode("latin-1").split("\r\n")
                    if lines[0].split()[1] != "200":
                        reconnect(sock, lines[0])
                        continue
                    length = next(
                        int(line.split(":")[1])
                        for line in lines
                        if line.lower().startswith("content-length:")
                    )
                    state[:] = [b"", length - len(body)]
                    received.value += len(body)
                else:
                    n = sock.recv_into(scratch, min(state[1], RECEIVE_BYTES), socket.MSG_TRUNC)
                    if not n:
                        reconnect(sock, "closed in the body")
                        continue
                    state[1] -= n
                    received.value += n
                if state[1] == 0:
                    whole += 1
                    state[:] = [b"", None]
                    sock.sendall(request)
            except OSError as error:
                reconnect(sock, f"{type(error).__name__}: {error}")
    usage = resource.getrusage(resource.RUSAGE_SELF)
    results.put((usage.ru_utime + usage.ru_stime, whole, errors))


class Downloads:
    """`clients` clients downloading `target` continuously for the length of a `with` block,
    as fast as they can or at `rate` MiB/s in all."""

    def __init__(self, port, target, clients, rate=None):
        context = multiprocessing.get_context("fork")
        self.received = context.RawValue("q", 0)
        self.stopping = context.Event()
        self.results = context.Queue()
        self.process = context.Process(
            target=_download_loop,
            args=(port, target, clients, rate, self.received, self.stopping, self.results),
            daemon=True,
        )
        self.cpu, self.whole, self.errors = 0.0, 0, []

    def __enter__(self):
        self.process.start()
        time.sleep(WARM_UP)
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        try:
            self.cpu, self.whole, self.errors = self.results.get(timeout=30)
        finally:
            self.process.join(5)
            if self.process.is_alive():
                self.process.kill()


class Mark:
    """Where a window of a run starts: the clock, the bytes received, the servers' CPU."""

    def __init__(self, pids, downloads=None):
        self.time = time.monotonic()
        self.bytes = downloads.received.value if downloads else 0
        self.cpu = sum(cpu_seconds(pid) for pid in pids)

    def since(self, start):
        """(seconds, MiB, CPU seconds) from `start` to here."""
        return self.time - start.time, (self.bytes - start.bytes) / MIB, self.cpu - start.cpu


def whole_download(port, target):
    """(status, sha256, size) of one whole download, read into user space and hashed."""
    reply = harness.fetch(port, target, 60, keep_body=False, hash_body=True)
    return reply.status, reply.sha256, reply.size


# --- the servers ------------------------------------------------------------------------------


def buildshelf_cli(*argv):
    return subprocess.run(
        [sys.executable, "-m", "buildshelf", *argv],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )


def random_file(path, mib, seed):
    rng = random.Random(seed)
    with open(path, "wb") as f:
        for _ in range(mib):
            f.write(rng.randbytes(MIB))
    return path


def make_data(work):
    """The data directory, with the 64 MiB file published; (its directory, build JSON)."""
    data_dir = synthetic.generate(os.path.join(work, "data"), [2000])
    synthetic.write_project(data_dir, SLUG, [])
    source = random_file(os.path.join(work, f"{SLUG}-1.0-1.jar"), FILE_MIB, seed=64)
    buildshelf_cli(
        "publish", SLUG, "--build", "1", "--channel", "1.0", "--file", source, "--data", data_dir
    )
    return data_dir


def start_nginx(work, file):
    nginx_dir = os.path.join(work, "nginx")
    os.makedirs(nginx_dir)
    port = harness.free_port()
    conf = os.path.join(nginx_dir, "nginx.conf")
    with open(conf, "w") as f:
        f.write(NGINX_CONF.format(work=nginx_dir, port=port, file=file))
    argv = ["nginx", "-p", nginx_dir, "-c", conf, "-e", os.path.join(nginx_dir, "error.log")]
    nginx = harness.Server.nginx(argv, port, ready="/file.jar")
    time.sleep(0.2)  # its workers, forked after it listens
    return nginx, harness.process_tree(nginx.pid)


def hosted_target(port):
    """(path, sha256) of the kept file's download URL, as the API gives it."""
    build = harness.fetch(port, f"/api/v2/builds/latest?project={SLUG}").json()
    return urllib.parse.urlsplit(build["downloadUrl"]).path, build["sha256"]


def check_same_bytes(servers, sha256, rows):
    """Both servers send the published bytes, whole."""
    said = []
    for label, (port, target, _) in servers.items():
        status, digest, size = whole_download(port, target)
        said.append(f"{label} {status}, {size / MIB:.0f} MiB, sha256 {digest[:12]}...")
        rows.append(
            (
                f"{label} sends the published bytes",
                "200, sha256",
                f"{status}, {'same' if digest == sha256 else 'OTHER'} sha256",
                status == 200 and digest == sha256 and size == FILE_MIB * MIB,
            )
        )
    print(f"one whole download each: {'; '.join(said)} (published: {sha256[:12]}...)\n")


# --- 2. throughput ----------------------------------------------------------------------------


def measure_throughput(servers, args, rows):
    print(
        f"Throughput: the {FILE_MIB} MiB file downloaded again and again, {args.rounds} rounds "
        f"of {args.seconds} s per cell, the servers taking turns",
        flush=True,
    )
    medians = {}
    for n in CLIENTS:
        samples = {label: [] for label in servers}
        for r in range(args.rounds):
            order = list(servers) if r % 2 == 0 else list(reversed(servers))
            for label in order:
                port, target, pids = servers[label]
                started = time.monotonic()
                with Downloads(port, target, n) as downloads:
                    start = Mark(pids, downloads)
                    time.sleep(args.seconds)
                    seconds, mib, cpu = Mark(pids, downloads).since(start)
                client = downloads.cpu / (time.monotonic() - started)
                samples[label].append((mib / seconds, cpu / mib * 1000, client, downloads.errors))
        print(
            f"\n{n} client{'s' if n > 1 else ''}: {'':12} {'MiB/s':<22} "
            f"{'server CPU ms/MiB':<22} client CPU (of a core)"
        )
        for label, runs in samples.items():
            errors = [e for run in runs for e in run[3]]
            print(
                f"  {label:<21} {spread([s[0] for s in runs]):<22} "
                f"{spread([s[1] for s in runs], '{:.3f}'):<22} "
                f"{spread([s[2] * 100 for s in runs])} %"
                + (f"  ! {len(errors)} errors, e.g. {errors[0]}" if errors else ""),
                flush=True,
            )
            medians[label, n] = (
                statistics.median(s[0] for s in runs),
                statistics.median(s[1] for s in runs),
                bool(errors),
            )
        ours, theirs = samples["buildshelf"], samples["nginx"]
        print(
            f"  Buildshelf / nginx: throughput "
            f"{medians['buildshelf', n][0] / medians['nginx', n][0]:.2f} (per round "
            f"{spread([o[0] / t[0] for o, t in zip(ours, theirs)], '{:.2f}')}), CPU per MiB "
            f"{medians['buildshelf', n][1] / medians['nginx', n][1]:.2f} (per round "
            f"{spread([o[1] / t[1] for o, t in zip(ours, theirs)], '{:.2f}')})"
        )
    errors = any(medians[key][2] for key in medians)
    throughput = medians["buildshelf", 1][0] / medians["nginx", 1][0]
    cpu = medians["buildshelf", 16][1] / medians["nginx", 16][1]
    rows.append(
        (
            "throughput at 1 client, Buildshelf / nginx",
            f">= {THROUGHPUT_GOAL}",
            f"{throughput:.2f}" + (" (errors)" if errors else ""),
            throughput >= THROUGHPUT_GOAL and not errors,
        )
    )
    rows.append(
        (
            "CPU per MiB at 16 clients, Buildshelf / nginx",
            f"<= {CPU_GOAL}",
            f"{cpu:.2f}" + (" (errors)" if errors else ""),
            cpu <= CPU_GOAL and not errors,
        )
    )


# --- 3. the API while files go out ------------------------------------------------------------


def measure_api(port, pid, target, args, rows):
    print(
        f"\n/builds/latest, wrk -t1 -c{API_CLIENTS}, {args.seconds} s: alone; while "
        f"{BACKGROUND_DOWNLOADS} clients download the file continuously, as fast as they can; "
        f"and while they download at {LINK_MIB_S} MiB/s in all (a 1 Gbit/s link); "
        f"{args.rounds} rounds",
        flush=True,
    )
    wrk(port, LATEST, 1, API_CLIENTS)  # warm up: the first request encodes the answer
    runs = {"alone": [], "downloads": [], "1 Gbit/s": []}

    def alone():
        before = cpu_seconds(pid)
        load = wrk(port, LATEST, args.seconds, API_CLIENTS)
        cpu = cpu_seconds(pid) - before
        runs["alone"].append(
            (load.p99_ms, cpu / load.requests * 1e6, load.requests / load.seconds, 0, 0)
        )
        return load.errors

    def with_downloads(label, rate):
        with Downloads(port, target, BACKGROUND_DOWNLOADS, rate) as downloads:
            start = Mark([pid], downloads)
            time.sleep(args.seconds)
            _, download_mib, download_cpu = Mark([pid], downloads).since(start)
            start = Mark([pid], downloads)
            load = wrk(port, LATEST, args.seconds, API_CLIENTS)
            seconds, mib, cpu = Mark([pid], downloads).since(start)
        # What the downloads cost meanwhile is taken to be what they cost alone, a MiB.
        downloads_cpu = mib * download_cpu / download_mib if download_mib else 0.0
        runs[label].append(
            (
                load.p99_ms,
                (cpu - downloads_cpu) / max(load.requests, 1) * 1e6,
                load.requests / load.seconds,
                mib / seconds,
                download_cpu / download_mib * 1000 if download_mib else math.inf,
            )
        )
        return "; ".join(filter(None, [load.errors] + downloads.errors[:1]))

    measures = [alone, lambda: with_downloads("downloads", None)]
    measures.append(lambda: with_downloads("1 Gbit/s", LINK_MIB_S))
    errors = []
    for r in range(args.rounds):
        for measure in measures[r % 3 :] + measures[: r % 3]:  # each goes first in turn
            errors.append(measure())
        print(
            f"  round {r + 1}: "
            + "; ".join(
                f"{label} p99 {run[-1][0]:.1f} ms, {run[-1][1]:.0f} us a request, "
                f"{run[-1][2]:.0f} req/s"
                + (
                    f" (downloads {run[-1][3]:.0f} MiB/s, {run[-1][4]:.3f} ms of CPU a MiB alone)"
                    if label != "alone"
                    else ""
                )
                for label, run in runs.items()
            ),
            flush=True,
        )
    errors = [e for e in errors if e]
    p99 = {label: statistics.median(r[0] for r in run) for label, run in runs.items()}
    cpu = {label: statistics.median(r[1] for r in run) for label, run in runs.items()}
    for label in ("downloads", "1 Gbit/s"):
        print(
            f"  medians, {label}: p99 {p99[label]:.1f} ms against {p99['alone']:.1f} ms alone "
            f"({p99[label] / p99['alone']:.2f}x); CPU a request {cpu[label]:.0f} us against "
            f"{cpu['alone']:.0f} us ({cpu[label] / cpu['alone']:.2f}x)"
        )
    if errors:
        print(f"  ! {len(errors)} runs with errors, e.g. {errors[0]}")
    rows.append(
        (
            f"/builds/latest p99, {BACKGROUND_DOWNLOADS} downloads / none",
            f"<= {P99_GOAL}",
            f"{p99['downloads'] / p99['alone']:.2f} ({p99['downloads']:.1f} ms)"
            + (" (errors)" if errors else ""),
            p99["downloads"] <= P99_GOAL * p99["alone"] and not errors,
        )
    )
    rows.append(
        (
            f"/builds/latest CPU, {BACKGROUND_DOWNLOADS} downloads / none",
            f"<= {REQUEST_CPU_GOAL}",
            f"{cpu['downloads'] / cpu['alone']:.2f} ({cpu['downloads']:.0f} us)",
            cpu["downloads"] <= REQUEST_CPU_GOAL * cpu["alone"],
        )
    )


# --- 4. publishing ----------------------------------------------------------------------------


def timed(argv):
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, timeout=300)
    return time.perf_counter() - started


def read_whole(path):
    """Read `path` once, so that the page cache holds it."""
    with open(path, "rb") as f:
        while f.read(MIB):
            pass


def measure_publish(work, data_dir, args, rows):
    print(
        f"\nPublishing a {PUBLISH_MIB} MiB file, other bytes each round, page cache warm, "
        f"{args.rounds} rounds",
        flush=True,
    )
    cli = [sys.executable, "-m", "buildshelf"]
    copy = os.path.join(work, "copy.jar")
    publish, yardstick, synced, start_up = [], [], [], []
    for r in range(args.rounds):
        source = random_file(os.path.join(work, f"big-{r}.jar"), PUBLISH_MIB, seed=100 + r)
        read_whole(source)

        def ours(r=r, source=source):
            publish.append(
                timed(
                    cli
                    + ["publish", SLUG, "--build", str(100 + r), "--channel", "1.0"]
                    + ["--file", source, "--data", data_dir]
                )
            )

        def theirs(source=source):
            cp, sha256sum = timed(["cp", source, copy]), timed(["sha256sum", source])
            yardstick.append(cp + sha256sum)
            synced.append(cp + sha256sum + timed(["sync", copy]))
            os.remove(copy)

        for measure in (ours, theirs) if r % 2 == 0 else (theirs, ours):
            measure()
        start_up.append(timed(cli + ["--version"]))
        os.remove(source)
        print(
            f"  round {r + 1}: publish {publish[-1] * 1000:.0f} ms; cp + sha256sum "
            f"{yardstick[-1] * 1000:.0f} ms (and sync {synced[-1] * 1000:.0f} ms); "
            f"`buildshelf --version` {start_up[-1] * 1000:.0f} ms",
            flush=True,
        )
    ours, theirs = statistics.median(publish), statistics.median(yardstick)
    print(
        f"  medians: publish {ours * 1000:.0f} ms, cp + sha256sum {theirs * 1000:.0f} ms "
        f"({ours / theirs:.2f}x), with sync {statistics.median(synced) * 1000:.0f} ms "
        f"({ours / statistics.median(synced):.2f}x); the interpreter's start and imports "
        f"(`buildshelf --version`) {statistics.median(start_up) * 1000:.0f} ms"
    )
    rows.append(
        (
            f"publish --file {PUBLISH_MIB} MiB / cp + sha256sum",
            f"<= {PUBLISH_GOAL}",
            f"{ours / theirs:.2f} ({ours * 1000:.0f} ms)",
            ours <= PUBLISH_GOAL * theirs,
        )
    )


# --- the run ----------------------------------------------------------------------------------


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rounds", type=int, default=5, help="turns per server and cell (default: %(default)s)"
    )
    parser.add_argument(
        "--seconds", type=int, default=4, help="length of one measured run (default: %(default)s)"
    )
    parser.add_argument("--quick", action="store_true", help="3 rounds of 2 s")
    parser.add_argument(
        "--only",
        type=lambda s: set(s.split(",")),
        default=set(PARTS),
        help=f"comma-separated parts to run, of {','.join(PARTS)} (default: all)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.seconds = 3, 2
    return args


def main(argv=None):
    args = parse_args(argv)
    harness.stop_servers_on_sigterm()
    missing = [tool for tool in ("nginx", "wrk", "sha256sum") if shutil.which(tool) is None]
    if missing:
        raise SystemExit(f"missing {', '.join(missing)}: apt-get install nginx wrk")
    version = subprocess.run(["nginx", "-v"], capture_output=True, text=True).stderr.strip()
    print(
        f"server.py --data DIR --port PORT against {version} (sendfile on); {args.rounds} "
        f"rounds of {args.seconds} s; {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.2f}\n",
        flush=True,
    )
    rows = []
    with tempfile.TemporaryDirectory() as work:
        os.chmod(work, 0o755)  # nginx's workers run as nobody when started by root
        data_dir = make_data(work)
        buildshelf = harness.Server.buildshelf(
            data_dir, log_path=os.path.join(work, "buildshelf.log")
        )
        port, nginx = buildshelf.port, None
        try:
            target, sha256 = hosted_target(port)
            nginx, pids = start_nginx(work, object_path(default_store(data_dir), sha256))
            servers = {
                "buildshelf": (port, target, [buildshelf.pid]),
                "nginx": (nginx.port, "/file.jar", pids),
            }
            check_same_bytes(servers, sha256, rows)
            if "throughput" in args.only:
                measure_throughput(servers, args, rows)
            nginx.stop()
            if "api" in args.only:
                measure_api(port, buildshelf.pid, target, args, rows)
        finally:
            if nginx is not None:
                nginx.stop()
            buildshelf.stop()
        if "publish" in args.only:
            measure_publish(work, data_dir, args, rows)
    report(rows)
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f}")
    return 0 if all(ok for *_, ok in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
