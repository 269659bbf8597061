"""Start-up against the cost of reading the same files: how far the store is from json.load.

    python bench/startup.py [--projects 50] [--builds 2000] [--rounds 3]
    python bench/startup.py --only reading [--compare OTHER_CHECKOUT]

First, reading one file of 5,000 builds (datafile.parse_project, CPU time, the best of 20 reads
in a fresh process, the median of --rounds processes): the file as bench/synthetic.py makes it,
and the same file with a sha256 and a size on every build, read in turn; the ratio of the two
(target at most 1.2) and whether the fast path read each. `--compare` reads the same files with
another checkout's code too (e.g. `git worktree add /tmp/before main`), the two taking turns.

Then it generates 50 projects of 2,000 builds in a temporary directory and prints, each the
median of --rounds runs, every one in a fresh process:
- json.load of every file, in process, and a whole process that only does that (interpreter
  start-up included: the yardstick of issue 8);
- store.Store(dir), in process;
- the real server's first answer: `python server.py --data DIR --port P` started with its
  default flags, polled until /api/v2/projects answers;
- the ratio of the two process times, the target being at most 2 (and the ratio of their CPU
  times, which a busy machine disturbs less);
- the server's resident memory after its first answers (VmRSS, and VmHWM, its peak): the
  projects, then READS, what a server is asked first (the page, a project's builds, the latest
  build of a few projects), as a server holds it once it serves;
- the load of one file of 30,000 builds, each in a channel of its own (indexing once took
  40 s there).
Everything runs on 127.0.0.1 and stops by itself.
"""

import argparse
import json
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


TIMED_READS = """
import gc, sys, time
sys.path.insert(0, sys.argv[1])
from buildshelf.datafiles import datafile
gc.disable()  # as the store reads
files = [open(path, "rb").read() for path in sys.argv[2:]]
seconds = [[] for _ in files]
for _ in range(20):  # in turn, so that the machine's moods fall on each file alike
    for data, spent in zip(files, seconds):
        started = time.process_time()
        datafile.parse_project("p.json", "p", data)
        spent.append(time.process_time() - started)
fast = [datafile._fast_project("p", data.decode()) is not None for data in files]
print(*map(min, seconds), *fast)
"""
READ_BUILDS = 5000
READ_RATIO_GOAL = 1.2


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


# What a server is asked first, after /api/v2/projects: its resident memory is measured after
# these (after /api/v2/projects alone, it held 5 to 6 MB less: the page and its templates,
# the builds' JSON and the routes' first use).
READS = (
    "/",
    "/api/v2/builds?project=p07",
    "/api/v2/builds/latest?project=p00",
    "/api/v2/builds/latest?project=p13&channel=1.21",
    "/api/v2/builds/latest?project=p31",
    "/api/v2/builds/latest?project=p49&experimental=true",
)


def first_answers(data_dir):
    """(seconds to the first answer, CPU seconds by then, VmRSS MB, VmHWM MB after READS too)
    of one start of the real server, with its default flags."""
    started = time.perf_counter()
    with harness.Server.buildshelf(data_dir, ready="/api/v2/projects") as server:
        seconds = time.perf_counter() - started
        pid = server.pid
        cpu = harness.cpu_seconds(pid)
        for target in READS:
            reply = harness.fetch(server.port, target)
            if reply.status != 200:
                raise SystemExit(f"{target}: {reply.status}")
        return (seconds, cpu, rss_mb(pid), rss_mb(pid, "VmHWM"))


def distinct_messages(data_dir):
    """(commits, distinct messages) in the files of `data_dir`: real messages differ, and
    equal strings would be cheaper to hold than theirs."""
    messages, commits = set(), 0
    for name in os.listdir(data_dir):
        with open(os.path.join(data_dir, name), "rb") as f:
            for build in json.load(f)["builds"]:
                commits += len(build["commits"])
                messages.update(commit["message"] for commit in build["commits"])
    return commits, len(messages)


