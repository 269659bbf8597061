"""Measure Buildshelf against the targets of docs/performance.md and print the figures.

    python bench/run.py [--rounds 5] [--seconds 3]

Needs wrk (Debian: apt-get install wrk). Everything runs on 127.0.0.1 and stops by itself.
CPU per request is read from /proc for the server process, so a busy machine slows the run
down but barely moves the figures; the two servers take turns and medians are reported.
"""

import argparse
import io
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import store  # noqa: E402
import synthetic  # noqa: E402

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
EFFICIENCY_TARGETS = {  # name -> request, on 20 projects of 500 to 2,000 builds
    "/builds/latest": "/api/v2/builds/latest?project=p10",
    "/projects": "/api/v2/projects",
    "list of 300 builds": "/api/v2/builds?project=p10&channel=1.21",
    "list of 2,000 builds": "/api/v2/builds?project=p19&experimental=true",
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port, target):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{target}", timeout=30) as resp:
        return resp.read()


def start(argv, port):
    """Start a server process; returns (process, seconds until it answered a request)."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = started + 60
    while True:
        try:
            get(port, "/api/v2/projects")
            return proc, time.perf_counter() - started
        except OSError:
            if proc.poll() is not None or time.perf_counter() > deadline:
                proc.kill()
                raise SystemExit(f"server did not start: {argv}")
            time.sleep(0.005)


def start_buildshelf(data_dir):
    port = free_port()
    proc, seconds = start([sys.executable, os.path.join(ROOT, "server.py"), "--data", data_dir,
                           "--port", str(port), "--quiet", "--threads", "4"], port)
    return proc, port, seconds


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime, all threads


def rss_mb(pid, field="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(rf"{field}:\s+(\d+) kB", f.read()).group(1)) / 1024


def wrk(port, target, seconds, connections=4):
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency",
                          f"http://127.0.0.1:{port}{target}"],
                         capture_output=True, text=True, check=True).stdout
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    socket_errors = re.search(r"Socket errors: (.*)", out)
    return requests, int(errors.group(1)) if errors else 0, socket_errors, out


def cpu_per_request(proc, port, target, seconds):
    before = cpu_seconds(proc.pid)
    requests, errors, socket_errors, out = wrk(port, target, seconds)
    if errors or socket_errors:
        raise SystemExit(f"errors while loading {target}:\n{out}")
    return (cpu_seconds(proc.pid) - before) / requests * 1e6  # microseconds


def compare(servers, targets, rounds, seconds):
    """{name: {server: median microseconds of CPU per request}}, servers taking turns."""
    results = {}
    for name, target in targets.items():
        samples = {label: [] for label in servers}
        for label, (proc, port) in servers.items():
            wrk(port, target, 1)  # warm up: the first requests encode and compress
        for r in range(rounds):
            order = list(servers) if r % 2 == 0 else list(reversed(servers))
            for label in order:
                proc, port = servers[label]
                samples[label].append(cpu_per_request(proc, port, target, seconds))
        results[name] = {label: statistics.median(s) for label, s in samples.items()}
    return results


def report(rows):
    width = max(len(r[0]) for r in rows)
    print(f"\n{'target':<{width}}  {'goal':<14} {'measured':<22} ok")
    for name, goal, measured, ok in rows:
        print(f"{name:<{width}}  {goal:<14} {measured:<22} {'yes' if ok else 'NO'}")


def measure_efficiency(work, rounds, seconds, rows):
    data_dir = synthetic.generate(os.path.join(work, "twenty"),
                                  [500 + round(i * 1500 / 19) for i in range(20)])
    ours, port, _ = start_buildshelf(data_dir)
    try:
        bodies = {target: get(port, target).decode("latin-1")
                  for target in EFFICIENCY_TARGETS.values()}
        bodies_file = os.path.join(work, "bodies.json")
        with open(bodies_file, "w") as f:
            json.dump(bodies, f)
        bare_port = free_port()
        bare, _ = start([sys.executable, os.path.join(HERE, "bare.py"), str(bare_port),
                         bodies_file], bare_port)
        try:
            results = compare({"buildshelf": (ours, port), "bare": (bare, bare_port)},
                              EFFICIENCY_TARGETS, rounds, seconds)
        finally:
            stop(bare)
    except BaseException:
        stop(ours)
        raise
    measure_app_cost(data_dir, bodies)
    for name, cpu in results.items():
        size = len(bodies[EFFICIENCY_TARGETS[name]])
        efficiency = cpu["bare"] / cpu["buildshelf"]
        print(f"{name} ({size / 1000:.0f} KB): buildshelf {cpu['buildshelf']:.0f} us, "
              f"bare waitress {cpu['bare']:.0f} us of CPU per request")
        rows.append((f"efficiency, {name}", ">= 0.85", f"{efficiency:.2f}",
                     efficiency >= 0.85))
    return ours, port


def app_cpu_per_call(app, target, calls=2000):
    """Microseconds of CPU for one call of a WSGI app, without any server around it."""
    path, _, query = target.partition("?")
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": query,
               "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "80", "SERVER_PROTOCOL": "HTTP/1.1",
               "HTTP_HOST": "127.0.0.1", "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO(),
               "wsgi.errors": sys.stderr}

    def start_response(status, headers, exc_info=None):
        pass
    b"".join(app(dict(environ), start_response))  # the first call encodes
    started = time.process_time()
    for _ in range(calls):
        b"".join(app(dict(environ), start_response))
    return (time.process_time() - started) / calls * 1e6


def measure_app_cost(data_dir, bodies):
    """The part of a request that is Buildshelf's own, measured in process: precise where
    the loaded servers are noisy."""
    import bare
    import server
    ours = server.make_app(store.Store(data_dir, check_interval=1))
    yardstick = bare.make_app({t: b.encode("latin-1") for t, b in bodies.items()})
    for name, target in EFFICIENCY_TARGETS.items():
        print(f"{name}: the app alone takes {app_cpu_per_call(ours, target):.0f} us, the bare "
              f"app {app_cpu_per_call(yardstick, target):.0f} us")


def measure_independence(work, ours, port, rounds, seconds, rows):
    """/builds/latest of one project, alone vs beside 19 others of 500 to 2,000 builds."""
    alone_dir = os.path.join(work, "alone")
    os.makedirs(alone_dir)
    shutil.copy(os.path.join(work, "twenty", "p10.json"), alone_dir)
    alone, alone_port, _ = start_buildshelf(alone_dir)
    try:
        target = {"latest": EFFICIENCY_TARGETS["/builds/latest"]}
        cpu = compare({"20 projects": (ours, port), "1 project": (alone, alone_port)}, target,
                      rounds, seconds)["latest"]
    finally:
        stop(alone)
    ratio = cpu["20 projects"] / cpu["1 project"]
    print(f"/builds/latest: {cpu['20 projects']:.0f} us beside 19 other projects, "
          f"{cpu['1 project']:.0f} us alone")
    rows.append(("cost beside other projects", "ratio <= 1.10", f"{ratio:.2f}", ratio <= 1.10))


def measure_start_up_and_reload(work, seconds, rows):
    data_dir = synthetic.generate(os.path.join(work, "fifty"), [2000] * 50)
    size = sum(os.path.getsize(os.path.join(data_dir, f)) for f in os.listdir(data_dir))
    start_ups = []
    for _ in range(2):  # the median of three starts: one slow start is noise, not the code
        proc, port, start_up = start_buildshelf(data_dir)
        start_ups.append(start_up)
        stop(proc)
    proc, port, start_up = start_buildshelf(data_dir)
    start_ups.append(start_up)
    start_up = statistics.median(start_ups)
    try:
        rss = rss_mb(proc.pid)
        print(f"50 x 2,000 builds ({size / 1e6:.0f} MB of JSON): first answer after "
              f"{start_up:.2f} s (median of {', '.join(f'{s:.2f}' for s in start_ups)}"
              f"), {rss:.0f} MB resident (peak {rss_mb(proc.pid, 'VmHWM'):.0f})")
        rows.append(("start-up to first answer", "< 2 s", f"{start_up:.2f} s", start_up < 2))
        rows.append(("resident memory", "< 160 MB", f"{rss:.0f} MB", rss < 160))
        measure_reload(data_dir, proc, port, seconds, rows)
    finally:
        stop(proc)


def measure_reload(data_dir, proc, port, seconds, rows):
    # In process: what one reload of one 2,000-build file costs the thread that does it.
    loaded = store.Store(data_dir, check_interval=3600)
    path = os.path.join(data_dir, "p00.json")
    with open(path) as f:
        original = json.load(f)
    times = []
    for n in range(5):
        edited = dict(original, builds=original["builds"] + [
            synthetic.build(synthetic.random.Random(n), 5000 + n, "1.22", False)])
        with open(path + ".tmp", "w") as f:
            json.dump(edited, f, indent=2)
        os.replace(path + ".tmp", path)
        started = time.perf_counter()
        snapshot = loaded.refresh()
        times.append((time.perf_counter() - started) * 1000)
        assert snapshot.projects["p00"].builds[-1].number == 5000 + n
    reload_ms = statistics.median(times)
    print(f"reload after editing one 2,000-build file: median {reload_ms:.0f} ms "
          f"(of {', '.join(f'{t:.0f}' for t in times)})")
    rows.append(("reload of one 2,000-build file", "< 100 ms", f"{reload_ms:.0f} ms",
                 reload_ms < 100))

    # Live: another project keeps being served while p00 is rewritten again and again.
    load = subprocess.Popen(["wrk", "-t1", "-c4", f"-d{seconds}s", "--latency",
                             f"http://127.0.0.1:{port}/api/v2/builds/latest?project=p01"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + seconds - 0.5
    edits = 0
    while time.monotonic() < deadline:
        edits += 1
        edited = dict(original, builds=original["builds"] + [
            synthetic.build(synthetic.random.Random(edits), 9000 + edits, "1.22", False)])
        with open(path + ".tmp", "w") as f:
            json.dump(edited, f, indent=2)
        os.replace(path + ".tmp", path)
        time.sleep(0.3)
    out = load.communicate()[0]
    time.sleep(1.1)
    served = json.loads(get(port, "/api/v2/builds/latest?project=p00"))["buildNumber"]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    p99 = re.search(r"99%\s+(\S+)", out)
    if p99 is None:
        raise SystemExit(f"wrk did not finish as expected:\n{out}")
    p99 = p99.group(1)
    requests = re.search(r"(\d+) requests in", out)[1]
    print(f"while p00 was rewritten {edits} times: {requests} "
          f"requests for p01, p99 latency {p99}, {errors[1] if errors else 0} errors; "
          f"p00 then served build {served}")
    rows.append(("others served during reloads", "0 errors",
                 f"{errors[1] if errors else 0} errors, p99 {p99}",
                 not errors and served == 9000 + edits))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="turns per server and request")
    parser.add_argument("--seconds", type=int, default=3, help="length of one load run")
    args = parser.parse_args(argv)
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is needed: apt-get install wrk")
    rows = []
    with tempfile.TemporaryDirectory() as work:
        ours, port = measure_efficiency(work, args.rounds, args.seconds, rows)
        try:
            measure_independence(work, ours, port, args.rounds, args.seconds, rows)
        finally:
            stop(ours)
        measure_start_up_and_reload(work, max(args.seconds, 3), rows)
    report(rows)
    return 0 if all(ok for *_, ok in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
