"""A flood of forged client addresses against download counting: memory, others' latency,
and the real clients' counts.

A Buildshelf server (--trusted-proxy 127.0.0.1, as behind deploy/nginx.conf, whose
X-Forwarded-For the attacker controls here) takes 200,000 requests of /downloads/latest
(channel 1.21: a build other than the kept one),
each naming a new client network (a /24 each: every one counted and remembered),
from wrk. Meanwhile:

- 50 real clients (100.64.N.1) have downloaded the kept file once before the flood and
  download it again after it: each must count once, so 50, whatever the flood did, and
  the probe's network (100.64.200.1) once more;
- a probe asks /api/v2/builds/latest (answered from memory) and a kept download every 20 ms:
  its latency during the flood, with counting on, against the same flood with counting off
  (a server of its own, in the same run), and both against no flood.

Printed: the server's RSS before and after (growth: goal at most 50 MB), the probe's p50 and
p99, and the counts as the database holds them after SIGTERM. Needs wrk.

    python bench/count_flood.py [--requests 200000]
"""

import argparse
import contextlib
import os
import shutil
import sqlite3
import statistics
import subprocess
import tempfile
import threading
import time

import harness
from count_cost import kept_data

REAL_CLIENTS = 50
PROBE_SECONDS = 0.02
FLOODED = "/downloads/latest?project=p00&channel=1.21"
PROBE_CLIENT = {"X-Forwarded-For": "100.64.200.1"}
CHUNK_SECONDS = 10  # wrk runs for its duration: the flood is sent in runs of this long
IN_FLIGHT = 16  # wrk's connections: requests sent but not yet counted when a run stops
# For wrk -s, with the arguments OFFSET LIMIT: a new client network (an IPv4 /24) on each
# request, numbered from OFFSET; the run stops sending after LIMIT answers.
FLOOD = """
offset, limit, counter, answered = 0, 0, 0, 0
init = function(args)
  offset, limit = tonumber(args[1]), tonumber(args[2])
end
request = function()
  counter = counter + 1
  local n = offset + counter
  wrk.headers["X-Forwarded-For"] = string.format("%d.%d.%d.1",
    11 + math.floor(n / 65536), math.floor(n / 256) % 256, n % 256)
  return wrk.format(nil, nil)
end
response = function(status, headers, body)
  answered = answered + 1
  if answered >= limit then wrk.thread:stop() end
end
"""


def flood(port, script, requests):
    """`requests` requests (a few more, in flight when a run stops), each from a new /24
    (11.0.0.1, 11.0.1.1, ..., 11.255.255.1, 12.0.0.1...): (requests answered, wrk runs,
    errors)."""
    sent, offset, runs, errors = 0, 0, 0, set()
    while sent < requests:
        out = subprocess.run(
            ["wrk", "-t1", f"-c{IN_FLIGHT}", f"-d{CHUNK_SECONDS}s", "--timeout", "10s",
             "-s", script, f"http://127.0.0.1:{port}{FLOODED}", "--",
             str(offset), str(requests - sent)],
            capture_output=True, text=True, timeout=CHUNK_SECONDS + 60,
        )  # fmt: skip
        load = harness.Load(out.stdout + out.stderr)
        sent += load.requests
        offset += load.requests + IN_FLIGHT  # never a network of the last run again
        runs += 1
        if load.errors:
            errors.add(load.errors)
    return sent, runs, ", ".join(sorted(errors))


class Probe(threading.Thread):
    """A client asking `targets` in turn every PROBE_SECONDS until stopped: latencies in ms."""

    def __init__(self, port, targets):
        super().__init__(daemon=True)
        self.port, self.targets = port, targets
        self.latencies, self.failures = [], 0
        self.stopping = threading.Event()

    def run(self):
        n = 0
        while not self.stopping.wait(PROBE_SECONDS):
            target = self.targets[n % len(self.targets)]
            n += 1
            started = time.monotonic()
            try:
                reply = harness.fetch(
                    self.port, target, timeout=30, keep_body=False, headers=PROBE_CLIENT
                )
                ok = reply.status in (200, 302)
            except OSError:
                ok = False
            if ok:
                self.latencies.append((time.monotonic() - started) * 1000)
            else:
                self.failures += 1

    def stop(self):
        self.stopping.set()
        self.join()
        return self

    def figures(self):
        if not self.latencies:
            return "no answer"
        ordered = sorted(self.latencies)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        failed = f", {self.failures} failed" if self.failures else ""
        return (
            f"p50 {statistics.median(ordered):6.1f} ms, p99 {p99:6.1f} ms ({len(ordered)}{failed})"
        )


