"""What a publish into an S3 store costs: the memory and time goals of issue 36.

    python bench/s3.py            # about a minute; needs the [test] extra (SeaweedFS)

It starts SeaweedFS (tests/seaweedfs.py) on 127.0.0.1, then runs, each in a process of its
own: `buildshelf publish --file` of a 1 KiB file and of a 512 MiB one into the same bucket
(--artifacts s3://...), and boto3's own `upload_file` of the same 512 MiB file to the same
store. It prints each one's peak resident memory (its own, from wait4) and wall time, then
the two figures the goals name: the 512 MiB publish's memory over the 1 KiB one's (at most
30 MB) and its time over upload_file's (at most 1.5).
"""

import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")
)
import seaweedfs  # noqa: E402

BIG = 512 << 20
UPLOAD_FILE = """
import sys, boto3
boto3.client("s3").upload_file(sys.argv[1], sys.argv[2], "boto3/" + sys.argv[3])
"""


def run(argv, environ):
    """(peak RSS in MB, wall seconds) of the process `argv`, which must succeed."""
    started = time.monotonic()
    process = subprocess.Popen(argv, env=environ, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    took = time.monotonic() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise SystemExit(f"{argv[:4]} failed ({process.returncode})")
    return usage.ru_maxrss / 1024, took


def main():
    with tempfile.TemporaryDirectory() as tmp:
        server = seaweedfs.SeaweedFS(tmp).start()
        try:
            bucket = server.bucket()
            environ = dict(os.environ, **server.environ)
            data = os.path.join(tmp, "data-dir")
            os.mkdir(data)
            with open(os.path.join(data, "alpha.json"), "w") as f:
                json.dump({"ciJob": "a", "ciJobUrl": "https://ci.example.org/job/a/",
                           "builds": []}, f)  # fmt: skip
            small, big = os.path.join(tmp, "small.jar"), os.path.join(tmp, "big.jar")
            with open(small, "wb") as f:
                f.write(os.urandom(1024))
            with open(big, "wb") as f:
                for _ in range(BIG >> 20):
                    f.write(os.urandom(1 << 20))
            publish = [sys.executable, "-m", "buildshelf", "publish", "alpha", "--data", data,
                       "--artifacts", f"s3://{bucket}/kept", "--channel", "1", "--url",
                       "https://ci.example.org/run/1"]  # fmt: skip
            rss_small, t_small = run([*publish, "--build", "1", "--file", small], environ)
            rss_big, t_big = run([*publish, "--build", "2", "--file", big], environ)
            rss_boto, t_boto = run([sys.executable, "-c", UPLOAD_FILE, big, bucket, "big"], environ)
        finally:
            server.stop()
    print(f"publish 1 KiB:      peak RSS {rss_small:6.1f} MB, {t_small:6.2f} s")
    print(f"publish 512 MiB:    peak RSS {rss_big:6.1f} MB, {t_big:6.2f} s")
    print(f"boto3 upload_file:  peak RSS {rss_boto:6.1f} MB, {t_boto:6.2f} s")
    print(f"512 MiB publish's memory over 1 KiB's: {rss_big - rss_small:.1f} MB (goal: <= 30)")
    print(f"512 MiB publish's time over upload_file's: {t_big / t_boto:.2f} (goal: <= 1.5)")


if __name__ == "__main__":
    main()
