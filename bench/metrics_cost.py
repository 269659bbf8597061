"""What /metrics costs the requests it counts: Buildshelf with its metrics (the default) and
with `--metrics off`, in the same run, taking turns, with the access log on and with --quiet.

    python bench/metrics_cost.py                 # 5 rounds of 2 s per cell: about 6 min
    python bench/metrics_cost.py --rounds 3 --seconds 1
    python bench/metrics_cost.py --mode quiet --rounds 9   # --quiet only
    python bench/metrics_cost.py --together      # both servers loaded at once, each round

Needs wrk. Over bench/run.py's synthetic data (twenty projects), both servers are loaded with
`wrk -t1 -cN` on the two requests bench/run.py answers from memory (/builds/latest and
/projects) and on /builds/latest routed (a query parameter of its own each time), at 1 and 16
clients; the server's CPU per request is read from /proc around each run (bench/run.py's
load_run). Printed: medians (min-max) of the rounds, and the ratio of the medians, metrics on
over off (goal: at most 1.05), then the ratios of the rounds. On a machine busy with other
work, --together loads both at once each round: a round's ratio then compares two servers
that shared the same moments. With --quiet and metrics on, the server makes an access
record of each request that it would otherwise not make at all: the costlier case. Then, in
process: what making and handing over a record costs the thread that answered, and what the
log thread spends on it for the metrics (`observe`) beside formatting its line.
"""

import argparse
import collections
import os
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

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


def together(servers, target, seconds, n, script):
    """{label: load_run()} of both servers loaded at once, so that whatever else the machine
    does meanwhile falls on both alike."""
    with ThreadPoolExecutor(len(servers)) as pool:
        runs = {
            label: pool.submit(run.load_run, server_, target, seconds, n, script)
            for label, server_ in servers.items()
        }
        return {label: done.result() for label, done in runs.items()}


def sweep(servers, rounds, seconds, clients, rows, mode, work, at_once=False):
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
                if at_once:
                    for label, result in together(servers, target, seconds, n, script).items():
                        samples[label].append(result)
                    continue
                order = list(servers) if r % 2 == 0 else list(reversed(servers))
                for label in order:
                    samples[label].append(run.load_run(servers[label], target, seconds, n, script))
            on, off = samples["metrics on"], samples["metrics off"]
            on_cpu, off_cpu = [s[0] for s in on], [s[0] for s in off]
            ratio = statistics.median(on_cpu) / statistics.median(off_cpu)
            paired = [a / b for a, b in zip(on_cpu, off_cpu)]
            errors = [s[2] for runs in samples.values() for s in runs if s[2]]
            print(
                f"{mode:<14} {name:<28} {n:>3}  {spread(on_cpu):<16} {spread(off_cpu):<16} "
                f"{spread([s[1] for s in on]):<20} {spread([s[1] for s in off]):<20} "
                f"{spread([s[4] for s in on], run.P99):<14} "
                f"{spread([s[4] for s in off], run.P99):<14} {ratio:.3f}  "
                f"{spread(paired, '{:.3f}')}" + (f"  ! {errors}" if errors else ""),
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
    """µs a record: {what: cost} for making one and handing it over (on the thread that
    answered), observe and access_line (on the log thread), over the remembered targets."""
    app = server.make_app(store.Store(data_dir, check_interval=3600))
    paths = [target.partition("?") for target, _ in TARGETS.values()]
    records = [
        (time.time(), "127.0.0.1", "GET", path, query, "200", 512, 0.0004)
        for path, _, query in paths
    ] * (n // len(paths))
    # What connection.GuardedChannel._log_sent does per task, with a task as waitress's.
    task = SimpleNamespace(
        request=SimpleNamespace(error=None, command="GET", path=paths[0][0], query=paths[0][2]),
        wrote_header=True,
        response_headers=[("Content-Type", "application/json"), ("ETag", '"x"')] * 4,
        channel=SimpleNamespace(addr=("127.0.0.1", 40000)),
        status="200 OK",
        body_sent=512,
    )
    pending = collections.deque()

    def hand_over():
        for _ in range(n):
            pending.append(accesslog.access_record(task, 0.0004))
        pending.clear()

    best = {}
    for name, work in (
        ("made and handed over", hand_over),
        ("observe", lambda: app.observe_requests(records)),
        ("access_line", lambda: b"".join(map(accesslog.access_line, records))),
    ):
        times = []
        for _ in range(5):
            started = time.process_time()
            work()
            times.append(time.process_time() - started)
        best[name] = min(times) / len(records) * 1e6
    return best


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=2)
    parser.add_argument("--clients", type=int, nargs="+", default=list(CLIENTS))
    parser.add_argument(
        "--mode",
        choices=["log", "quiet"],
        help="only this one (default: the access log, then --quiet)",
    )
    parser.add_argument(
        "--together",
        action="store_true",
        help="load both servers at once each round, rather than taking turns: on a machine "
        "busy with other work, both then share its noise",
    )
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
        f"{'on req/s':<20} {'off req/s':<20} {'on p99 ms':<14} {'off p99 ms':<14} on/off (per round)"
    )
    rows = []
    with tempfile.TemporaryDirectory() as work:
        data_dir = synthetic.generate(os.path.join(work, "twenty"), synthetic.TWENTY_SIZES)
        for mode, flags in MODES.items():
            if args.mode and (args.mode == "quiet") != ("--quiet" in flags):
                continue
            log = os.path.join(work, f"{mode[:2]}.log")
            with (
                harness.Server.buildshelf(data_dir, flags, log) as on,
                harness.Server.buildshelf(data_dir, (*flags, "--metrics", "off"), log) as off,
            ):
                sweep({"metrics on": on, "metrics off": off}, args.rounds, args.seconds,
                      args.clients, rows, mode, work, args.together)  # fmt: skip
                print(f"{'':<14} /metrics counted {counted_by_metrics(on.port):,.0f} requests")
        costs = per_record(data_dir)
    print(
        f"\nin process, a record: made and handed over on the thread that answered "
        f"{costs['made and handed over']:.2f} µs (with --quiet, only with metrics); on the log "
        f"thread, observe {costs['observe']:.2f} µs, access_line {costs['access_line']:.2f} µs"
    )
    harness.report(rows)
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f}")
    return 0 if all(ok for *_, ok in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
