"""What counting downloads costs: server CPU per request with --count-downloads on and off.

Two Buildshelf servers over the same data (a project of 2,000 builds whose latest build's
16 KiB file is kept), one counting and one not, both with --trusted-proxy 127.0.0.1, take
turns under `wrk -t1 -cN` (keep-alive) at 1 and 16 clients, on:

- `/downloads/latest?project=p00` (a 302, counted) and the kept file's URL (a 200, counted);
- each twice: from one client (every request after the first is deduplicated: the common
  case, a repeat) and from a new client network each request (X-Forwarded-For 11.x.y.1 and on,
  which the trusted-proxy setting makes the client: every request is counted and stored;
  the worst case, which the flood of bench/count_flood.py is).

The server's CPU per request is read from /proc/<pid>/stat around each wrk run; the ratio
on/off is of the medians of the same run's rounds (goal: at most 1.10). On a busy machine
these move by more than counting costs, so the app's own CPU per request is also measured
in process (the WSGI app called directly, counting on and off taking turns, 20 rounds): the
difference is what counting adds, which is then set against the server's whole cost per
request with counting off. Needs wrk.

    python bench/count_cost.py [--rounds 3] [--seconds 3]
"""

import argparse
import hashlib
import io
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import harness
import synthetic
from buildshelf import counts, server, store

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLIENTS = (1, 16)
FILE_BYTES = 16 * 1024
# For wrk -s, with the argument OFFSET: a new client network (an IPv4 /24) on each request,
# through the trusted proxy, numbered from OFFSET (each run goes on where the last stopped).
NEW_NETWORKS = """
counter = 0
init = function(args)
  counter = tonumber(args[1])
end
request = function()
  counter = counter + 1
  wrk.headers["X-Forwarded-For"] = string.format("%d.%d.%d.1",
    11 + math.floor(counter / 65536) % 200, math.floor(counter / 256) % 256, counter % 256)
  return wrk.format(nil, nil)
end
"""
networks_used = 0  # by the runs so far: the next run's OFFSET


