"""What a publish into an S3 store costs: the memory and time goals of issue 36.

    python bench/s3.py            # about two minutes; needs the [test] extra (SeaweedFS)
    python bench/s3.py --rounds 1 # one round: a minute

It starts SeaweedFS (tests/seaweedfs.py) on 127.0.0.1, then runs, each in a process of its
own: `buildshelf publish --file` of a 1 KiB file and of a 512 MiB one into the same bucket
(--artifacts s3://...), and boto3's own `upload_file` of the same 512 MiB file to the same
store, `--rounds` times in turn (each round into a prefix of its own, so that every publish
sends its bytes). It prints each one's peak resident memory and wall time (the medians of the
rounds), then the two figures the goals name: the 512 MiB publish's memory over the 1 KiB
one's (at most 30 MB) and its time over upload_file's (at most 1.5).

A process's peak is its own VmHWM (/proc/self/status), which it writes as it exits, and,
to check it, the last VmHWM this process saw sampling /proc/PID/status every 5 ms. Not the
ru_maxrss of wait4: Linux carries into it the RSS of the memory a process had before its
exec, which for a child of subprocess (vfork) is this process's own, 80 MB, so that every
child measured at least that and the difference between two was lost (0.3 MB, where the
peaks differed by 30).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")
)
import seaweedfs  # noqa: E402

BIG = 512 << 20
SAMPLE_SECONDS = 0.005
# Run first in each measured process: its VmHWM written to the file argv[1] as it exits.
PEAK_AT_EXIT = """
import atexit, sys
def peak(path=sys.argv.pop(1)):
    with open("/proc/self/status") as status, open(path, "w") as out:
        out.write(next(line for line in status if line.startswith("VmHWM:")))
atexit.register(peak)
"""
PUBLISH = PEAK_AT_EXIT + "import runpy; runpy.run_module('buildshelf', run_name='__main__')"
UPLOAD_FILE = (
    PEAK_AT_EXIT
    + """
import boto3
boto3.client("s3").upload_file(sys.argv[1], sys.argv[2], sys.argv[3])
"""
)


def vmhwm_mb(text):
    """The VmHWM of a /proc/PID/status line (kB) in MB."""
    return int(text.split()[1]) * 1024 / 1e6


def run(code, argv, environ, scratch):
    """(peak RSS in MB as the process saw it, as sampled, wall seconds) of `python -c code
    argv`, which must succeed."""
    peak_file = os.path.join(scratch, "peak")
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-c", code, peak_file, *argv], env=environ, stdout=subprocess.DEVNULL
    )
    sampled = 0.0
    while process.poll() is None:
        try:
            with open(f"/proc/{process.pid}/status") as status:
                for line in status:
                    if line.startswith("VmHWM:"):
                        sampled = max(sampled, vmhwm_mb(line))
        except OSError:  # it exited meanwhile
            pass
        time.sleep(SAMPLE_SECONDS)
    took = time.monotonic() - started
    if process.returncode:
        raise SystemExit(f"{argv[:3]} failed ({process.returncode})")
    with open(peak_file) as f:
        return vmhwm_mb(f.read()), sampled, took


def data_directory(tmp, name):
    path = os.path.join(tmp, name)
    os.mkdir(path)
    with open(os.path.join(path, "alpha.json"), "w") as f:
        json.dump({"ciJob": "a", "ciJobUrl": "https://ci.example.org/job/a/", "builds": []}, f)
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    runs = {"small": [], "big": [], "boto3": []}
    with tempfile.TemporaryDirectory() as tmp:
        server = seaweedfs.SeaweedFS(tmp).start()
        try:
            bucket = server.bucket()
            environ = dict(os.environ, **server.environ)
            small, big = os.path.join(tmp, "small.jar"), os.path.join(tmp, "big.jar")
            with open(small, "wb") as f:
                f.write(os.urandom(1024))
            with open(big, "wb") as f:
                for _ in range(BIG >> 20):
                    f.write(os.urandom(1 << 20))
            for n in range(args.rounds):
                data = data_directory(tmp, f"data-{n}")
                publish = ["publish", "alpha", "--data", data, "--artifacts",
                           f"s3://{bucket}/kept-{n}", "--channel", "1", "--url",
                           "https://ci.example.org/run/1"]  # fmt: skip
                runs["small"].append(run(PUBLISH, [*publish, "--build", "1", "--file", small],
                                         environ, tmp))  # fmt: skip
                runs["big"].append(run(PUBLISH, [*publish, "--build", "2", "--file", big],
                                       environ, tmp))  # fmt: skip
                runs["boto3"].append(run(UPLOAD_FILE, [big, bucket, f"boto3/big-{n}"],
                                         environ, tmp))  # fmt: skip
        finally:
            server.stop()
    medians = {name: [statistics.median(m) for m in zip(*got)] for name, got in runs.items()}
    print(f"{args.rounds} rounds; medians of peak RSS (VmHWM at exit, sampled) and wall time")
    for name, said in (("small", "publish 1 KiB"), ("big", "publish 512 MiB"),
                       ("boto3", "boto3 upload_file")):  # fmt: skip
        peak, sampled, took = medians[name]
        print(f"{said + ':':20}peak RSS {peak:6.1f} MB (sampled {sampled:6.1f}), {took:6.2f} s")
    over = [big[0] - small[0] for small, big in zip(runs["small"], runs["big"])]
    ratios = [big[2] / boto[2] for big, boto in zip(runs["big"], runs["boto3"])]
    print(f"512 MiB publish's memory over 1 KiB's: {statistics.median(over):.1f} MB "
          f"(rounds: {', '.join(f'{o:.1f}' for o in over)}; goal: <= 30)")  # fmt: skip
    print(f"512 MiB publish's time over upload_file's: {statistics.median(ratios):.2f} "
          f"(rounds: {', '.join(f'{r:.2f}' for r in ratios)}; goal: <= 1.5)")  # fmt: skip


if __name__ == "__main__":
    main()
