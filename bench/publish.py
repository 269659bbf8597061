"""How long `buildshelf publish` takes, and how soon a running server serves what it wrote.

    python bench/publish.py      # about a minute

On a temporary copy of synthetic data (bench/synthetic.py), it prints: the wall time of one
publish into projects of 45 to 20,000 builds (the interpreter's start included, as CI pays it),
of 20 publishes started at once on one project (and whether all 20 landed), and the delay from
publish's exit to the real server (started on a free port of 127.0.0.1) serving the build.
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import harness
import synthetic
from harness import ROOT

CLI = ["-m", "buildshelf"]  # the command line, after the interpreter


def publish(data_dir, slug, number, wait=True):
    argv = [
        sys.executable,
        *CLI,
        "publish",
        slug,
        "--build",
        str(number),
        "--channel",
        "9.9",
        "--download-url",
        f"https://dl.example.org/{number}.jar",
        "--data",
        data_dir,
    ]
    if not wait:
        return subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def builds(data_dir, slug):
    with open(os.path.join(data_dir, f"{slug}.json"), "rb") as f:
        return [b["buildNumber"] for b in json.load(f)["builds"]]


def served_delays(data_dir, rounds=10):
    target = "/api/v2/builds/latest?project=p00&channel=9.9"
    with harness.Server.buildshelf(data_dir, ["--quiet"]) as server:
        delays = []
        for number in range(900_000, 900_000 + rounds):
            publish(data_dir, "p00", number)
            published = time.monotonic()
            while True:
                reply = harness.fetch(server.port, target, timeout=5)
                if reply.status == 200 and reply.json()["buildNumber"] == number:
                    break  # 404 until the first build of channel 9.9 is served
                if time.monotonic() > published + 10:
                    raise SystemExit(f"build {number} was not served within 10 s")
                time.sleep(0.01)
            delays.append(time.monotonic() - published)
        return delays


def main():
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = synthetic.generate(os.path.join(tmp, "data"), [2000, 20000])
        shutil.copy(os.path.join(ROOT, "data", "tinplate.json"), data_dir)
        for slug, size in (("tinplate", 45), ("p00", 2000), ("p01", 20000)):
            times = [publish(data_dir, slug, 800_000 + n) for n in range(5)]
            rows.append(
                (
                    f"one publish, {size:,} builds (median of 5)",
                    f"{statistics.median(times) * 1000:.0f} ms",
                )
            )
        before = builds(data_dir, "p00")
        started = time.perf_counter()
        procs = [publish(data_dir, "p00", 700_000 + n, wait=False) for n in range(20)]
        codes = [proc.wait() for proc in procs]
        wall = time.perf_counter() - started
        landed = len(set(builds(data_dir, "p00")) - set(before))
        rows.append(
            (
                "20 publishes at once, 2,000 builds",
                f"{wall:.1f} s, {landed}/20 landed, exit codes {sorted(set(codes))}",
            )
        )
        delays = served_delays(data_dir)
        rows.append(
            (
                "publish exit -> served (10 rounds)",
                f"median {statistics.median(delays):.2f}"
                f" s, max {max(delays):.2f} s (reload interval 1 s)",
            )
        )
    width = max(len(name) for name, _ in rows)
    for name, figure in rows:
        print(f"{name:<{width}}  {figure}")
    return 0 if landed == 20 and set(codes) == {0} else 1


if __name__ == "__main__":
    sys.exit(main())
