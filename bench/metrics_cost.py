"""What /metrics costs the requests it counts: Buildshelf with its metrics (the default) and
with `--metrics off`, in the same run, taking turns, with the access log on and with --quiet.

    python bench/metrics_cost.py                 # 5 rounds of 2 s per cell: about 6 min
    python bench/metrics_cost.py --rounds 3 --seconds 1

Needs wrk. Over bench/run.py's synthetic data (twenty projects), both servers are loaded with
`wrk -t1 -cN` on the two requests bench/run.py answers from memory (/builds/latest and
/projects) and on /builds/latest routed (a query parameter of its own each time), at 1 and 16
clients; the server's CPU per request is read from /proc around each run (bench/run.py's
load_run). Printed: medians (min-max) of the rounds, and the ratio of the medians, metrics on
over off (goal: at most 1.05; the spread of the rounds on a busy machine is about that
wide). With --quiet and metrics on, the server makes an access record of each request that
it would otherwise not make at all: the costlier case. Then, in process: what the log thread
spends a record on the metrics (`observe`) beside what it spends formatting its line.
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import harness
import run
import synthetic
from buildshelf import metrics, server, store
from buildshelf.serving import accesslog
from harness import spread

TARGETS = {
    "/builds/latest, from memory": (run.TARGETS["/builds/latest"], None),
    "/projects, from memory": (run.TARGETS["/projects"], None),
    "/builds/latest, routed": (run.TARGETS["/builds/latest"], "each_routed.lua"),
}
CLIENTS = (1, 16)
GOAL = 1.05
MODES = {"access log on": (), "--quiet": ("--quiet",)}


def sweep(servers, rounds, seconds, clients, rows, mode, work):
    for name, (target, script) in TARGETS.items():
        if script:
            script = os.path.join(work, script)
            with open(script, "w") as f:
                f.write(run.EACH_ROUTED)
        for server_ in servers.values():
            harness.wrk(server_.port, target, 1, 16, script)  # warm up
        for n in clients:
            samples = {label: [] for label in servers}
            for r in range(rounds):
                order = list(servers) if r % 2 == 0 else list(reversed(servers))
                for label in order:
                    samples[label].append(run.load_run(servers[label], target, seconds, n, script))
            on, off = samples["metrics on"], samples["metrics off"]
            on_cpu, off_cpu = [s[0] for s in on], [s[0] for s in off]
            ratio = statistics.median(on_cpu) / statistics.median(off_cpu)
            errors = [s[2] for runs in samples.values() for s in runs if s[2]]
            print(
                f"{mode:<14} {name:<28} {n:>3}  {spread(on_cpu):<16} {spread(off_cpu):<16} "
                f"{spread([s[1] for s in on]):<20} {spread([s[1] for s in off]):<20} "
                f"{spread([s[4] for s in on], run.P99):<14} "
                f"{spread([s[4] for s in off], run.P99):<14} {ratio:.3f}"
                + (f"  ! {errors}" if errors else ""),
                flush=True,
            )
            rows.append(
                (
                    f"CPU a request, metrics on / off, {mode}, {name}, {n} clients",
                    f"<= {GOAL}",
                    f"{ratio:.3f}" + (" (errors)" if errors else ""),
                    ratio <= GOAL and not errors,
                )
            )


def counted_by_metrics(port):
    """The requests /metrics says were answered, all routes together."""
    reply = harness.fetch(port, metrics.PATH)
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in reply.body.decode().splitlines()
        if line.startswith("buildshelf_http_requests_total{")
    )


def per_record(data_dir, n=100_000):
    """(µs a record for observe, µs a record for access_line) over the remembered targets."""
    app = server.make_app(store.Store(data_dir, check_interval=3600))
    paths = [target.partition("?") for target, _ in TARGETS.values()]
    records = [
        (time.time(), "127.0.0.1", "GET", path, query, "200", 512, 0.0004)
        for path, _, query in paths
    ] * (n // len(paths))
    best = {}
    for name, work in (
        ("observe", lambda: app.observe_requests(records)),
        ("access_line", lambda: b"".join(map(accesslog.access_line, records))),
    ):
        times = []
        for _ in range(5):
            started = time.process_time()
            work()
            times.append(time.process_time() - started)
        best[name] = min(times) / len(records) * 1e6
    return best["observe"], best["access_line"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=2)
    parser.add_argument("--clients", type=int, nargs="+", default=list(CLIENTS))
    args = parser.parse_args(argv)
    harness.stop_servers_on_sigterm()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is needed: apt-get install wrk")
    print(
        f"server.py with its metrics and with --metrics off, taking turns; {args.rounds} rounds "
        f"of {args.seconds} s per cell; {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.2f}\n",
        flush=True,
    )
    print(
        f"{'mode':<14} {'request':<28} {'n':>3}  {'on µs':<16} {'off µs':<16} "
        f"{'on req/s':<20} {'off req/s':<20} {'on p99 ms':<14} {'off p99 ms':<14} on/off"
    )
    rows = []
    with tempfile.TemporaryDirectory() as work:
        data_dir = synthetic.generate(os.path.join(work, "twenty"), synthetic.TWENTY_SIZES)
        for mode, flags in MODES.items():
            log = os.path.join(work, f"{mode[:2]}.log")
            with (
                harness.Server.buildshelf(data_dir, flags, log) as on,
                harness.Server.buildshelf(data_dir, (*flags, "--metrics", "off"), log) as off,
            ):
                sweep({"metrics on": on, "metrics off": off}, args.rounds, args.seconds,
                      args.clients, rows, mode, work)  # fmt: skip
                print(f"{'':<14} /metrics counted {counted_by_metrics(on.port):,.0f} requests")
        observe, line = per_record(data_dir)
    print(
        f"\nin process, a record on the log thread: observe {observe:.2f} µs, "
        f"access_line {line:.2f} µs"
    )
    harness.report(rows)
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f}")
    return 0 if all(ok for *_, ok in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