def real_downloads(port, download):
    for n in range(REAL_CLIENTS):
        reply = harness.fetch(port, download, keep_body=False,
                              headers={"X-Forwarded-For": f"100.64.{n}.1"})  # fmt: skip
        if reply.status != 200:
            raise SystemExit(f"a real client's download answered {reply.status}")


def stored(state_dir):
    path = os.path.join(state_dir, "downloads.sqlite3")
    with contextlib.closing(sqlite3.connect(path)) as db:
        return dict(db.execute("SELECT build, SUM(downloads) FROM downloads GROUP BY build"))


def run(work, data, download, counting, requests, script):
    state_dir = os.path.join(work, f"state-{counting}")
    server = harness.Server.buildshelf(
        data,
        ["--quiet", "--trusted-proxy", "127.0.0.1", "--count-downloads", counting,
         "--state", state_dir],
    )  # fmt: skip
    probe_targets = ["/api/v2/builds/latest?project=p00", download]
    try:
        harness.wrk(server.port, "/api/v2/builds/latest?project=p00", 1, 4)  # warm up
        real_downloads(server.port, download)
        quiet = Probe(server.port, probe_targets)
        quiet.start()
        time.sleep(5)
        quiet.stop()
        rss_before = harness.memory(server.pid)
        flooded = Probe(server.port, probe_targets)
        flooded.start()
        started = time.monotonic()
        sent, runs, errors = flood(server.port, script, requests)
        seconds = time.monotonic() - started
        flooded.stop()
        rss_after = harness.memory(server.pid)
        real_downloads(server.port, download)
        peak = harness.memory(server.pid, "VmHWM")
    finally:
        status, _ = server.stop()
    counts = stored(state_dir) if counting == "on" else {}
    return {
        "requests": sent,
        "runs": runs,
        "errors": errors,
        "seconds": seconds,
        "rss_before": rss_before,
        "rss_after": rss_after,
        "peak": peak,
        "quiet": quiet,
        "flooded": flooded,
        "counts": counts,
        "status": status,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200_000)
    args = parser.parse_args(argv)
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is needed: apt-get install wrk")
    harness.stop_servers_on_sigterm()
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        data, download = kept_data(work)
        script = os.path.join(work, "flood.lua")
        with open(script, "w") as f:
            f.write(FLOOD)
        results = {}
        for counting in ("on", "off"):
            results[counting] = r = run(work, data, download, counting, args.requests, script)
            mib = 1 << 20
            print(
                f"\ncounting {counting}: {r['requests']} flood requests in {r['seconds']:.0f} s"
                f"{' (' + r['errors'] + ')' if r['errors'] else ''}; RSS "
                f"{r['rss_before'] / mib:.1f} -> {r['rss_after'] / mib:.1f} MiB "
                f"(peak {r['peak'] / mib:.1f}); exit status {r['status']}\n"
                f"  probe, no flood:     {r['quiet'].figures()}\n"
                f"  probe, during flood: {r['flooded'].figures()}",
                flush=True,
            )
        on = results["on"]
        growth = (on["rss_after"] - on["rss_before"]) / (1 << 20)
        kept = on["counts"].pop(100000, 0)
        flood = sum(on["counts"].values())
        print(f"\ncounts stored (counting on): the kept build {kept}, the flooded build {flood}")
        p99 = {k: sorted(v["flooded"].latencies)[int(len(v["flooded"].latencies) * 0.99)]
               for k, v in results.items()}  # fmt: skip
        rows = [
            ("RSS growth over the flood, counting on", "<= 50 MB", f"{growth:.1f} MiB", growth <= 50),
            ("real clients' downloads counted", f"= {REAL_CLIENTS + 1}", str(kept),
             kept == REAL_CLIENTS + 1),
            # Each wrk run stops counting at its limit, with up to 16 more in flight.
            ("flood's networks counted", f"~ {on['requests']}", str(flood),
             on["requests"] <= flood <= on["requests"] + IN_FLIGHT * on["runs"]),
            ("others' p99 during the flood, on/off", "<= 1.25", f"{p99['on'] / p99['off']:.2f} "
             f"({p99['on']:.1f}/{p99['off']:.1f} ms)", p99["on"] <= 1.25 * p99["off"]),
        ]  # fmt: skip
    harness.report(rows)


if __name__ == "__main__":
    main()
