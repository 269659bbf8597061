"""Measure what users get: Buildshelf as it runs by default, against bare waitress, by clients.

    python bench/run.py                               # 3 rounds of 3 s per cell: about 5 min
    python bench/run.py --quick                       # 3 rounds of 1 s, no reload part: 2 min
    python bench/run.py --server-args "--threads 8"   # extra flags for server.py

Needs wrk (Debian: apt-get install wrk). Everything runs on 127.0.0.1 and stops by itself.

Buildshelf runs with its default flags (so the access log is on), its log written to a file;
bench/bare.py, a bare waitress app with waitress's own defaults, sends the same bytes with the
same headers. Both are loaded with `wrk -t1 -cN` (keep-alive) at 1, 16, 64 and 256 clients on
/builds/latest, /projects, a ~160 KB list and the Fill v3 API's builds/latest, the two servers
taking turns, and the server's CPU per request is read from /proc/<pid>/stat around each wrk
run, so a busy machine slows the run down but moves the figures less than it moves throughput.
Printed: medians and the spread (min-max) of the rounds, efficiency = bare / Buildshelf (goal
>= 0.85), and wrk's p99 latency. Then Buildshelf alone on requests it must route (a query
parameter of its own each time, so none is answered from memory: what the worker threads, and
so --threads, are for). Then, as a second view, the app's own CPU per call measured in process
(no server, no sockets, precise); then (not with --quick) the cost of a reload and what other
clients see during reloads. Start-up time and memory are bench/startup.py's job.
"""

import argparse
import io
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from waitress.buffers import ReadOnlyFileBasedBuffer

import harness
import synthetic
from buildshelf import store
from harness import spread

HERE = os.path.dirname(os.path.abspath(__file__))
TARGETS = {  # name -> request
    "/builds/latest": "/api/v2/builds/latest?project=p10",
    "/projects": "/api/v2/projects",
    "list of 300 builds": "/api/v2/builds?project=p10&channel=1.21",
    # The Fill v3 API's (docs/fill-v3.md), which run-task asks for before each download.
    "v3 builds/latest": "/v3/projects/p10/versions/1.21/builds/latest",
}
CLIENTS = (1, 16, 64, 256)
EFFICIENCY_GOAL = 0.85
# Headers waitress writes itself: the bare app must not send them twice.
SERVER_HEADERS = {"date", "server", "content-length", "connection", "transfer-encoding"}


def answer(port, target):
    """The body and the headers a server sends for `target` (to a client like wrk)."""
    reply = harness.fetch(port, target)
    if reply.status != 200:
        raise SystemExit(f"{target}: status {reply.status}: {reply.body[:200]!r}")
    lines = reply.head.decode("latin-1").split("\r\n")[1:]  # as sent: their order and case
    headers = [
        (name.strip(), value.strip()) for name, _, value in (h.partition(":") for h in lines)
    ]
    return reply.body, [
        (name, value) for name, value in headers if name.lower() not in SERVER_HEADERS
    ]


# For wrk -s: the target with a query parameter of its own each time (ignored by the API),
# so that no request is a repeat that Buildshelf answers from memory.
EACH_ROUTED = """
counter = 0
request = function()
  counter = counter + 1
  return wrk.format(nil, wrk.path .. "&n=" .. counter)
end
"""


def load_run(server, target, seconds, clients, script=None):
    """(CPU microseconds per request, requests per second, errors, requests, p99 latency in
    ms) of one run."""
    before = harness.cpu_seconds(server.pid)
    load = harness.wrk(server.port, target, seconds, clients, script)
    cpu = harness.cpu_seconds(server.pid) - before
    if not load.requests:
        return float("inf"), 0.0, load.errors or "no request answered", 0, float("inf")
    return (
        cpu / load.requests * 1e6,
        load.requests / load.seconds,
        load.errors,
        load.requests,
        load.p99_ms,
    )


