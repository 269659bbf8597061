"""Start-up against the cost of reading the same files: how far the store is from json.load.

    python bench/startup.py [--projects 50] [--builds 2000] [--rounds 3]

Generates 50 projects of 2,000 builds (bench/synthetic.py) in a temporary directory and prints,
each the median of --rounds runs, every one in a fresh process:
- json.load of every file, in process, and a whole process that only does that (interpreter
  start-up included: the yardstick of issue 8);
- store.Store(dir), in process;
- the real server's first answer: `python server.py --data DIR --port P` started, polled until
  /api/v2/projects answers;
- the ratio of the two process times, the target being at most 2 (and the ratio of their CPU
  times, which a busy machine disturbs less);
- the server's resident memory after that first answer (VmRSS, and VmHWM, its peak);
- the load of one file of 30,000 builds, each in a channel of its own (indexing once took
  40 s there).
Everything runs on 127.0.0.1 and stops by itself.
"""

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

import harness
import synthetic

JSON_ONLY = """
import json, os, sys
for name in sorted(os.listdir(sys.argv[1])):
    with open(os.path.join(sys.argv[1], name), "rb") as f:
        json.load(f)
"""
TIMED_JSON = """
import json, os, sys, time
started = time.perf_counter()
for name in sorted(os.listdir(sys.argv[1])):
    with open(os.path.join(sys.argv[1], name), "rb") as f:
        json.load(f)
print(time.perf_counter() - started)
"""
TIMED_STORE = """
import sys, time
from buildshelf import store
started = time.perf_counter()
store.Store(sys.argv[1])
print(time.perf_counter() - started)
"""


def child_seconds(code, *args):
    """What a fresh Python process running `code` prints (a duration), as a float."""
    out = subprocess.run(
        [sys.executable, "-c", code, *args], check=True, capture_output=True, text=True, timeout=300
    ).stdout
    return float(out.split()[-1])


def process_seconds(code, *args):
    """(wall, CPU) seconds of a fresh Python process running `code`."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code, *args])
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"failed: {code}")
    return time.perf_counter() - started, usage.ru_utime + usage.ru_stime


def rss_mb(pid, field="VmRSS"):
    """A memory figure of process `pid` from /proc, in MB."""
    return (harness.memory(pid, field) or 0) / 2**20


def first_answer(data_dir):
    """(seconds to the first answer, CPU seconds by then, VmRSS MB, VmHWM MB) of one start of
    the real server."""
    started = time.perf_counter()
    with harness.Server.buildshelf(data_dir, ["--quiet"], ready="/api/v2/projects") as server:
        seconds = time.perf_counter() - started
        pid = server.pid
        return (seconds, harness.cpu_seconds(pid), rss_mb(pid), rss_mb(pid, "VmHWM"))


def median_of(rounds, measure):
    values = [measure() for _ in range(rounds)]
    return statistics.median(values), values


def shown(values, unit="s", digits=2):
    return ", ".join(f"{v:.{digits}f}" for v in values) + f" {unit}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--projects", type=int, default=50)
    parser.add_argument("--builds", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    rounds = args.rounds
    with tempfile.TemporaryDirectory() as work:
        data_dir = synthetic.generate(os.path.join(work, "data"), [args.builds] * args.projects)
        size = sum(os.path.getsize(os.path.join(data_dir, n)) for n in os.listdir(data_dir))
        print(
            f"{args.projects} projects x {args.builds} builds, {size / 1e6:.0f} MB of JSON; "
            f"medians of {rounds}, each in a fresh process"
        )

        json_load, values = median_of(rounds, lambda: child_seconds(TIMED_JSON, data_dir))
        print(f"  json.load of every file, in process   {json_load:6.2f} s   ({shown(values)})")
        store_load, values = median_of(rounds, lambda: child_seconds(TIMED_STORE, data_dir))
        print(
            f"  store.Store(dir), in process          {store_load:6.2f} s   ({shown(values)})"
            f"   {store_load / json_load:.2f}x json.load"
        )
        json_runs = [process_seconds(JSON_ONLY, data_dir) for _ in range(rounds)]
        json_process = statistics.median(wall for wall, _ in json_runs)
        json_cpu = statistics.median(cpu for _, cpu in json_runs)
        print(
            f"  a process that only json.loads them   {json_process:6.2f} s   "
            f"({shown([wall for wall, _ in json_runs])}); CPU {json_cpu:.2f} s"
        )
        starts = [first_answer(data_dir) for _ in range(rounds)]
        first = statistics.median(s[0] for s in starts)
        first_cpu = statistics.median(s[1] for s in starts)
        print(
            f"  the server's first answer             {first:6.2f} s   "
            f"({shown([s[0] for s in starts])}); CPU {first_cpu:.2f} s"
        )
        ratio = first / json_process
        print(
            f"  ratio (target <= 2)                   {ratio:6.2f}     "
            f"{'ok' if ratio <= 2 else 'MISSED'}   (CPU time ratio {first_cpu / json_cpu:.2f})"
        )
        rss = statistics.median(s[2] for s in starts)
        peak = statistics.median(s[3] for s in starts)
        print(
            f"  resident after the first answer       {rss:6.0f} MB  (peak {peak:.0f} MB; "
            f"target <= 150: {'ok' if max(rss, peak) <= 150 else 'MISSED'})"
        )

        channels_dir = os.path.join(work, "channels")
        os.mkdir(channels_dir)
        synthetic.write_project(
            channels_dir,
            "many",
            [synthetic.build(random.Random(n), n, f"c{n}", n % 10 == 9) for n in range(30_000)],
        )
        load, values = median_of(rounds, lambda: child_seconds(TIMED_STORE, channels_dir))
        print(f"  30,000 builds in 30,000 channels      {load:6.2f} s   ({shown(values)})")


if __name__ == "__main__":
    main()