def median_of(rounds, measure):
    values = [measure() for _ in range(rounds)]
    return statistics.median(values), values


def shown(values, unit="s", digits=2):
    return ", ".join(f"{v:.{digits}f}" for v in values) + f" {unit}"


def reading(work, rounds, checkouts):
    """Print what reading one file of READ_BUILDS builds costs, without and with integrity
    data, with each checkout's code."""
    builds = synthetic.channel_builds(
        random.Random(1), 1, [("1.20", READ_BUILDS * 2 // 5), ("1.21", READ_BUILDS * 3 // 5)]
    )
    plain = synthetic.write_project(work, "plain", builds)
    sized = synthetic.write_project(work, "sized", [synthetic.with_integrity(b) for b in builds])
    print(
        f"reading one file of {READ_BUILDS:,} builds ({os.path.getsize(plain) / 1e6:.1f} MB; "
        f"with sha256 and size {os.path.getsize(sized) / 1e6:.1f} MB), CPU ms, the best of 20 "
        f"reads; medians of {rounds} processes"
    )
    runs = {checkout: [] for checkout in checkouts}
    for _ in range(rounds):
        for checkout in checkouts:  # in turn
            out = subprocess.run(
                [sys.executable, "-c", TIMED_READS, checkout, plain, sized],
                check=True,
                capture_output=True,
                text=True,
                timeout=300,
            ).stdout.split()
            runs[checkout].append((float(out[0]), float(out[1]), out[2:]))
    for checkout, results in runs.items():
        without, with_integrity = ([r[i] * 1e3 for r in results] for i in (0, 1))
        ratios = [b / a for a, b in zip(without, with_integrity)]  # each process's own
        ratio = statistics.median(ratios)
        fast = ", ".join(f"{'yes' if read == 'True' else 'no'}" for read in results[0][2])
        print(
            f"  {checkout}\n"
            f"    without sha256 and size   {statistics.median(without):6.1f} ms  "
            f"({shown(without, 'ms', 1)})\n"
            f"    with them                 {statistics.median(with_integrity):6.1f} ms  "
            f"({shown(with_integrity, 'ms', 1)})\n"
            f"    ratio (target <= {READ_RATIO_GOAL})        {ratio:6.2f}     "
            f"{'ok' if ratio <= READ_RATIO_GOAL else 'MISSED'}   ({shown(ratios, '', 2).strip()})"
            f"\n    read by the fast path     {fast}"
        )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--projects", type=int, default=50)
    parser.add_argument("--builds", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=("reading", "start-up"), help="run one part")
    parser.add_argument(
        "--compare", metavar="CHECKOUT", help="read the file with this checkout's code too"
    )
    args = parser.parse_args(argv)
    rounds = args.rounds
    with tempfile.TemporaryDirectory() as work:
        if args.only != "start-up":
            checkouts = [harness.ROOT] + ([os.path.abspath(args.compare)] if args.compare else [])
            reading(work, rounds, checkouts)
        if args.only == "reading":
            return
        data_dir = synthetic.generate(os.path.join(work, "data"), [args.builds] * args.projects)
        size = sum(os.path.getsize(os.path.join(data_dir, n)) for n in os.listdir(data_dir))
        commits, distinct = distinct_messages(data_dir)
        print(
            f"{args.projects} projects x {args.builds} builds, {size / 1e6:.0f} MB of JSON, "
            f"{commits:,} commits with {distinct:,} different messages; medians of {rounds}, "
            "each in a fresh process"
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
        starts = [first_answers(data_dir) for _ in range(rounds)]
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
            f"  resident after the first answers      {rss:6.0f} MB  (peak {peak:.0f} MB; "
            f"target <= 150: {'ok' if max(rss, peak) <= 150 else 'MISSED'}; "
            f"{shown([s[2] for s in starts], 'MB', 1)})"
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