def sweep(servers, rounds, seconds, clients):
    """{(name, n): {label: [load_run() per round]}}, servers taking turns."""
    results = {}
    for name, target in TARGETS.items():
        for server in servers.values():
            harness.wrk(
                server.port, target, 1, 16
            )  # warm up: the first requests encode and compress
        for n in clients:
            samples = {label: [] for label in servers}
            for r in range(rounds):
                order = list(servers) if r % 2 == 0 else list(reversed(servers))
                for label in order:
                    samples[label].append(load_run(servers[label], target, seconds, n))
            results[name, n] = samples
            ours, bare = samples["buildshelf"], samples["bare"]
            print(
                f"  {name}, {n} clients: buildshelf "
                f"{', '.join(f'{s[0]:.0f}' for s in ours)} us, bare "
                f"{', '.join(f'{s[0]:.0f}' for s in bare)} us",
                flush=True,
            )
    return results


P99 = "{:.1f}"  # milliseconds


def print_sweep(results, sizes, rows):
    print(
        "\nServer CPU per request in us, requests per second and wrk's p99 latency in ms: "
        "median (min-max) of the rounds.\nEfficiency = bare / buildshelf CPU: of the "
        "medians (and per round, min-max).\n"
    )
    header = (
        f"{'request':<30} {'clients':>7}  {'buildshelf us':<18} {'bare us':<18} "
        f"{'buildshelf req/s':<20} {'bare req/s':<20} {'buildshelf p99':<16} "
        f"{'bare p99':<16} efficiency"
    )
    print(header)
    print("-" * len(header))
    for (name, n), samples in results.items():
        ours, bare = samples["buildshelf"], samples["bare"]
        our_cpu, bare_cpu = [s[0] for s in ours], [s[0] for s in bare]
        efficiency = statistics.median(bare_cpu) / statistics.median(our_cpu)
        per_round = [b / o for b, o in zip(bare_cpu, our_cpu)]
        label = f"{name} ({sizes[name] / 1000:.1f} KB)"
        print(
            f"{label:<30} {n:>7}  {spread(our_cpu):<18} {spread(bare_cpu):<18} "
            f"{spread([s[1] for s in ours]):<20} {spread([s[1] for s in bare]):<20} "
            f"{spread([s[4] for s in ours], P99):<16} {spread([s[4] for s in bare], P99):<16} "
            f"{efficiency:.2f} ({min(per_round):.2f}-{max(per_round):.2f})"
        )
        errors = [
            f"{label} {s}" for label, runs in samples.items() for s in (r[2] for r in runs) if s
        ]
        for error in errors:
            print(f"{'':<39}! {error}")
        rows.append(
            (
                f"efficiency, {name}, {n} clients",
                f">= {EFFICIENCY_GOAL}",
                f"{efficiency:.2f}" + (" (errors)" if errors else ""),
                efficiency >= EFFICIENCY_GOAL and not errors,
            )
        )


def count_lines(path):
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def measure_servers(work, data_dir, args, rows):
    """The concurrency sweep; returns (the Buildshelf server, the bodies)."""
    log_path = os.path.join(work, "buildshelf.log")
    ours = harness.Server.buildshelf(data_dir, args.server_args, log_path)
    try:
        answers = {target: answer(ours.port, target) for target in TARGETS.values()}
        answers_file = os.path.join(work, "answers.json")
        with open(answers_file, "w") as f:
            json.dump(
                {
                    t: {"body": body.decode("latin-1"), "headers": headers}
                    for t, (body, headers) in answers.items()
                },
                f,
            )
        bare_port = harness.free_port()
        bare = harness.Server(
            [sys.executable, os.path.join(HERE, "bare.py"), str(bare_port), answers_file],
            bare_port,
            os.path.join(work, "bare.log"),
            ready=TARGETS["/projects"],  # it knows no other target
        )
        with bare:
            lines_before = count_lines(log_path)
            results = sweep(
                {"buildshelf": ours, "bare": bare}, args.rounds, args.seconds, args.clients
            )
    except BaseException:
        ours.stop()
        raise
    sizes = {name: len(answers[target][0]) for name, target in TARGETS.items()}
    print_sweep(results, sizes, rows)
    answered = sum(run[3] for samples in results.values() for run in samples["buildshelf"])
    print(
        f"\nBuildshelf answered {answered} requests in the measured runs (warm-ups "
        f"apart); its log grew by {count_lines(log_path) - lines_before} lines"
    )
    return ours, {t: body for t, (body, _) in answers.items()}