def kept_data(work):
    """Synthetic data (p00, 2,000 builds) and build 100000 of p00 with a kept 16 KiB file:
    (data directory, the file's path)."""
    data = synthetic.generate(os.path.join(work, "data"), [2000])
    jar = os.path.join(work, "p00-100000.jar")
    content = os.urandom(FILE_BYTES)
    with open(jar, "wb") as f:
        f.write(content)
    done = subprocess.run(
        [sys.executable, "-m", "buildshelf", "publish", "p00", "--data", data, "--build",
         "100000", "--channel", "1.22", "--file", jar],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    if done.returncode:
        raise SystemExit(f"publish failed: {done.stderr}")
    sha = hashlib.sha256(content).hexdigest()
    return data, f"/downloads/p00/100000/{sha}/p00-100000.jar"


def wrk(port, target, seconds, clients, script=None):
    """harness.wrk, but NEW_NETWORKS goes on numbering networks where the last run stopped."""
    global networks_used
    if script is None:
        return harness.wrk(port, target, seconds, clients)
    out = subprocess.run(
        ["wrk", "-t1", f"-c{clients}", f"-d{seconds}s", "--timeout", harness.WRK_TIMEOUT,
         "-s", script, f"http://127.0.0.1:{port}{target}", "--", str(networks_used)],
        capture_output=True, text=True, timeout=seconds + 60,
    )  # fmt: skip
    load = harness.Load(out.stdout + out.stderr)
    networks_used += load.requests + clients  # those in flight at the end too
    return load


def per_request(server, target, seconds, clients, script):
    """(server CPU microseconds per request, requests per second, errors) of one wrk run."""
    before = harness.cpu_seconds(server.pid)
    load = wrk(server.port, target, seconds, clients, script)
    cpu = harness.cpu_seconds(server.pid) - before
    if not load.requests:
        raise SystemExit(f"no request answered: {load.errors}")
    return cpu / load.requests * 1e6, load.requests / load.seconds, load.errors


IN_PROCESS_ROUNDS = 20
IN_PROCESS_CALLS = 2000


def call(app, target, address):
    path, _, query = target.partition("?")
    environ = {
        "REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": query,
        "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "80", "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO(), "REMOTE_ADDR": address,
    }  # fmt: skip
    body = app(environ, lambda status, headers, exc_info=None: None)
    for _ in body:
        pass
    if hasattr(body, "close"):
        body.close()


def count_alone(work, calls=200_000):
    """Counter.count's own CPU microseconds per call: (a repeat, a new network)."""
    counter = counts.Counter(os.path.join(work, "alone"))
    sha = "a" * 64
    new = [f"{11 + n // 65536}.{n // 256 % 256}.{n % 256}.1" for n in range(calls)]
    started = time.process_time()
    for address in new:
        counter.count("p00", 100000, sha, address)
    first = time.process_time() - started
    started = time.process_time()
    for address in new:
        counter.count("p00", 100000, sha, address)
    again = time.process_time() - started
    return again / calls * 1e6, first / calls * 1e6


def in_process(work, data, targets):
    """{(name, who): (on, off)}: the app's median CPU microseconds per request."""
    served = store.Store(data, check_interval=3600)
    apps = {
        "on": server.make_app(served, counter=counts.Counter(os.path.join(work, "in-process"))),
        "off": server.make_app(served),
    }
    results, used = {}, 0
    for name, target in targets:
        for who in ("one client", "a new network each"):
            samples = {"on": [], "off": []}
            for r in range(IN_PROCESS_ROUNDS):
                for label in ("on", "off") if r % 2 == 0 else ("off", "on"):
                    if who == "one client":
                        addresses = ["127.0.0.1"] * IN_PROCESS_CALLS
                    else:
                        addresses = [
                            f"{11 + n // 65536 % 200}.{n // 256 % 256}.{n % 256}.1"
                            for n in range(used, used + IN_PROCESS_CALLS)
                        ]
                        used += IN_PROCESS_CALLS
                    started = time.process_time()
                    for address in addresses:
                        call(apps[label], target, address)
                    spent = time.process_time() - started
                    samples[label].append(spent / IN_PROCESS_CALLS * 1e6)
            results[name, who] = (
                statistics.median(samples["on"]),
                statistics.median(samples["off"]),
            )
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=3)
    args = parser.parse_args(argv)
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is needed: apt-get install wrk")
    harness.stop_servers_on_sigterm()
    print(
        f"{args.rounds} rounds of {args.seconds} s per cell; {os.cpu_count()} CPUs, load "
        f"average {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    rows, server_off = [], {}
    with tempfile.TemporaryDirectory() as work:
        data, download = kept_data(work)
        targets = (("/downloads/latest", "/downloads/latest?project=p00"),
                   ("a kept download (16 KiB)", download))  # fmt: skip
        script = os.path.join(work, "new_networks.lua")
        with open(script, "w") as f:
            f.write(NEW_NETWORKS)
        common = ["--quiet", "--trusted-proxy", "127.0.0.1"]
        servers = {
            "on": harness.Server.buildshelf(
                data, [*common, "--state", os.path.join(work, "on")], ready="/healthz"
            ),
            "off": harness.Server.buildshelf(
                data,
                [*common, "--count-downloads", "off", "--state", os.path.join(work, "off")],
                ready="/healthz",
            ),  # fmt: skip
        }
        try:
            print(
                "\nServer CPU per request in us (median and min-max of the rounds), "
                "requests per second (median):\n"
            )
            print(f"{'target':38} {'clients':>7}  {'on':>18}  {'off':>18}  ratio on/off")
            for name, target in targets:
                for who, lua in (("one client", None), ("a new network each", script)):
                    for running in servers.values():  # warm up
                        wrk(running.port, target, 1, 16, lua)
                    for n in CLIENTS:
                        samples = {label: [] for label in servers}
                        for r in range(args.rounds):
                            order = ["on", "off"] if r % 2 == 0 else ["off", "on"]
                            for label in order:
                                samples[label].append(
                                    per_request(servers[label], target, args.seconds, n, lua)
                                )
                        cpu = {k: [s[0] for s in v] for k, v in samples.items()}
                        rps = {k: statistics.median(s[1] for s in v) for k, v in samples.items()}
                        errors = {s[2] for v in samples.values() for s in v} - {""}
                        ratio = statistics.median(cpu["on"]) / statistics.median(cpu["off"])
                        label = f"{name}, {who}"
                        print(
                            f"{label:38} {n:>7}  "
                            f"{harness.spread(cpu['on']):>12} {rps['on']:>5.0f}  "
                            f"{harness.spread(cpu['off']):>12} {rps['off']:>5.0f}  "
                            f"{ratio:.3f}{'  errors: ' + ', '.join(errors) if errors else ''}",
                            flush=True,
                        )
                        rows.append((f"{label}, {n} clients: CPU on/off", "<= 1.10",
                                     f"{ratio:.3f}", ratio <= 1.10))  # fmt: skip
                        server_off[name, who, n] = statistics.median(cpu["off"])
        finally:
            for running in servers.values():
                running.stop()
        repeat, new = count_alone(work)
        print(
            f"\nCounter.count alone: {repeat:.1f} us for a repeat (deduplicated), {new:.1f} us "
            "for a new network (counted, remembered)"
        )
        print(
            f"\nThe app alone, in process: CPU per request in us, the median of "
            f"{IN_PROCESS_ROUNDS} rounds of {IN_PROCESS_CALLS} calls; the cost counting adds "
            "against the whole server's cost with counting off (above):\n"
        )
        print(f"{'target':38} {'on':>7} {'off':>7} {'added':>7}   {'ratio at 1 / 16 clients'}")
        for (name, who), (on, off) in in_process(work, data, targets).items():
            added = on - off
            ratios = [
                (server_off[name, who, n] + added) / server_off[name, who, n] for n in CLIENTS
            ]
            print(f"{name + ', ' + who:38} {on:7.1f} {off:7.1f} {added:7.1f}   "
                  f"{' / '.join(f'{r:.3f}' for r in ratios)}")  # fmt: skip
            for n, ratio in zip(CLIENTS, ratios):
                rows.append((f"{name}, {who}, {n} clients: (off + added)/off", "<= 1.10",
                             f"{ratio:.3f}", ratio <= 1.10))  # fmt: skip
    harness.report(rows)


if __name__ == "__main__":
    main()