def measure_routed(work, server, args):
    """Buildshelf alone, each request a target of its own: what the worker threads answer
    (a repeat is answered from memory by the loop thread), and what --threads changes."""
    script = os.path.join(work, "each_routed.lua")
    with open(script, "w") as f:
        f.write(EACH_ROUTED)
    target = TARGETS["/builds/latest"]
    print(
        f"\nRouted: {target}&n=<a number of its own each time>, Buildshelf alone, "
        f"{args.rounds} rounds: CPU per request in us, requests per second, p99 latency in "
        f"ms"
    )
    for n in args.clients:
        runs = [load_run(server, target, args.seconds, n, script) for _ in range(args.rounds)]
        errors = "; ".join(filter(None, (run[2] for run in runs)))
        print(
            f"  {n:>3} clients: {spread([r[0] for r in runs])} us, "
            f"{spread([r[1] for r in runs])} req/s, p99 {spread([r[4] for r in runs], P99)} ms"
            + (f"  ! {errors}" if errors else ""),
            flush=True,
        )


def app_cpu_per_call(app, target, calls=2000, routed=False):
    """Microseconds of CPU for one call of a WSGI app, without any server around it.

    routed: each call with a query parameter of its own (ignored by the API), so Buildshelf
    routes every call instead of answering a repeat from memory.
    """
    path, _, query = target.partition("?")
    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "HTTP_HOST": "127.0.0.1",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(),
        "wsgi.errors": sys.stderr,
        # what waitress offers, so a body returned as a file is read as it reads it
        "wsgi.file_wrapper": ReadOnlyFileBasedBuffer,
    }

    def start_response(status, headers, exc_info=None):
        pass

    b"".join(app(dict(environ), start_response))  # the first call encodes
    environs = [
        dict(environ, QUERY_STRING=f"{query}&n={i}" if routed else query) for i in range(calls)
    ]
    started = time.process_time()
    for one in environs:
        b"".join(app(one, start_response))
    return (time.process_time() - started) / calls * 1e6


def measure_app_cost(work, data_dir, bodies, rows):
    """The part of a request that is Buildshelf's own, measured in process: precise where
    the loaded servers are noisy. Also: the same request beside 19 other projects and alone."""
    import bare
    from buildshelf import server

    print("\nIn process (the WSGI app called directly, no server, no access log), CPU a call:")
    ours = server.make_app(store.Store(data_dir, check_interval=1))
    yardstick = bare.make_app({t: (b, []) for t, b in bodies.items()})
    for name, target in TARGETS.items():
        print(
            f"  {name}: a repeat {app_cpu_per_call(ours, target):.0f} us, routed "
            f"{app_cpu_per_call(ours, target, routed=True):.0f} us; the bare app "
            f"{app_cpu_per_call(yardstick, target):.0f} us"
        )
    alone_dir = os.path.join(work, "alone")
    os.makedirs(alone_dir)
    shutil.copy(os.path.join(data_dir, "p10.json"), alone_dir)
    alone = server.make_app(store.Store(alone_dir, check_interval=1))
    target = TARGETS["/builds/latest"]
    rounds = [
        (app_cpu_per_call(ours, target, routed=True), app_cpu_per_call(alone, target, routed=True))
        for _ in range(5)
    ]
    beside = statistics.median(b for b, _ in rounds)
    single = statistics.median(s for _, s in rounds)
    print(
        f"  /builds/latest, routed: {beside:.1f} us beside 19 other projects, {single:.1f} us alone"
    )
    rows.append(
        (
            "cost beside other projects (in process)",
            "ratio <= 1.10",
            f"{beside / single:.2f}",
            beside / single <= 1.10,
        )
    )


def measure_reload(data_dir, port, seconds, rows):
    """A reload of one 2,000-build file: its cost, and what other clients see meanwhile."""
    loaded = store.Store(data_dir, check_interval=3600)
    path = os.path.join(data_dir, "p19.json")  # 2,000 builds
    with open(path) as f:
        original = json.load(f)

    def publish(number):
        edited = dict(
            original,
            builds=original["builds"]
            + [synthetic.build(synthetic.random.Random(number), number, "1.22", False)],
        )
        with open(path + ".tmp", "w") as f:
            json.dump(edited, f, indent=2)
        os.replace(path + ".tmp", path)

    times, cpu_times = [], []
    for n in range(5):
        publish(5000 + n)
        started, cpu_started = time.perf_counter(), time.process_time()
        snapshot = loaded.refresh()
        times.append((time.perf_counter() - started) * 1000)
        cpu_times.append((time.process_time() - cpu_started) * 1000)
        assert snapshot.projects["p19"].builds[-1].number == 5000 + n
    reload_ms = statistics.median(times)
    # On a busy machine the wall time is mostly waiting for a core; the CPU time is the cost.
    print(
        f"\nreload after editing one 2,000-build file, in process: median {reload_ms:.0f} ms "
        f"(of {', '.join(f'{t:.0f}' for t in times)}), of which CPU "
        f"{statistics.median(cpu_times):.0f} ms"
    )
    rows.append(
        ("reload of one 2,000-build file", "< 100 ms", f"{reload_ms:.0f} ms", reload_ms < 100)
    )

    # Live: another project keeps being served while p19 is rewritten again and again.
    load = subprocess.Popen(
        [
            "wrk",
            "-t1",
            "-c16",
            f"-d{seconds}s",
            "--latency",
            "--timeout",
            harness.WRK_TIMEOUT,
            f"http://127.0.0.1:{port}/api/v2/builds/latest?project=p01",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + seconds - 0.5
    edits = 0
    while time.monotonic() < deadline:
        edits += 1
        publish(9000 + edits)
        time.sleep(0.3)
    result = harness.Load(load.communicate(timeout=seconds + 60)[0])
    time.sleep(1.1)  # the server looks at the files at most once a second
    served = harness.fetch(port, "/api/v2/builds/latest?project=p19").json()["buildNumber"]
    print(
        f"while p19 was rewritten {edits} times: {result.requests} requests for p01 from 16 "
        f"clients, p99 latency {result.p99_ms:.0f} ms, errors: {result.errors or 'none'}; "
        f"p19 then served build {served}"
    )
    rows.append(
        (
            "others served during reloads",
            "0 errors",
            f"{result.errors or '0 errors'}, p99 {result.p99_ms:.0f} ms",
            not result.errors and served == 9000 + edits,
        )
    )


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rounds", type=int, default=3, help="turns per server and cell (default: %(default)s)"
    )
    parser.add_argument(
        "--seconds", type=int, default=3, help="length of one wrk run (default: %(default)s)"
    )
    parser.add_argument(
        "--clients",
        type=lambda s: tuple(int(n) for n in s.split(",")),
        default=CLIENTS,
        help="concurrent keep-alive clients, comma-separated (default: 1,16,64,256)",
    )
    parser.add_argument(
        "--server-args",
        type=shlex.split,
        default=[],
        metavar="ARGS",
        help='extra flags for server.py, e.g. "--threads 8" (default: none)',
    )
    parser.add_argument(
        "--quick", action="store_true", help="3 rounds of 1 s per cell, without the reload part"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.seconds = 3, 1
    return args


def main(argv=None):
    args = parse_args(argv)
    harness.stop_servers_on_sigterm()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is needed: apt-get install wrk")
    print(
        f"server.py {' '.join(['--data DIR', '--port PORT'] + args.server_args)} against "
        f"bench/bare.py; {args.rounds} rounds of {args.seconds} s per cell, clients "
        f"{', '.join(map(str, args.clients))}; {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.2f}",
        flush=True,
    )
    rows = []
    with tempfile.TemporaryDirectory() as work:
        data_dir = synthetic.generate(os.path.join(work, "twenty"), synthetic.TWENTY_SIZES)
        ours, bodies = measure_servers(work, data_dir, args, rows)
        with ours:
            measure_routed(work, ours, args)
            measure_app_cost(work, data_dir, bodies, rows)
            if not args.quick:
                measure_reload(data_dir, ours.port, max(args.seconds, 3), rows)
    harness.report(rows)
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f}")
    return 0 if all(ok for *_, ok in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
